"""The process that runs a bench ``bulk`` action, as an ``mq-admin`` worker would: one admin
action (its pk the only argument) run by ``steering.tasks.run_admin_action`` in a process of
its own, so that its peak resident memory is the run's alone. Prints one JSON line."""

from __future__ import annotations

import json
import resource
import sys
import time


def main(pk: int) -> None:
    import django

    django.setup()
    from steering.tasks import run_admin_action

    start = time.perf_counter()
    said = run_admin_action(pk)
    seconds = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"said": said, "seconds": seconds, "peak_rss_mb": peak_kb / 1024}))


if __name__ == "__main__":
    main(int(sys.argv[1]))
