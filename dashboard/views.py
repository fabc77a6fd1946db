"""Dashboard, collections, locks and consistency: read-only pages over the mirror.

Every page reads only the Django mirror (never ZooKeeper's tree) with a fixed number
of aggregate queries, whatever the number of jobs; the dashboard also shows ZooKeeper's
own znode count (``mntr``, cached for a few seconds).
"""

from collections import Counter

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils import timezone

from batches.capacity import usage
from dashboard import queries as q
from dashboard.causes import CAUSES_CACHE_SECONDS, failure_causes
from dashboard.diagram import diagram
from dashboard.throughput import THROUGHPUT_CACHE_SECONDS, throughput
from merritt_queue.core.states import BATCH, JOB
from steering.catalog import ACTIONS
from steering.permissions import may
from steering.windowlist import scheduled_next
from ui.reading_scope import readable_collections

# Findings shown on one consistency page; the rest are counted, and filtered by ?kind=.
FINDINGS_SHOWN = 500


def _unknown(counts: dict[str, int], known: tuple[str, ...]) -> dict[str, int]:
    """Mirror rows whose status no machine knows: shown, never silently dropped."""
    return {s: n for s, n in counts.items() if s not in known}


@login_required
def dashboard(request):
    job_counts = q.status_counts(q.Job)
    batch_counts = q.status_counts(q.Batch)
    context = {
        "job_diagram": diagram(JOB, job_counts, lambda s: q.jobs_url(status=s)),
        "batch_diagram": diagram(BATCH, batch_counts, lambda s: q.batches_url(status=s)),
        "job_total": sum(job_counts.values()),
        "batch_total": sum(batch_counts.values()),
        "job_unknown": _unknown(job_counts, JOB.statuses),
        "batch_unknown": _unknown(batch_counts, BATCH.statuses),
        "failed_by_step": q.failures_by_step(),
        # Their example texts come from every collection's content.
        "failure_causes": failure_causes() if readable_collections(request.user) is None else [],
        "causes_cache_seconds": CAUSES_CACHE_SECONDS,
        "may_resume": may(request.user, ACTIONS["job.resume"]),
        "throughput": throughput(),
        "throughput_cache_seconds": THROUGHPUT_CACHE_SECONDS,
        "held": q.held_collections(),
        "scheduled": scheduled_next(),
        "mirror": q.mirror_summary(),
        # The mirror's job count stands for the tree's (it follows it within seconds).
        "capacity": usage(sum(job_counts.values())),
    }
    return render(request, "dashboard/home.html", context)


@login_required
def collections(request):
    rows = q.collection_rows()
    context = {
        "rows": rows,
        "statuses": JOB.statuses,
        "held": sum(1 for r in rows if r.hold and r.hold.held),
        "cache_seconds": q.COLLECTION_COUNTS_CACHE_SECONDS,
    }
    return render(request, "dashboard/collections.html", context)


@login_required
def locks(request):
    state = q.lock_state()
    running, more = q.running_jobs()
    batches = q.running_batches()
    now = timezone.now()
    for item in [*running, *batches]:  # when its own lock was taken, if the mirror read it
        item.locked_age = q.age(
            state.item_locked_at.get(getattr(item, "jid", None) or item.bid), now
        )
        item.status_age = q.age(item.last_modified, now)
    context = {
        "state": state,
        "held": q.held_collections(),
        "running_jobs": running,
        "running_more": more,
        "running_batches": batches,
    }
    return render(request, "dashboard/locks.html", context)


@login_required
def consistency(request):
    check = q.last_check()
    detail = check.detail if check else {}
    findings = detail.get("findings") or []
    kind = request.GET.get("kind", "")
    shown = [f for f in findings if not kind or f.get("kind") == kind]
    shown.sort(key=lambda f: bool(f.get("repaired")))  # what is still open first
    context = {
        "check": check,
        "detail": detail,
        "kinds": Counter(f.get("kind", "") for f in findings).most_common(),
        "kind": kind,
        "findings": shown[:FINDINGS_SHOWN],
        "more": max(0, len(shown) - FINDINGS_SHOWN),
    }
    return render(request, "dashboard/consistency.html", context)
