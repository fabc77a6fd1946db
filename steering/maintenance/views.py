"""The Maintenance page: the consistency check, the full reconcile and cleanup, each through a
confirmation page (what will happen, a required reason, a token that starts it once), then a
progress page (``views.result``) while it runs on ``mq-admin``, and its report at the end.

For administrators only; ``steering.maintenance.operations`` enforces it again when starting.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseBadRequest, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from merritt_queue.project import treecheck
from steering import confirmations
from steering.maintenance import cleanup
from steering.maintenance import operations as m
from steering.models import AdminAction
from steering.twoperson import policy
from steering.twoperson import views as twoperson

SALT = "steering.maintenance"
# A real cleanup shows a dry run with its cutoff age made no longer ago than this.
DRY_RUN_FRESH = timedelta(hours=1)
LISTED = 50  # a dry run's items listed on the real cleanup's confirmation


def _op(name: str) -> m.Operation:
    op = m.OPERATIONS.get(name)
    if op is None:
        raise Http404(f"no maintenance operation {name}")
    return op


@never_cache
@login_required
@require_GET
def page(request):
    problem = m.refusal(request.user, m.OPERATIONS[m.CHECK])
    if problem:
        return confirmations.refused(request, m.Operation("maintenance", "Maintenance"), problem)
    context: dict = {
        key: {
            "running": m.running(name),
            "last": AdminAction.objects.filter(action=name).order_by("-started").first(),
        }
        for key, name in (("check", m.CHECK), ("reconcile", m.RECONCILE), ("cleanup", m.CLEANUP))
    }
    context["lock_max_age"] = treecheck.lock_max_age()
    return render(request, "steering/maintenance.html", context)


def params_of(op: m.Operation, query: QueryDict) -> dict:
    """The operation's parameters from the Maintenance page's form; ValueError saying what
    is wrong."""
    if op.name == m.CHECK:
        text = query.get("lock_max_age", "").strip()
        try:
            max_age = float(text) if text else treecheck.lock_max_age()
        except ValueError:
            raise ValueError(f"lock age {text!r}: give a number of seconds") from None
        if not math.isfinite(max_age) or max_age < 0:
            raise ValueError(f"lock age {text!r}: give a number of seconds, 0 or more")
        return {"repair": query.get("repair") == "1", "lock_max_age": max_age}
    if op.name == m.CLEANUP:
        older_than = query.get("older_than", "").strip()
        try:
            cleanup.age(older_than)
        except ValueError as e:
            raise ValueError(str(e).removeprefix("--older-than ")) from None
        return {"older_than": older_than, "dry_run": query.get("mode") != "real"}
    return {}


@never_cache
@login_required
@require_GET
def confirm(request, name: str):
    return confirmation(request, _op(name), request.GET)


def confirmation(request, op, query, *, error="", reason="", status=200, used=None):
    problem = m.refusal(request.user, op)
    if problem:
        return confirmations.refused(request, op, problem)
    context = {"op": op, "error": error, "reason": reason, "used": used, "query": query}
    try:
        params = params_of(op, query)
    except ValueError as e:
        context.update(error=str(e), params=None)
        return render(request, "steering/maintenance_confirm.html", context, status=400)
    dry = None
    if op.name == m.CLEANUP and not params["dry_run"]:
        dry = m.last_dry_run(params["older_than"], DRY_RUN_FRESH)
        if dry is not None:
            params["dry_run_of"] = dry.pk
    payload = confirmations.sign(request, SALT, op=op.name, params=params)
    context.update(
        params=params,
        payload=payload,
        running=m.running(op.name),
        dry=dry,
        dry_items=dry.items.order_by("id")[:LISTED] if dry else [],
        fresh=f"{DRY_RUN_FRESH.total_seconds() // 60:.0f} minutes",
        second_person=policy.required(op.name),
        again=QueryDict(mutable=True),
    )
    # The dry run a real cleanup must show first, with the same cutoff age.
    context["again"].update({"older_than": params.get("older_than", ""), "mode": "dry"})
    return render(request, "steering/maintenance_confirm.html", context, status=status)


@never_cache
@login_required
@require_POST
def start(request, name: str):
    op = _op(name)
    data = confirmations.read(request, SALT, "action", op=op.name)
    if isinstance(data, HttpResponseBadRequest):
        return data
    problem = m.refusal(request.user, op)
    if problem:
        return confirmations.refused(request, op, problem)
    params = data["params"]
    query = form_of(params)
    reason = request.POST.get("reason", "").strip()
    if not reason:
        return confirmation(request, op, query, error="a reason is required", status=400)
    if op.name == m.CLEANUP and not params["dry_run"] and not params.get("dry_run_of"):
        return confirmation(request, op, query, error="run a dry run first", status=400)
    if op.name == m.CLEANUP and not params["dry_run"] and policy.required(m.CLEANUP):
        return twoperson.ask_cleanup(request, op, params, reason, data["token"])
    try:
        record, created = m.start(request.user, op, params, reason, token=data["token"])
    except PermissionDenied as e:
        return confirmations.refused(request, op, str(e))
    except m.AlreadyRunning:  # the page says which, and links to it
        return confirmation(request, op, query, reason=reason, status=409)
    if not created:  # a page kept from before (Back, another tab): never started twice
        return confirmation(request, op, query, reason=reason, status=409, used=record)
    return redirect(reverse("steering:result", args=[record.pk]))


def form_of(params: dict) -> QueryDict:
    """The parameters as the Maintenance page's form sends them (``params_of`` reversed)."""
    query = QueryDict(mutable=True)
    if "repair" in params:
        query.update({"repair": "1" if params["repair"] else "0"})
        query.update({"lock_max_age": str(params["lock_max_age"])})
    if "older_than" in params:
        query.update({"older_than": params["older_than"]})
        query.update({"mode": "dry" if params["dry_run"] else "real"})
    return query
