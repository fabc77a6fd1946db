"""Dashboard, collections, locks and consistency: read-only pages over the mirror.

Every page reads only the Django mirror (never ZooKeeper's tree) with a fixed number
of aggregate queries, whatever the number of jobs; the dashboard also shows ZooKeeper's
own znode count (``mntr``, cached for a few seconds) and the dependencies' circuit breakers,
a handful of nodes of our own (``dashboard.dependencies``).

A depositor (``ui.reading_scope``) sees the queue's counts and pause, and of holds, windows,
running items and collections only their own; locks and consistency findings, which name
items of every collection, only a reader of every collection sees.
"""

from collections import Counter
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import render
from django.utils import timezone

from accessui import views as access_pages
from batches.filters import AWAITING_FILTER, awaiting_q
from batches.models import Collection
from dashboard import queries as q
from dashboard import workers as w
from dashboard.causes import CAUSES_CACHE_SECONDS, failure_causes
from dashboard.dependencies import dependencies
from dashboard.diagram import diagram
from dashboard.throughput import THROUGHPUT_CACHE_SECONDS, throughput
from jobs.models import awaiting_review
from jobs.waitfacts import queue_facts
from jobs.waitquery import waiting_rows
from merritt_queue.core.states import BATCH, JOB
from pipeline.capacity import usage
from steering.actions.catalog import ACTIONS
from steering.permissions import Role, may, role_of
from steering.twoperson.views import waiting_count
from steering.windows.listing import scheduled_next
from ui.ahead import AHEAD_CACHE_SECONDS, ahead, release_previews
from ui.reading_scope import (
    in_readable,
    readable_collections,
    readable_rows,
    readable_windows,
    reads_everything,
)

# Findings shown on one consistency page; the rest are counted, and filtered by ?kind=.
FINDINGS_SHOWN = 500


def _unknown(counts: dict[str, int], known: tuple[str, ...]) -> dict[str, int]:
    """Mirror rows whose status no machine knows: shown, never silently dropped."""
    return {s: n for s, n in counts.items() if s not in known}


# What people act on, counted at the top of the dashboard: on a phone the diagrams that also
# count them are wider than the screen (issue 32).
ACT_ON = ("Failed", "Held")


def _act_on(job_counts: dict[str, int], batch_counts: dict[str, int]) -> list[dict]:
    found = []
    for status in ACT_ON:
        for scope, counts, url, nouns in (
            ("job", job_counts, q.jobs_url, ("job", "jobs")),
            ("batch", batch_counts, q.batches_url, ("batch", "batches")),
        ):
            n = counts.get(status, 0)
            words = f"{status.lower()} {nouns[n != 1]}"
            found.append(
                {
                    "scope": scope,
                    "status": status,
                    "count": n,
                    "href": url(status=status),
                    "words": words,
                }
            )
    return [*found, _awaiting_approval(), _awaiting_review()]


def _awaiting_approval() -> dict:
    """The batches an operator must approve or reject before they start."""
    n = q.Batch.objects.filter(awaiting_q(), removed_at__isnull=True).count()
    return {
        "scope": "batch",
        "status": "awaiting",
        "count": n,
        "href": q.batches_url(approval=AWAITING_FILTER),
        "words": f"{'batch' if n == 1 else 'batches'} awaiting approval",
    }


def _awaiting_review() -> dict:
    """Jobs whose destructive update waits for a person (they count among the Held too)."""
    n = q.Job.objects.filter(awaiting_review(), removed_at__isnull=True).count()
    return {
        "scope": "job",
        "status": "Held",
        "count": n,
        "href": q.jobs_url(awaiting="1"),
        "words": f"{('job', 'jobs')[n != 1]} awaiting approval",
    }


@login_required
def dashboard(request):
    job_counts = q.status_counts(q.Job)
    batch_counts = q.status_counts(q.Batch)
    held = _held(request.user)
    context = {
        "job_diagram": diagram(JOB, job_counts, lambda s: q.jobs_url(status=s)),
        "batch_diagram": diagram(BATCH, batch_counts, lambda s: q.batches_url(status=s)),
        "act_on": _act_on(job_counts, batch_counts),
        "job_total": sum(job_counts.values()),
        "batch_total": sum(batch_counts.values()),
        "job_unknown": _unknown(job_counts, JOB.statuses),
        "batch_unknown": _unknown(batch_counts, BATCH.statuses),
        "failed_by_step": q.failures_by_step(),
        # Their example texts come from every collection's content.
        "failure_causes": failure_causes() if reads_everything(request.user) else [],
        "causes_cache_seconds": CAUSES_CACHE_SECONDS,
        "may_resume": may(request.user, ACTIONS["job.resume"]),
        "throughput": throughput(),
        "throughput_cache_seconds": THROUGHPUT_CACHE_SECONDS,
        "held": held,
        "ahead": ahead(job_counts),
        # The working disk is the site's, not a depositor's concern.
        "ahead_disk": reads_everything(request.user),
        "ahead_cache_seconds": AHEAD_CACHE_SECONDS,
        "releases": release_previews([c.mnemonic for c in held], by_hold_only=True).values(),
        # Why jobs wait, counted over every collection: for those who read them all.
        "waiting": waiting_rows(queue_facts()) if reads_everything(request.user) else [],
        "scheduled": scheduled_next(rows=readable_windows(request.user)),
        "mirror": q.mirror_summary(),
        # The mirror's job count stands for the tree's (it follows it within seconds).
        "capacity": usage(sum(job_counts.values())),
        **_dependencies(request.user),
        "deletion_requests": waiting_count(request.user),
        # Merritt's access queue: its requests by state (the mirror), its pause (two nodes).
        "access_queues": access_pages.queue_facts(request.user, access_pages.pause_states()),
    }
    return render(request, "dashboard/home.html", context)


def _dependencies(user) -> dict[str, Any]:
    """The Dependencies panel, for those who read every collection: a breaker's last error
    names internal addresses and depositors' hosts."""
    if not reads_everything(user):
        return {"show_dependencies": False}
    rows, error = dependencies()
    return {
        "show_dependencies": True,
        "dependencies": rows,
        "dependencies_error": error,
        "may_switch_breakers": may(user, ACTIONS["dependency.open"]),
        "breaker_threshold": settings.MQ_BREAKER_THRESHOLD,
        "breaker_cool_off": settings.MQ_BREAKER_COOL_OFF_SECONDS,
    }


def _held(user) -> list[Collection]:
    return q.held_collections(in_readable(user, Collection.objects.all(), "mnemonic"))


@login_required
def collections(request):
    rows = q.collection_rows()
    allowed = readable_collections(request.user)
    if allowed is not None:
        rows = [r for r in rows if r.mnemonic in allowed]
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
    hidden = not reads_everything(request.user)
    if hidden:  # their paths and data name any collection's items
        state.groups, state.item_locked_at = [], {}
    running, more = q.running_jobs(rows=readable_rows(request.user, q.Job.objects.all()))
    batches = q.running_batches(readable_rows(request.user, q.Batch.objects.all()))
    now = timezone.now()
    rows: list[Any] = [*running, *batches]  # each gains its ages, for the template
    for item in rows:  # when its own lock was taken, if the mirror read it
        item.locked_age = q.age(
            state.item_locked_at.get(getattr(item, "jid", None) or item.bid), now
        )
        item.status_age = q.age(item.last_modified, now)
    context = {
        "state": state,
        "held": _held(request.user),
        # Why jobs wait, counted over every collection: for those who read them all.
        "waiting": waiting_rows(queue_facts()) if reads_everything(request.user) else [],
        "running_jobs": running,
        "running_more": more,
        "running_batches": batches,
        "hidden": hidden,
    }
    return render(request, "dashboard/locks.html", context)


@login_required
def consistency(request):
    check = q.last_check()
    detail = check.detail if check else {}
    everything = reads_everything(request.user)  # findings name any collection's items
    findings = (detail.get("findings") or []) if everything else []
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
        "hidden": not everything,
    }
    return render(request, "dashboard/consistency.html", context)


@login_required
def workers(request):
    """Each worker process, what it runs, and the dispatcher's and reconciler's health: for
    operators and administrators, who can drain a worker from here."""
    if role_of(request.user) < Role.OPERATOR:
        raise PermissionDenied(f"the Workers page is for the {Role.OPERATOR} role and above")
    context = {
        "board": w.board(request.user),
        "drain": ACTIONS["worker.drain"],
        "undrain": ACTIONS["worker.undrain"],
        "may_drain": may(request.user, ACTIONS["worker.drain"]),
        "silent_seconds": int(w.settings.MQ_WORKER_SILENT_SECONDS),
    }
    return render(request, "dashboard/workers.html", context)
