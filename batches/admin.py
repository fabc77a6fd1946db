import json

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import models

from batches.models import ApiToken, Batch, Collection, Profile
from merritt_queue.deposit.uploads import shown_payload
from steering.admin import ReadOnlyAdmin, scope_actions


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "collection",
        "owner",
        "owner_ark",
        "default_priority",
        "minter_shoulder",
        "storage_node",
        "allow_external_ids",
        "approval_required",
    )
    search_fields = ("name", "collection", "owner", "owner_ark")
    list_filter = ("collection", "storage_node", "allow_external_ids", "approval_required")
    actions = ("rotate_notify_secret",)
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    @admin.action(
        description="Rotate the notification signing secret (receivers need the new one)",
        permissions=["change"],
    )
    def rotate_notify_secret(self, request, queryset):
        for profile in queryset:
            secret = profile.rotate_notify_secret()
            messages.warning(
                request,
                f"The new notification key of {profile} is {secret} — give it to the "
                "receiver of its default notify_url (its subscriptions' secrets now derive "
                "from it); it is not shown again.",
            )

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change:
            messages.warning(
                request,
                f"The notification key of {obj} is {obj.notify_secret} — give it to the "
                "receiver of its default notify_url, which derives each subscription's secret "
                "from it; it is not shown again.",
            )


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """A token acts as its user, so only a superuser makes or rotates one for someone else:
    anyone else's form offers only themselves, their rotate skips others' tokens, and no one
    moves a token to another user once it is made."""

    list_display = ("name", "user", "created", "last_used", "revoked")
    list_filter = ("revoked", "user__is_active")
    search_fields = ("name", "user__username")
    actions = ("revoke", "rotate")
    fields = ("user", "name", "revoked", "created", "last_used")
    readonly_fields = ("created", "last_used")

    def get_readonly_fields(self, request, obj=None):
        return (*self.readonly_fields, "user") if obj is not None else self.readonly_fields

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "user" and not request.user.is_superuser:
            kwargs["queryset"] = get_user_model().objects.filter(pk=request.user.pk)
            kwargs["initial"] = request.user.pk
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request, queryset):
        count = queryset.filter(revoked=False).update(revoked=True)
        messages.success(request, f"{count} token(s) revoked; they are refused from now on.")

    @admin.action(
        description="Rotate: give the selected tokens new keys (old keys stop working)",
        permissions=["change"],
    )
    def rotate(self, request, queryset):
        if not request.user.is_superuser:
            others = queryset.exclude(user=request.user).count()
            queryset = queryset.filter(user=request.user)
            if others:
                messages.error(
                    request,
                    f"{others} token(s) of other users not rotated: only a superuser rotates "
                    "someone else's token.",
                )
        for token in queryset.filter(revoked=False).select_related("user"):
            key = token.rotate()
            # Shown once: only the hash is kept.
            messages.warning(
                request,
                f"The new key of {token} is {key} — copy it now, it is not shown again.",
            )

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        if obj.user_id != request.user.pk and not request.user.is_superuser:
            raise PermissionDenied("only a superuser makes an API token for someone else")
        token, key = ApiToken.issue(obj.user, obj.name)
        obj.pk, obj.key_hash = token.pk, token.key_hash
        # Shown once: only the hash is kept.
        messages.warning(request, f"The token's key is {key} — copy it now, it is not shown again.")


@admin.register(Batch)
class BatchAdmin(ReadOnlyAdmin):
    list_display = ("bid", "uuid", "collection", "state", "submitter", "submitted", "job_total")
    list_filter = ("status",)
    search_fields = ("=bid", "=uuid", "=collection")
    show_full_result_count = False
    actions = scope_actions("batch", "bid")
    # An uploaded payload's file: URL is a path on this server: shown as the file's name.
    exclude = ("submission",)
    readonly_fields = ("submission_shown",)

    @admin.display(description="status", ordering="status")
    def state(self, batch: Batch) -> str:
        return batch.shown_status  # Awaiting approval, where ZooKeeper says Held

    @admin.display(description="submission")
    def submission_shown(self, batch: Batch) -> str:
        return json.dumps(shown_payload(batch.submission), indent=1)


@admin.register(Collection)
class CollectionAdmin(ReadOnlyAdmin):
    list_display = ("mnemonic", "held", "held_by", "held_reason", "held_at")
    list_filter = ("held",)
    search_fields = ("mnemonic",)
    actions = scope_actions("collection", "mnemonic")
