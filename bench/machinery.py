"""``manage.py`` with every job step's handler replaced by one that succeeds at once.

For ``bench pipeline`` only, which runs its queue a second time this way: what is left is
the machinery the issue prescribes around the handlers (the dispatcher, an RQ job per
(job, state), a ZooKeeper lock, a commit multi and a re-check per step, the mirror), so its
rate is the most any handlers could reach on this machine. Never a deployment's entry point:
jobs run by it complete without anything stored.

Run as a file (``python bench/machinery.py <command> ...``) from the repository's root.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _handlers(services) -> dict:
    """The real table's states, each with a handler that succeeds at once."""
    from merritt_queue.core.runner import Outcome
    from pipeline.jobhandlers import handlers

    def succeed(_job):
        return Outcome.success("bench: machinery only")

    return dict.fromkeys(handlers(services), succeed)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "merritt_queue.project.settings")
    import django

    django.setup()
    from jobs import tasks

    tasks.handlers = _handlers
    from django.core.management import execute_from_command_line

    execute_from_command_line(["manage.py", *sys.argv[1:]])
