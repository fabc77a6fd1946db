from django.contrib import admin

from notifications.models import Delivery, DeliveryAttempt, Subscription
from steering.admin import ReadOnlyAdmin


@admin.register(Subscription)
class SubscriptionAdmin(ReadOnlyAdmin):
    list_display = ("bid", "channel", "target", "events", "source", "created")
    list_filter = ("channel", "events", "source")
    search_fields = ("=bid", "=batch_uuid", "target")


class AttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    fields = ("number", "at", "ok", "http_status", "detail")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    """Read-only: a resend is an audited action of the batch page."""

    list_display = ("delivery_id", "event_id", "status", "attempts", "last_status", "created")
    list_filter = ("status", "kind")
    search_fields = ("=delivery_id", "=item", "=subscription__bid")
    inlines = [AttemptInline]
