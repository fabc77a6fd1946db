"""Web side of admin actions: confirmation, execution, result and the audit trail.

Every action goes through one confirmation page listing each item and whether the
action applies to it. The page signs the items that apply, at the versions shown, with
a fresh token; executing verifies that signature and hands exactly those items to
``steering.actions.execution.execute``, which re-checks permissions and versions and records
everything. The token executes once: a confirmation submitted again (a double click, Back,
a second tab) acts on nothing and shows a fresh confirmation saying it was used, with the new
reason kept. Neither page is kept by the browser (``no-store``), so Back asks again.
"""

from __future__ import annotations

import csv
import logging
from urllib.parse import urlencode

import django_rq
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import (
    Http404,
    HttpResponse,
    HttpResponseBadRequest,
    QueryDict,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from redis.exceptions import RedisError

from steering import confirmations, tasks
from steering.actions import editing, plans, wholefilter
from steering.actions.catalog import ACTIONS
from steering.actions.collectionholds import release_choices
from steering.actions.execution import execute, run_items, start
from steering.actions.kinds import Action, Scope
from steering.actions.selection import NOT_FILTER, _ids, select
from steering.backlinks import came_from, safe_next
from steering.maintenance.operations import OPERATIONS
from steering.models import MAINTENANCE, AdminAction, AdminActionItem
from steering.permissions import refusal
from steering.runs import starting
from steering.runs import views as runviews
from steering.twoperson import policy as twoperson_policy
from steering.twoperson import views as twoperson_views
from steering.windows.scheduler import WINDOW_ACTIONS
from ui.ahead import release_previews
from ui.reading_scope import readable_actions, readable_items, reads_whole_action

log = logging.getLogger(__name__)

SALT = "steering.confirm"
SHOWN = 200  # items listed on a maintenance operation's result page
RESULT_SHOWN = 1000  # items an action's result page lists (100,000 would not render)
PER_PAGE = 50
# Query-string keys that are not the list's filter.
# --- the confirmation page ---------------------------------------------------------------


def _action(action_name: str) -> Action:
    action = ACTIONS.get(action_name)
    if action is None:
        raise Http404(f"no action {action_name}")
    return action


# Where Cancel goes when the person came from no page of this site.
LISTS = {
    Scope.JOB: "jobs:list",
    Scope.BATCH: "batches:list",
    Scope.COLLECTION: "dashboard:collections",
    Scope.QUEUE: "dashboard:home",
    Scope.WORKER: "dashboard:workers",
    Scope.DEPENDENCY: "dashboard:home",
    Scope.ACCESS: "accessui:list",
    Scope.ACCESS_QUEUE: "accessui:list",
}


def confirmation(
    request, action: Action, *, error="", reason="", status=200, used: AdminAction | None = None
):
    problem = refusal(request.user, action)
    if problem:
        return confirmations.refused(request, action, problem)
    selection = select(request, action)
    back = safe_next(request, request.GET.get("next", ""))
    the_plan = plans.build(request.user, action, selection, back=back)
    summary = the_plan.summary
    # A summarised selection is signed as its filter and the moment it was shown, not job by job.
    shown: dict[str, object] = {
        "items": [[p.target.id, p.target.version] for p in the_plan.applying]
    }
    if summary is not None:
        shown = {"whole": wholefilter.params(summary)}
    payload = confirmations.sign(
        request,
        SALT,
        compress=True,
        action=action.name,
        selection=selection.query if selection.everything else "",
        steps=the_plan.steps,
        back=request.GET.urlencode(),
        **shown,
    )
    context = {
        "action": action,
        "selection": selection,
        "rows": the_plan.rows,
        "listed": len(the_plan.rows),
        "count": selection.total if summary else len(the_plan.items),
        "applying": summary.applying if summary else len(the_plan.applying),
        "summary": summary,
        "chunk": settings.MQ_BULK_CHUNK,
        "options": the_plan.options,
        "payload": payload,
        "error": error,
        "reason": reason,
        "strong": the_plan.strong,
        "along": the_plan.along_count,
        "next": back,
        "cancel": came_from(request, reverse(LISTS[action.scope])),
        "used": used,
        "same_causes": the_plan.same_causes,
        "other_holds": the_plan.other_holds,
        "held": the_plan.held,
        "caught": the_plan.caught,
        "releases": release_previews(list(the_plan.held), by_hold_only=the_plan.caught).values(),
        "pace": starting.defaults(),
        "second_person": twoperson_policy.required(action.name),
    }
    return render(request, "steering/confirm.html", context, status=status)


@never_cache
@login_required
@require_GET
def confirm(request, action_name: str):
    action = _action(action_name)
    if action.form:  # its own form comes first: one item's, or the selection's
        ids = _ids(request)
        if len(ids) == 1 and request.GET.get("all") != "1":
            query = urlencode({"next": request.GET.get("next", "")})
            return redirect(reverse(action.form, args=[ids[0]]) + "?" + query)
        if not action.form_many:
            return HttpResponseBadRequest(f"{action.label} is taken on one item at a time.")
        return redirect(reverse(action.form_many) + "?" + request.GET.urlencode())
    return confirmation(request, action)


@login_required
@require_GET
def choose(request):
    """The list pages' action bar: ``?action=job.hold&mode=selected|all&...`` -> confirm."""
    action = _action(request.GET.get("action", ""))
    q = QueryDict(mutable=True)
    if request.GET.get("mode") == "all":
        q["all"] = "1"
        for key in request.GET:
            if key not in NOT_FILTER:
                q.setlist(key, request.GET.getlist(key))
    else:
        q["ids"] = ",".join(_ids(request))
    if back := safe_next(request, request.GET.get("next", "")):
        q["next"] = back
    return redirect(reverse("steering:confirm", args=[action.name]) + "?" + q.urlencode())


# --- execution --------------------------------------------------------------------------


@never_cache
@login_required
@require_POST
def run(request, action_name: str):
    action = _action(action_name)
    data = confirmations.read(request, SALT, "action", action=action.name)
    if isinstance(data, HttpResponseBadRequest):
        return data
    problem = refusal(request.user, action)
    if problem:
        return confirmations.refused(request, action, problem)
    reason = request.POST.get("reason", "").strip()
    params = dict(data.get("params") or {})  # what a form action's page confirmed
    step = request.POST.get("step", "")
    if step:  # else a resumed job restarts at the step it failed in
        if step not in data.get("steps", []):
            return _again_page(request, action, data, f"{step} is not a step to resume at", reason)
        params["step"] = step
    if not reason:
        return _again_page(request, action, data, "a reason is required", reason)
    pace = starting.read_pace(request.POST) if action.name == "job.resume" else None
    if isinstance(pace, str):
        return _again_page(request, action, data, pace, reason)
    if action.name == "collection.release":
        reason = release_choices(request.POST, params, reason)
    if twoperson_policy.required(action.name):  # a second administrator approves it
        return twoperson_views.ask(request, action, data, reason)
    used = AdminAction.objects.filter(token=data["token"]).first()
    if used is not None and action.form:  # never act twice: show what it did
        return redirect(reverse("steering:result", args=[used.pk]))
    if used is not None:  # a page kept from before (Back, another tab): never act twice
        request.GET = QueryDict(data.get("back", ""))
        return confirmation(request, action, reason=reason, status=409, used=used)
    whole = data.get("whole")
    if whole:  # a summarised selection: the run reads it again (wholefilter)
        params.update(whole)
    items = [(i, v) for i, v in data.get("items", [])]
    how = dict(token=data["token"], params=params, selection=data.get("selection", ""))
    count = whole[wholefilter.COUNTED_KEY] if whole else len(items)
    try:
        if pace is not None:  # at a pace: a run the dispatcher advances (steering.runs)
            return runviews.start_run(request, action, items, reason, how, pace)
        if count <= settings.MQ_BULK_INLINE_MAX:
            record = execute(request.user, action, items, reason, **how)
        else:
            record, created = start(request.user, action, items, reason, **how)
            if created:
                _queue(record)
    except PermissionDenied as e:
        return confirmations.refused(request, action, str(e))
    url = reverse("steering:result", args=[record.pk])
    back = safe_next(
        request,
        (data.get("edit") or {}).get("next") or QueryDict(data.get("back", "")).get("next", ""),
    )
    return redirect(url + ("?" + urlencode({"next": back}) if back else ""))


def _queue(record: AdminAction) -> None:
    """A bulk action runs on the mq-admin queue; without Redis, here and now instead."""
    try:
        tasks.enqueue(record, django_rq.get_connection("default"))
    except RedisError:
        log.exception("could not queue admin action %s; running it in the request", record.pk)
        run_items(record)


def _again_page(request, action, data, error, reason):
    """The confirmation page again, from the same selection, with the error."""
    if action.form:
        return editing.confirm_again(request, data, error, reason)
    request.GET = QueryDict(data.get("back", ""))
    return confirmation(request, action, error=error, reason=reason, status=400)


# --- result and audit trail ---------------------------------------------------------------


@never_cache
@login_required
def result(request, pk: int):
    """One action; 404 for an action on none of the reader's collections (``ui.reading_scope``),
    and only the items they may read of one on theirs and others'."""
    record = get_object_or_404(readable_actions(request.user), pk=pk)
    action = ACTIONS.get(record.action)
    # A resume run's action: its run's page shows the progress, this one the items so far.
    running = record.finished is None and "run" not in (record.params or {})
    whole = reads_whole_action(request.user, record)
    if record.action in MAINTENANCE:
        return maintenance_result(request, record, whole)
    items = record.items.none() if running else readable_items(request.user, record.items.all())
    return render(
        request,
        "steering/result.html",
        {
            "record": record,
            "action": action,
            "running": running,
            "whole": whole,
            "items": items[:RESULT_SHOWN],
            "more_items": max(0, items.count() - RESULT_SHOWN) if not running else 0,
            "next": safe_next(request, request.GET.get("next", "")),
        },
    )


def maintenance_result(request, record: AdminAction, whole: bool):
    """A maintenance operation's progress while it runs, its report once it is done; its
    report and items name every collection's items, so only a reader of all sees them."""
    report = (record.report or {}) if whole else {}
    items = readable_items(request.user, record.items.order_by("id"))
    context = {
        "record": record,
        "op": OPERATIONS[record.action],
        "running": record.finished is None,
        "whole": whole,
        "report": report,
        "error": report.get("error", ""),
        "items": items[:SHOWN] if record.finished else [],
        "more_items": max(0, items.count() - SHOWN) if record.finished else 0,
    }
    return render(request, "steering/maintenance_result.html", context)


FILTERS = ("job", "batch", "collection", "user", "action", "scope")


def audit_queryset(user, params) -> tuple:
    """The actions ``user`` may read (``ui.reading_scope``), narrowed by the page's filters;
    the item filters match only items ``user`` may read."""
    qs = readable_actions(user)
    shown = {k: params.get(k, "").strip() for k in FILTERS}
    items = readable_items(user, AdminActionItem.objects.all())
    for key in ("job", "batch"):
        if shown[key]:
            qs = qs.filter(pk__in=items.filter(item_id=shown[key]).values("admin_action"))
    if shown["collection"]:
        c = shown["collection"]
        named = items.filter(Q(collection=c) | Q(admin_action__scope="collection", item_id=c))
        qs = qs.filter(pk__in=named.values("admin_action"))
    if shown["user"]:
        qs = qs.filter(username=shown["user"])
    if shown["action"]:
        qs = qs.filter(action=shown["action"])
    if shown["scope"]:
        qs = qs.filter(scope=shown["scope"])
    return qs.order_by("-started", "-pk"), shown


@login_required
def audit(request):
    qs, shown = audit_queryset(request.user, request.GET)
    page = Paginator(qs, PER_PAGE).get_page(request.GET.get("page"))
    filters = {k: v for k, v in shown.items() if v}
    return render(
        request,
        "steering/audit.html",
        {
            "page": page,
            "shown": shown,
            "filtered": filters,
            "query": urlencode(filters),
            "actions": sorted(
                [
                    *ACTIONS,
                    *MAINTENANCE,
                    *WINDOW_ACTIONS,
                    *runviews.RUN_ACTIONS,
                    *twoperson_policy.AUDITED,
                ]
            ),
        },
    )


@login_required
def export(request):
    qs, shown = audit_queryset(request.user, request.GET)
    items = AdminActionItem.objects.filter(admin_action__in=qs).select_related("admin_action")
    items = readable_items(request.user, items)
    if shown["job"] or shown["batch"]:
        items = items.filter(item_id=shown["job"] or shown["batch"])
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="admin-actions.csv"'
    out = csv.writer(response)
    header = ["when", "who", "action", "reason", "item", *AdminActionItem.AUDIT_FIELDS[1:]]
    out.writerow(header)
    for i in items.order_by("-admin_action__started", "admin_action_id", "id").iterator():
        a = i.admin_action
        values = (
            "" if (v := getattr(i, f)) is None else str(v) for f in AdminActionItem.AUDIT_FIELDS
        )
        row = [a.started.isoformat(), a.username, a.action, a.reason, *values]
        out.writerow(map(_cell, row))
    return response


# What makes a spreadsheet read a cell as a formula (OWASP's list for CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(text: str) -> str:
    """No spreadsheet formulas from any cell: user names, reasons and details alike."""
    return "'" + text if text[:1] in FORMULA_STARTS else text
