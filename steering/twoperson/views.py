"""The pages of two-person deletion: a confirmed deletion made a request (``ask``,
``ask_cleanup``, called where the deletion would have run), the requests waiting for a second
person, and one request with what will go and its decision forms (approve or reject for
another administrator, withdraw for the requester), each with a required reason and a signed
payload whose token decides once."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from steering import confirmations
from steering.actions import wholefilter
from steering.models import AdminAction, DeletionRequest
from steering.permissions import collections_of
from steering.twoperson import policy, showing
from steering.twoperson import requests as life

SALT = "steering.twoperson"
VERBS = {"approve": life.approve, "reject": life.reject, "withdraw": life.withdraw}
DECIDED_SHOWN = 50


@dataclass(frozen=True)
class _Step:
    """What the refusal page names as refused."""

    label: str


def ask(request, action, data: dict, reason: str):
    """The confirmed deletion ``data`` (the confirmation's signed payload) as a request."""
    params, whole = dict(data.get("params") or {}), data.get("whole")
    selection = data.get("selection", "")
    items = [] if whole else [list(pair) for pair in data.get("items", [])]
    if whole:
        params.update(whole)
        shown = showing.filtered(action, selection, collections_of(request.user))
        count = int(whole[wholefilter.COUNTED_KEY])
    else:
        shown, count = showing.listed(action, items), len(items)
    try:
        req, _ = life.create(
            request.user,
            action.name,
            reason,
            token=data["token"],
            items=items,
            shown=shown,
            params=params,
            selection=selection,
            count=count,
            collections=showing.collections(shown, action),
        )
    except PermissionDenied as e:
        return confirmations.refused(request, action, str(e))
    return redirect(reverse("steering:deletion-request", args=[req.pk]))


def ask_cleanup(request, op, params: dict, reason: str, token: str):
    """A real cleanup confirmed after its dry run, as a request listing the dry run's rows."""
    dry = AdminAction.objects.get(pk=params["dry_run_of"])
    shown = showing.cleanup(dry)
    req, _ = life.create(
        request.user,
        "cleanup",
        reason,
        token=token,
        shown=shown,
        params={**params, "only_from": dry.pk, "cutoff": shown["cutoff"]},
        count=dry.total,
    )
    return redirect(reverse("steering:deletion-request", args=[req.pk]))


@never_cache
@login_required
@require_GET
def waiting(request):
    """The requests waiting for a second person, then the latest decided."""
    life.expire_old()
    mine = [r for r in DeletionRequest.objects.all()[:500] if showing.readable(request.user, r)]
    context = {
        "open": [r for r in mine if r.open],
        "decided": [r for r in mine if not r.open][:DECIDED_SHOWN],
        "labels": {r.pk: life.label(r.action) for r in mine},
    }
    return render(request, "steering/deletion_requests.html", context)


def _get(request, pk: int) -> DeletionRequest:
    req = get_object_or_404(DeletionRequest, pk=pk)
    if not showing.readable(request.user, req):
        raise Http404("no such request")
    return req


@never_cache
@login_required
@require_GET
def page(request, pk: int):
    return _page(request, _get(request, pk))


def _page(request, req, *, error="", reason="", status=200):
    refusals = {verb: life.refusal_to(verb, req, request.user) for verb in VERBS}
    payload = confirmations.sign(request, SALT, deletion=req.pk)
    rows = showing.now(req)
    context = {
        "req": req,
        "label": life.label(req.action),
        "rows": rows,
        "changed": sum(1 for r in rows if r.get("changed")),
        "refusals": refusals,
        "may": {verb: why is None for verb, why in refusals.items()},
        "payload": payload,
        "error": error,
        "reason": reason,
    }
    return render(request, "steering/deletion_request.html", context, status=status)


@never_cache
@login_required
@require_POST
def decide(request, pk: int, verb: str):
    if verb not in VERBS:
        raise Http404(f"no step {verb}")
    req = _get(request, pk)
    data = confirmations.read(request, SALT, "request", deletion=req.pk)
    token = "" if isinstance(data, HttpResponseBadRequest) else data["token"]
    used = AdminAction.objects.filter(token=token).first() if token else None
    if used is not None:  # a double click, Back, a second tab: shown what it did
        return _after(req, used)
    problem = life.refusal_to(verb, req, request.user)
    if problem:
        response = confirmations.refused(
            request, _Step(f"{verb.capitalize()} request {pk}"), problem
        )
        response.status_code = 409 if not req.open else 403
        return response
    if isinstance(data, HttpResponseBadRequest):
        return data
    reason = request.POST.get("reason", "").strip()
    try:
        record = VERBS[verb](req, request.user, reason, token=token)
    except life.Refused as e:
        return _page(request, req, error=str(e), reason=reason, status=e.status)
    except PermissionDenied as e:
        return confirmations.refused(request, _Step(f"{verb.capitalize()} request {pk}"), str(e))
    return _after(req, record)


def _after(req: DeletionRequest, record: AdminAction):
    req.refresh_from_db()
    if req.state == DeletionRequest.APPROVED:
        return redirect(reverse("steering:result", args=[record.pk]))
    return redirect(reverse("steering:deletion-request", args=[req.pk]))


def waiting_count(user) -> int | None:
    """The dashboard's count of requests waiting that ``user`` reads, not yet expired; None
    when two-person deletion is off (the dashboard then says nothing of it)."""
    if not policy.on():
        return None
    young = timezone.now() - policy.expiry()
    open_ = DeletionRequest.objects.filter(state=DeletionRequest.REQUESTED, created__gte=young)
    return sum(1 for r in open_ if showing.readable(user, r))
