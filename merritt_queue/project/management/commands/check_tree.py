"""``manage.py check_tree``: report (and with ``--repair`` mend) inconsistencies of the queue tree.

Exit code 0 when nothing is left to fix, 1 when findings remain unrepaired.
Without ``--repair`` nothing is written to the tree (see merritt_queue.core.treecheck.consistency).
The findings and the time of the run are saved in the mirror, as
``MirrorState(name="consistency")``, for the /consistency/ page. The Maintenance page runs
the same check (``merritt_queue.project.treecheck``).
"""

import json
import sys
from dataclasses import asdict

from django.core.management.base import BaseCommand

from ...treecheck import lock_max_age, outcome, run_check, save_findings


class Command(BaseCommand):
    help = "Check the ZooKeeper queue tree for orphans, bad index entries and stale locks."

    def add_arguments(self, parser):
        parser.add_argument("--repair", action="store_true", help="make the safe repairs")
        parser.add_argument("--json", action="store_true", help="print the findings as JSON")
        parser.add_argument(
            "--lock-max-age",
            type=float,
            default=None,
            metavar="SECONDS",
            help="a lock older than this is stale (default: MQ_LOCK_STALE_SECONDS, else 3600)",
        )

    def handle(self, *args, **opts):
        max_age = lock_max_age(opts["lock_max_age"])
        findings = run_check(repair=opts["repair"], max_age=max_age)
        try:
            save_findings(findings, opts["repair"], max_age)
        except Exception as e:  # the report below matters more than the page: still print it
            self.stderr.write(f"check_tree: findings not saved to the mirror database: {e}")
        if opts["json"]:
            self.stdout.write(json.dumps([asdict(f) for f in findings], indent=2))
        else:
            for f in findings:
                self.stdout.write(f"{f.kind}  {f.path}  {f.reason}  {outcome(f, opts['repair'])}")
            repaired = sum(f.repaired for f in findings)
            self.stdout.write(f"{len(findings)} finding(s), {repaired} repaired")
        if any(not f.repaired for f in findings):
            sys.exit(1)
