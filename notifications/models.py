"""Subscriptions (who wants which events of a batch, and where) and their deliveries."""

from __future__ import annotations

import uuid

from django.db import models

from .keys import new_secret

WEBHOOK, EMAIL = "webhook", "email"
CHANNELS = [(WEBHOOK, "webhook"), (EMAIL, "e-mail")]
ALL, FAILURES, COMPLETION = "all", "failures", "completion"
EVENT_FILTERS = [
    (ALL, "every state entry of the batch and of each job"),
    (FAILURES, "failures only (a job or the batch entering Failed)"),
    (COMPLETION, "completion only (the batch's final report: Completed or Failed)"),
]
SUBMISSION, PROFILE = "submission", "profile"
SOURCES = [(SUBMISSION, "named by the submission"), (PROFILE, "the profile's default")]

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"
DELIVERY_STATUSES = [(PENDING, "pending"), (DELIVERED, "delivered"), (FAILED, "failed")]


class Subscription(models.Model):
    """One batch's events sent to one webhook URL or one list of e-mail addresses."""

    bid = models.CharField(max_length=20, db_index=True)
    batch_uuid = models.CharField("batchID", max_length=100, blank=True)
    profile = models.CharField(max_length=100, blank=True)
    channel = models.CharField(max_length=10, choices=CHANNELS)
    # The webhook's URL, or the e-mail addresses, comma-separated.
    target = models.TextField()
    events = models.CharField(max_length=12, choices=EVENT_FILTERS, default=ALL)
    source = models.CharField(max_length=12, choices=SOURCES, default=SUBMISSION)
    # Signs this subscription's webhook deliveries and no other's (``keys``).
    secret = models.CharField(max_length=64, default=new_secret, editable=False)
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["bid", "id"]

    def __str__(self) -> str:
        return f"{self.bid} {self.channel} {self.target}"

    @property
    def addresses(self) -> list[str]:
        return [a.strip() for a in self.target.split(",") if a.strip()]


class Delivery(models.Model):
    """One event for one subscription: at most one per (subscription, event), retried until
    delivered or failed; its ``delivery_id`` is the same on every attempt and on a resend."""

    subscription = models.ForeignKey(
        Subscription, on_delete=models.CASCADE, related_name="deliveries"
    )
    delivery_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # ``job:JID:VERSION`` or ``batch:BID:VERSION``: the item's status version entered.
    event_id = models.CharField(max_length=80)
    kind = models.CharField(max_length=10)  # job | batch
    item = models.CharField(max_length=20)
    to_status = models.CharField(max_length=20)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=DELIVERY_STATUSES, default=PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt = models.DateTimeField(null=True, db_index=True)
    # A worker that took the delivery holds it until then (another one leaves it alone).
    claimed_until = models.DateTimeField(null=True)
    last_status = models.IntegerField(null=True)  # the receiver's last HTTP status
    last_response = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    delivered = models.DateTimeField(null=True)

    class Meta:
        ordering = ["created", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["subscription", "event_id"], name="one_delivery_per_event"
            )
        ]
        indexes = [models.Index(fields=["status", "next_attempt"])]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"{self.event_id} -> {self.subscription.channel} ({self.status})"


class DeliveryAttempt(models.Model):
    """One try of a delivery: when, and what the receiver (or the network) answered."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="tries")
    number = models.PositiveIntegerField()
    at = models.DateTimeField(auto_now_add=True)
    ok = models.BooleanField(default=False)
    http_status = models.IntegerField(null=True)
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["delivery", "number"]
