"""``python -m bench.profiled <stats> <script> [args]``: run a script under cProfile timed
by its main thread's CPU time, not the wall clock (``BENCH_PROFILE_CLOCK=cpu``).

The wall clock charges a function for the time it waits (a ZooKeeper answer, an fsync);
the thread's CPU time charges it for what it costs the machine, which is what
``cpu_ms_per_job`` counts. kazoo's connection thread is left out: its share is in the
process's total only.
"""

from __future__ import annotations

import cProfile
import runpy
import sys
import time

if __name__ == "__main__":
    stats, script, *args = sys.argv[1:]
    sys.argv = [script, *args]
    profile = cProfile.Profile(time.thread_time)
    try:
        profile.runcall(runpy.run_path, script, run_name="__main__")
    finally:
        profile.dump_stats(stats)
