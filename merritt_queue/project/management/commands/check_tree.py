"""``manage.py check_tree``: report (and with ``--repair`` mend) inconsistencies of the queue tree.

Exit code 0 when nothing is left to fix, 1 when findings remain unrepaired.
Without ``--repair`` nothing is written to the tree (see merritt_queue.core.treecheck.consistency).
The findings and the time of the run are saved in the mirror, as
``MirrorState(name="consistency")``, for the /consistency/ page.
"""

import json
import sys
from dataclasses import asdict

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from jobs.models import MirrorState

from ....core.history import REPAIR
from ....core.treecheck.consistency import Finding, check_tree
from ...runtime import get_store

# Findings saved for the page; a tree broken beyond that is counted, not listed.
MAX_SAVED_FINDINGS = 5000


def save_findings(findings: list[Finding], repairing: bool, lock_max_age: float) -> None:
    """Keep this run's findings in the mirror (one row, replaced by each run)."""
    detail = {
        "repair": repairing,
        "lock_max_age": lock_max_age,
        "total": len(findings),
        "repaired": sum(f.repaired for f in findings),
        "unrepaired": sum(not f.repaired for f in findings),
        "truncated": len(findings) > MAX_SAVED_FINDINGS,
        # Unrepaired first, so a cut list still shows what is left to do.
        "findings": [asdict(f) for f in sorted(findings, key=lambda f: f.repaired)][
            :MAX_SAVED_FINDINGS
        ],
    }
    MirrorState.objects.update_or_create(
        name="consistency", defaults={"at": timezone.now(), "detail": detail}
    )


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
        store = get_store(init=False)
        store.actor = REPAIR
        findings = check_tree(store, repair=opts["repair"], lock_max_age=max_age)
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
