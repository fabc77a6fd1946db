"""Pages of maintenance windows: the list (everyone), scheduling and cancelling one
(administrators), each through a confirmation page with a reason and a one-use token, as
the other admin actions (``steering.actions.views``)."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from merritt_queue.core.errors import QueueError
from merritt_queue.project.display_zone import display_zone
from merritt_queue.project.runtime import get_store
from steering import confirmations
from steering.actions.kinds import Action, Scope
from steering.models import AdminAction, AdminActionItem, MaintenanceWindow
from steering.permissions import Role, collections_of, refusal
from steering.windows.forms import WindowForm
from steering.windows.listing import listed, shown
from steering.windows.scheduler import end_now, target_id
from ui.reading_scope import readable_windows

log = logging.getLogger(__name__)

SALT = "steering.windows"
SHOWN_OCCURRENCES = 4

SCHEDULE = Action(
    name="window.create", scope=Scope.QUEUE, label="Schedule maintenance", role=Role.ADMINISTRATOR
)
CANCEL = Action(
    name="window.cancel",
    scope=Scope.QUEUE,
    label="Cancel a maintenance window",
    role=Role.ADMINISTRATOR,
)


def _scope_problem(user, scope: str, collection: str) -> str | None:
    """Why a person limited to some collections may not hold this (None: they may)."""
    mine = collections_of(user)
    if mine is None:
        return None
    if scope == MaintenanceWindow.QUEUE:
        return "pausing the whole queue needs an administrator of every collection"
    if scope in MaintenanceWindow.ACCESS_SCOPES:
        return "pausing an access queue needs an administrator of every collection"
    if collection not in mine:
        return f"collection {collection} is outside your collections"
    return None


@login_required
def windows(request):
    """Every window of the queue and of the collections the person may read."""
    groups = listed(rows=readable_windows(request.user))
    return render(
        request,
        "steering/windows.html",
        {**groups, "may_schedule": refusal(request.user, SCHEDULE) is None},
    )


@never_cache
@login_required
def schedule(request):
    """The form (GET), then its confirmation page (POST ``preview``), then the window
    (POST with the signed confirmation)."""
    problem = refusal(request.user, SCHEDULE)
    if problem:
        return confirmations.refused(request, SCHEDULE, problem)
    if request.method == "POST" and "payload" in request.POST:
        return _create(request)
    if request.method != "POST":
        initial = {"time_zone": str(display_zone()), "scope": "queue", "recurrence": "none"}
        return _form_page(request, WindowForm(initial=initial))
    form = WindowForm(request.POST)
    if not form.is_valid():
        return _form_page(request, form, status=400)
    w = form.window(request.user)
    if why := _scope_problem(request.user, w.scope, w.collection):
        return confirmations.refused(request, SCHEDULE, why)
    return _confirm_page(request, form, w)


def _form_page(request, form, status=200):
    return render(request, "steering/window_form.html", {"form": form}, status=status)


def _confirm_page(request, form, w: MaintenanceWindow, *, error="", status=200):
    now = timezone.now()
    rule = w.rule()
    upcoming = rule.occurrences(now, now + timedelta(days=35))[:SHOWN_OCCURRENCES]
    overlapping = [
        s
        for other in MaintenanceWindow.objects.filter(
            cancelled__isnull=True, scope=w.scope, collection=w.collection
        )
        if (s := shown(other, now)).occurrence and any(s.occurrence.overlaps(o) for o in upcoming)
    ]
    fields = {k: v for k, v in form.data.items() if k not in ("csrfmiddlewaretoken", "payload")}
    payload = confirmations.sign(request, SALT, form=fields)
    context = {
        "window": w,
        "upcoming": upcoming,
        "overlapping": overlapping,
        "payload": payload,
        "reason": form.cleaned_data["reason"],
        "error": error,
        "timing": w.recurrence == MaintenanceWindow.WEEKLY,
    }
    return render(request, "steering/window_confirm.html", context, status=status)


def _signed(request) -> dict | HttpResponseBadRequest:
    return confirmations.read(request, SALT)


def _create(request):
    data = _signed(request)
    if isinstance(data, HttpResponseBadRequest):
        return data
    reason = request.POST.get("reason", "").strip()
    form = WindowForm({**data["form"], "reason": reason})
    if not form.is_valid():  # time has passed since the page was shown, or no reason
        return _form_page(request, form, status=400)
    w = form.window(request.user)
    if why := _scope_problem(request.user, w.scope, w.collection):
        return confirmations.refused(request, SCHEDULE, why)
    try:
        with transaction.atomic():
            w.save()  # rolled back with it when the token was used already
            record = _audit(request.user, SCHEDULE, w, reason, data["token"])
            _item(record, w, "scheduled")
    except IntegrityError:  # the same confirmation submitted again: nothing is done twice
        pass
    return redirect(reverse("windows:list") + "?scheduled=1")


@never_cache
@login_required
def cancel(request, pk: int):
    w = get_object_or_404(readable_windows(request.user), pk=pk)
    problem = refusal(request.user, CANCEL) or _scope_problem(request.user, w.scope, w.collection)
    if problem:
        return confirmations.refused(request, CANCEL, problem)
    state = shown(w, timezone.now())
    if request.method != "POST":
        payload = confirmations.sign(request, SALT, window=w.pk)
        return render(
            request, "steering/window_cancel.html", {"s": state, "w": w, "payload": payload}
        )
    return _cancel(request, w, state)


def _cancel(request, w: MaintenanceWindow, state):
    data = _signed(request)
    if isinstance(data, HttpResponseBadRequest):
        return data
    if data.get("window") != w.pk:
        return HttpResponseBadRequest("This confirmation was made for another window.")
    reason = request.POST.get("reason", "").strip()
    if not reason:
        context = {"s": state, "w": w, "payload": request.POST["payload"]}
        context["error"] = "a reason is required"
        return render(request, "steering/window_cancel.html", context, status=400)
    try:
        with transaction.atomic():
            record = _audit(request.user, CANCEL, w, reason, data["token"])
            cancelled = MaintenanceWindow.objects.filter(pk=w.pk, cancelled__isnull=True).update(
                cancelled=timezone.now(),
                cancelled_by=request.user.get_username(),
                cancel_reason=reason,
            )
            _item(record, w, "cancelled" if cancelled else "already cancelled")
    except IntegrityError:
        return redirect("windows:list")
    w.refresh_from_db()
    if w.applied_start is not None:
        try:
            end_now(get_store(), w)
        except (QueueError, KazooException, KazooTimeoutError) as e:
            log.warning("window %s cancelled; ending its hold waits for ZooKeeper: %s", w.pk, e)
            return redirect(reverse("windows:list") + "?cancelled=later")
    return redirect(reverse("windows:list") + "?cancelled=1")


def _audit(user, action: Action, w: MaintenanceWindow, reason: str, token: str) -> AdminAction:
    return AdminAction.objects.create(
        user=user,
        username=user.get_username(),
        action=action.name,
        scope=w.scope,
        reason=reason,
        params={"window": w.pk},
        token=token,
        total=1,
        done=1,
        finished=timezone.now(),
    )


def _item(record: AdminAction, w: MaintenanceWindow, what: str) -> None:
    AdminActionItem.objects.create(
        admin_action=record,
        item_id=target_id(w),
        collection=w.collection,
        result="done",
        detail=f"window {w.pk} {what}",
    )
