"""``manage.py check_tree``: report (and with ``--repair`` mend) inconsistencies of the queue tree.

Exit code 0 when nothing is left to fix, 1 when findings remain unrepaired.
Without ``--repair`` nothing is written (see merritt_queue.consistency).
"""

import json
import sys
from dataclasses import asdict

from django.conf import settings
from django.core.management.base import BaseCommand

from merritt_queue.consistency import Finding, check_tree
from merritt_queue.runtime import get_store


def outcome(finding: Finding, repairing: bool) -> str:
    if finding.repaired:
        return f"-> repaired: {finding.repair}"
    if finding.repair is None:
        return "-> fix by hand"
    if repairing:
        return f"-> repair failed: {finding.repair}"
    return f"-> would repair: {finding.repair}"


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
        max_age = opts["lock_max_age"]
        if max_age is None:
            max_age = getattr(settings, "MQ_LOCK_STALE_SECONDS", 3600)
        # No store.init(): a check must not write, not even the empty containers.
        findings = check_tree(get_store(), repair=opts["repair"], lock_max_age=max_age)
        if opts["json"]:
            self.stdout.write(json.dumps([asdict(f) for f in findings], indent=2))
        else:
            for f in findings:
                self.stdout.write(f"{f.kind}  {f.path}  {f.reason}  {outcome(f, opts['repair'])}")
            repaired = sum(f.repaired for f in findings)
            self.stdout.write(f"{len(findings)} finding(s), {repaired} repaired")
        if any(not f.repaired for f in findings):
            sys.exit(1)
