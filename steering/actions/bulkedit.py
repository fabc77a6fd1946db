"""Edit and resume a selection of failed jobs at once: a form (a payload URL prefix to
replace, a digest algorithm to set), then a confirmation listing each job's before -> after
and one reason, signed and executed by ``steering.actions.views.run`` like every confirmation: one
admin action over the jobs, each job skipped if it changed since the page was shown.

The selection is the list's (``?ids=`` or ``?all=1`` with its filter), read from the mirror
and then from ZooKeeper, at most ``MAX_JOBS`` jobs: each is read whole for its preview.
"""

from __future__ import annotations

import os

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import QueryDict
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from kazoo.exceptions import KazooException

from jobs.filters import JobFilter
from jobs.models import Job
from merritt_queue.core import jobparams
from merritt_queue.core.errors import QueueError, ZooKeeperUnreachable
from merritt_queue.core.records import JobRecord
from merritt_queue.deposit.digest import SUPPORTED
from merritt_queue.project.runtime import get_store
from steering import confirmations
from steering.actions.bulkplan import BulkEdit, Planned, each_change, plan_job
from steering.actions.catalog import ACTIONS
from steering.actions.editdoor import AlgorithmField
from steering.actions.kinds import Target
from steering.permissions import collections_of, refusal

ACTION = "job.edit_resume"
SALT = "steering.confirm"  # the signature ``views.run`` checks
MAX_JOBS = 1000
SHOWN = 200  # jobs listed on a page
NOT_FILTER = {"all", "ids", "page", "sort", "per_page", "action", "mode", "next"}


class BulkForm(forms.Form):
    url_from = forms.CharField(
        required=False,
        strip=True,
        label="Replace the payload URL prefix",
        widget=forms.TextInput(attrs={"size": 70}),
    )
    url_to = forms.CharField(
        required=False,
        strip=True,
        label="with",
        widget=forms.TextInput(attrs={"size": 70}),
    )
    digest_type = AlgorithmField(
        required=False,
        label="Set the digest algorithm",
        choices=[("", "(leave as it is)"), *((name, name) for name in SUPPORTED)],
        help_text="each job keeps its own digest value, checked in the new algorithm's format",
    )

    def clean(self):
        data = super().clean()
        assert data is not None
        url_from, url_to = data.get("url_from"), data.get("url_to")
        if url_to and not url_from:
            self.add_error("url_from", "give the prefix the new one replaces")
        elif url_from and not url_to:
            self.add_error("url_to", "give the new prefix (a payload URL cannot be emptied)")
        elif url_from and url_from == url_to:
            self.add_error("url_to", "the new prefix is the one it replaces")
        elif not url_from and not data.get("digest_type"):
            raise forms.ValidationError("give a URL prefix to replace or an algorithm to set")
        return data

    def edit(self) -> BulkEdit:
        data = self.cleaned_data
        return BulkEdit(data["url_from"], data["url_to"], data["digest_type"])


def list_filter(query: QueryDict) -> str:
    """The job list's filter in ``query``, as the audit keeps an "all matching" selection."""
    filters = QueryDict(mutable=True)
    for key in query:
        if key not in NOT_FILTER:
            filters.setlist(key, query.getlist(key))
    return filters.urlencode()


def selected_ids(query: QueryDict) -> tuple[list[str], str]:
    """The job ids the query names, newest first, and what is wrong with it ("" if nothing)."""
    if query.get("all") == "1":
        # A row removed from the queue is history: nothing to edit.
        live = Job.objects.filter(removed_at__isnull=True)
        filterset = JobFilter(QueryDict(list_filter(query)), queryset=live)
        if not filterset.is_valid():
            return [], "the list's filter is not valid"
        ids = list(filterset.qs.order_by("-jid").values_list("jid", flat=True)[: MAX_JOBS + 1])
    else:
        parts = ",".join(query.getlist("ids")).split(",")
        ids = list(dict.fromkeys(p.strip() for p in parts if p.strip()))
    if len(ids) > MAX_JOBS:
        return [], f"more than {MAX_JOBS} jobs are selected: narrow the selection"
    if not ids:
        return [], "no jobs are selected"
    return ids, ""


def read_jobs(ids: list[str]) -> tuple[list[JobRecord], list[tuple[str, str]]]:
    """The jobs as ZooKeeper holds them now, and those that could not be read, with why;
    ``ZooKeeperUnreachable`` at the first that finds it gone, not a wait for each job."""
    store = get_store(init=False)
    jobs, unread = [], []
    for jid in ids:
        try:
            jobs.append(store.jobs.get_job(jid))
        except ZooKeeperUnreachable:
            raise
        except (QueueError, KazooException) as e:
            unread.append((jid, str(e)))
    return jobs, unread


def folder_of(jobs: list[JobRecord]) -> str:
    """The folder every job's payload URL is in (a moved folder is the prefix to replace), or
    "" when they share none beyond the host."""
    urls = [(job.configuration or {}).get("payload_url") or "" for job in jobs]
    common = os.path.commonprefix(urls).rpartition("/")[0] if all(urls) else ""
    return common + "/" if common.count("/") > 2 else ""


def _refusal(job: JobRecord, scope: set[str] | None) -> str | None:
    collection = get_store(init=False).holds.item_collection(job.configuration)
    target = Target(job.jid, job.status, job.status_version, collection, job.locked)
    return ACTIONS[ACTION].check(target, scope)


@never_cache
@login_required
def edit_selection(request):
    action = ACTIONS[ACTION]
    if problem := refusal(request.user, action):
        return confirmations.refused(request, action, problem)
    ids, error = selected_ids(request.GET)
    if error:
        return _form_page(request, [], [], None, error, 400)
    try:
        jobs, unread = read_jobs(ids)
    except ZooKeeperUnreachable as e:
        return _form_page(request, [], [], None, str(e), 503)
    if request.method != "POST":
        return _form_page(request, jobs, unread, BulkForm(initial={"url_from": folder_of(jobs)}))
    form = BulkForm(request.POST)
    if not form.is_valid():
        return _form_page(request, jobs, unread, form, "see the problems below", 400)
    scope = collections_of(request.user)
    planned = [plan_job(job, form.edit(), _refusal(job, scope)) for job in jobs]
    if not any(p.applies for p in planned):
        url_from = form.cleaned_data["url_from"]
        if url_from and not any(p.job_url.startswith(url_from) for p in planned):
            form.add_error("url_from", "no selected job's payload URL starts with this")
        error = "the edit applies to none of the selected jobs (see each job's reason)"
        return _form_page(request, jobs, unread, form, error, 400, planned)
    return confirm_page(request, form.edit(), planned, unread)


def _form_page(request, jobs, unread, form, error="", status=200, planned=None):
    why = {p.job.jid: p.why for p in planned or []}
    context = {
        "form": form,
        "jobs": [
            (
                job,
                jobparams.current(job.configuration, job.identifiers, job.metadata),
                why.get(job.jid, ""),
            )
            for job in jobs[:SHOWN]
        ],
        "count": len(jobs),
        "explained": bool(planned),
        "unread": unread,
        "error": error,
        "next": _next(request),
        "query": _query(request),
    }
    return render(request, "steering/bulk_edit.html", context, status=status)


def confirm_page(request, edit: BulkEdit, planned: list[Planned], unread, *, error="", reason=""):
    """Each job's before -> after and the step it restarts at, those left out with why, and
    one reason for all: confirmed, they are edited and resumed as one admin action."""
    applying = [p for p in planned if p.applies]
    payload = confirmations.sign(
        request,
        SALT,
        compress=True,
        action=ACTION,
        items=[[p.job.jid, p.job.status_version] for p in applying],
        selection=list_filter(request.GET) if request.GET.get("all") == "1" else "",
        steps=[],
        back="",
        params={"bulk": edit.as_params(), "each": each_change(planned)},
        edit={"bulk": _query(request), "next": _next(request)},
    )
    rows = [
        {
            "planned": p,
            "changes": [(jobparams.LABELS[n], b, a) for n, (b, a) in p.changes.items()],
        }
        for p in (applying + [p for p in planned if not p.applies])[:SHOWN]
    ]
    context = {
        "action": ACTIONS[ACTION],
        "edit": edit,
        "rows": rows,
        "count": len(planned),
        "applying": len(applying),
        "unread": unread,
        "payload": payload,
        "error": error,
        "reason": reason,
        "next": _next(request),
        "query": _query(request),
    }
    return render(request, "steering/bulk_edit_confirm.html", context, status=400 if error else 200)


def confirm_again(request, data: dict, error: str, reason: str):
    """The confirmation shown again (a missing reason), with the jobs read again."""
    edit = data.get("edit") or {}
    request.GET = QueryDict(edit.get("bulk", ""))
    ids, problem = selected_ids(request.GET)
    if problem:
        return _form_page(request, [], [], None, problem, 400)
    try:
        jobs, unread = read_jobs(ids)
    except ZooKeeperUnreachable as e:
        return _form_page(request, [], [], None, str(e), 503)
    bulk = BulkEdit.from_params((data.get("params") or {}).get("bulk") or {})
    scope = collections_of(request.user)
    planned = [plan_job(job, bulk, _refusal(job, scope)) for job in jobs]
    return confirm_page(request, bulk, planned, unread, error=error, reason=reason)


def _query(request) -> str:
    """The selection (and where the person came from), to come back to the same jobs."""
    return request.GET.urlencode()


def _next(request) -> str:
    """Where the person came from, if it is a page of this site (as ``views.safe_next``)."""
    url = request.GET.get("next", "")
    ok = url.startswith("/") and url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return url if ok else ""
