"""``manage.py reconcile --full | --watch``: rebuild the Django mirror from ZooKeeper, or follow it.

``--full`` rebuilds once and prints what differed (drift); while it runs, a progress
line on stderr every ``--progress-seconds`` (``mirror.progressline``). ``--watch`` follows
the tree with watches, with a full rebuild every MQ_RECONCILE_SECONDS, until
SIGTERM or SIGINT; the signal only asks the loop to stop after its turn. The Maintenance
page runs the same full rebuild (``mirror.facade.full_reconcile``).
"""

import logging
import signal
import threading

from django.core.management.base import BaseCommand

from merritt_queue.project.runtime import get_store
from mirror import facade as mirror
from mirror.follow import Follower
from mirror.progressline import ProgressLine

SHOWN = 5  # ids listed per kind of drift


def report(drift: mirror.Drift) -> list[str]:
    return mirror.report_lines(drift, SHOWN)


class Command(BaseCommand):
    help = "Rebuild the Django mirror from ZooKeeper (--full) or follow it with watches (--watch)."

    def add_arguments(self, parser):
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--full", action="store_true", help="rebuild once and report drift")
        mode.add_argument("--watch", action="store_true", help="follow until SIGTERM/SIGINT")
        parser.add_argument(
            "--progress-seconds",
            type=float,
            default=5.0,
            help="--full: seconds between progress lines on stderr (0: after every chunk)",
        )

    def handle(self, *args, **opts):
        store = get_store()
        if opts["full"]:
            progress = ProgressLine(self.stderr.write, opts["progress_seconds"])
            for line in report(mirror.full_reconcile(store, progress=progress)):
                self.stdout.write(line)
            return
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        self.stdout.write("following ZooKeeper into the mirror; stop with SIGTERM or Ctrl-C")
        Follower(store).run(stop)
        self.stdout.write("stopped")
