"""The consistency check as the queue runs it, from ``manage.py check_tree`` and from the
Maintenance page (``steering.maintenance.operations``) alike: check (and repair) the tree as the
repair actor, and keep the findings for the /consistency/ page."""

from __future__ import annotations

from dataclasses import asdict

from django.conf import settings
from django.utils import timezone

from jobs.models import MirrorState

from ..core import indexdirs, retention
from ..core.history import REPAIR
from ..core.treecheck.consistency import Finding, OnProgress, check_tree
from .runtime import get_store

# Findings saved for the page; a tree broken beyond that is counted, not listed.
MAX_SAVED_FINDINGS = 5000


def lock_max_age(given: float | None = None) -> float:
    """The age in seconds past which a lock is stale: ``given``, else the setting."""
    return given if given is not None else getattr(settings, "MQ_LOCK_STALE_SECONDS", 3600)


def run_check(
    *,
    repair: bool,
    max_age: float,
    progress: OnProgress | None = None,
    actor: str = REPAIR,
) -> list[Finding]:
    """Check the tree (and make the safe repairs when ``repair``, written as ``actor``);
    the findings."""
    # No store.init(): a check must not write, not even the empty containers.
    store = get_store(init=False)
    with store.changes.acting_as(actor):  # a worker's store serves its other jobs too
        findings = check_tree(store, repair=repair, lock_max_age=max_age, progress=progress)
    return findings + index_dir_findings(store)


def index_dir_findings(store) -> list[Finding]:
    """Each index directory past the warning share of a Java client's listing limit: nothing
    the check can repair (retention, or a person, removes what lets it shrink)."""
    sizes = indexdirs.measure(store.client, settings.MQ_ZK_MAXBUFFER)
    warned = [s for s in sizes if s.warning]
    return [
        Finding("index-dir-near-limit", s.path, text, None)
        for s, text in zip(warned, retention.warnings(warned), strict=True)
    ]


def summary(findings: list[Finding], repairing: bool, max_age: float) -> dict:
    """A run's settings and counts, as the /consistency/ page and a maintenance action's
    report both keep them next to their list of findings."""
    return {
        "repair": repairing,
        "lock_max_age": max_age,
        "total": len(findings),
        "repaired": sum(f.repaired for f in findings),
        "unrepaired": sum(not f.repaired for f in findings),
    }


def save_findings(findings: list[Finding], repairing: bool, max_age: float) -> None:
    """Keep this run's findings in the mirror (one row, replaced by each run)."""
    detail = {
        **summary(findings, repairing, max_age),
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
