from django.contrib import admin, messages

from notifications.keys import new_secret
from notifications.models import PROFILE, WEBHOOK, Delivery, DeliveryAttempt, Subscription
from steering.admin import ReadOnlyAdmin


@admin.register(Subscription)
class SubscriptionAdmin(ReadOnlyAdmin):
    """Read-only but for one action: a new signing secret, shown once to the admin who made
    it (the secret is never listed)."""

    list_display = ("id", "bid", "channel", "target", "events", "source", "created")
    list_filter = ("channel", "events", "source")
    search_fields = ("=id", "=bid", "=batch_uuid", "target")
    exclude = ("secret",)
    actions = ("rotate_secret",)

    def has_rotate_permission(self, request) -> bool:
        return request.user.has_perm("notifications.change_subscription")

    @admin.action(
        description="Rotate the webhook signing secret (its receiver needs the new one)",
        permissions=["rotate"],
    )
    def rotate_secret(self, request, queryset):
        for subscription in queryset.filter(channel=WEBHOOK):
            if subscription.source == PROFILE:
                messages.error(
                    request,
                    f"Subscription {subscription.pk} is the profile's default: its secret "
                    "follows the profile's key; rotate that (Profiles) instead.",
                )
                continue
            subscription.secret = new_secret()
            subscription.save(update_fields=["secret"])
            messages.warning(
                request,
                f"The new signing secret of subscription {subscription.pk} ({subscription.target})"
                f" is {subscription.secret} — give it to its receiver; it is not shown again.",
            )


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
