"""The batch page's notifications, and an operator's resend of one delivery.

A resend is an admin action as the others are (steering): a confirmation page naming the
delivery, a reason, an audit record (``AdminAction`` with one ``AdminActionItem``), and a
signed token that acts once, so a double submit resends once. It makes one new attempt of the
same delivery, with the same delivery id, whatever its status was.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache

from batches.models import Batch
from steering import confirmations
from steering.models import AdminAction, AdminActionItem
from steering.permissions import Role, collections_of, role_of
from ui.reading_scope import require_readable

from .models import PENDING, Delivery
from .queueing import queue_deliveries

ACTION = "delivery.resend"
SALT = "notifications.resend"
SHOWN = 100  # deliveries listed on the batch page, newest first


def batch_section(user, bid: str) -> dict:
    """The batch page's "Notifications" context."""
    deliveries = Delivery.objects.filter(subscription__bid=bid).select_related("subscription")
    return {
        "deliveries": list(deliveries.order_by("-created", "-id")[:SHOWN]),
        "delivery_count": deliveries.count(),
        "may_resend": refusal(user, "") is None,
    }


def refusal(user, collection: str) -> str | None:
    if settings.READ_ONLY:
        return "the queue is read-only at the moment: nothing can be resent"
    if role_of(user) < Role.OPERATOR:
        return f"resending a notification needs the {Role.OPERATOR} role"
    allowed = collections_of(user)
    if collection and allowed is not None and collection not in allowed:
        return f"you may not act on collection {collection}"
    return None


def _delivery(pk: int) -> tuple[Delivery, str]:
    delivery = get_object_or_404(Delivery.objects.select_related("subscription"), pk=pk)
    bid = delivery.subscription.bid
    collection = Batch.objects.filter(bid=bid).values_list("collection", flat=True).first()
    return delivery, collection or ""


def _page(request, delivery, collection, *, error="", reason="", status=200):
    payload = confirmations.sign(request, SALT, delivery=delivery.pk)
    context = {
        "delivery": delivery,
        "collection": collection,
        "payload": payload,
        "error": error,
        "reason": reason,
    }
    return render(request, "notifications/resend_confirm.html", context, status=status)


@never_cache
@login_required
def resend(request, pk: int):
    """404 for a delivery of a batch the person may not read, as its batch page answers."""
    delivery, collection = _delivery(pk)
    require_readable(request.user, collection)
    if problem := refusal(request.user, collection):
        return render(request, "notifications/refused.html", {"why": problem}, status=403)
    if request.method != "POST":
        return _page(request, delivery, collection)
    return _run(request, delivery, collection)


def _run(request, delivery, collection):
    data = confirmations.read(request, SALT, "delivery", delivery=delivery.pk)
    if isinstance(data, HttpResponseBadRequest):
        return data
    reason = request.POST.get("reason", "").strip()
    if not reason:
        return _page(request, delivery, collection, error="a reason is required", status=400)
    back = reverse("batches:detail", args=[delivery.subscription.bid]) + "#notifications"
    try:
        _audit_and_resend(request, delivery, collection, data["token"], reason)
    except IntegrityError:  # the same page submitted twice (even at once): its token acts once
        messages.warning(request, "This resend was already made: nothing was sent again.")
    else:
        messages.success(request, f"Delivery {delivery.delivery_id} will be sent again.")
    return redirect(back)


def _audit_and_resend(request, delivery, collection: str, token: str, reason: str) -> None:
    """Record the action, then make the delivery due; ``IntegrityError`` when ``token`` has
    acted already."""
    with transaction.atomic():
        if AdminAction.objects.filter(token=token).exists():
            raise IntegrityError("token used")
        record = AdminAction.objects.create(
            user=request.user,
            username=request.user.get_username(),
            action=ACTION,
            scope="delivery",
            reason=reason,
            params={"delivery_id": str(delivery.delivery_id), "event": delivery.event_id},
            token=token,
            total=1,
            done=1,
            finished=timezone.now(),
        )
        AdminActionItem.objects.create(
            admin_action=record,
            item_id=str(delivery.delivery_id),
            collection=collection,
            before_status=delivery.status,
            after_status=PENDING,
            result="done",
            detail=f"{delivery.event_id} to {delivery.subscription.channel} "
            f"{delivery.subscription.target}"[:500],
            part_of=delivery.subscription.bid,
        )
        Delivery.objects.filter(pk=delivery.pk).update(
            status=PENDING, next_attempt=timezone.now(), claimed_until=None
        )
        key = (delivery.subscription_id, delivery.event_id)
        transaction.on_commit(lambda: queue_deliveries([key]))
