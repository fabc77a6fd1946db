"""Django admin: the mirror read-only, its admin actions through the confirmation page.

An admin action here only redirects to ``/actions/<name>/confirm?ids=...``, so the same
confirmation, permissions, version checks and audit trail apply as on the queue pages.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.urls import reverse

from steering.actions.catalog import ACTIONS
from steering.models import AdminAction, AdminActionItem, CollectionScope, DeletionRequest
from steering.scopeform import CollectionScopeForm


def confirm_action(name: str, key: str):
    action = ACTIONS[name]

    def run(modeladmin, request, queryset):
        # Distinct: the queue of many selected requests is named once.
        ids = ",".join(dict.fromkeys(queryset.values_list(key, flat=True)))
        return redirect(reverse("steering:confirm", args=[name]) + "?" + urlencode({"ids": ids}))

    run.__name__ = "confirm_" + name.replace(".", "_")
    return admin.action(description=f"{action.label} (confirm first)…")(run)


def scope_actions(scope: str, key: str) -> list:
    return [confirm_action(n, key) for n, a in ACTIONS.items() if a.scope == scope]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shows rows; never adds, changes or deletes them (the mirror follows ZooKeeper)."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ItemInline(admin.TabularInline):
    model = AdminActionItem
    extra = 0
    can_delete = False
    fields = AdminActionItem.AUDIT_FIELDS
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(AdminAction)
class AdminActionAdmin(ReadOnlyAdmin):
    list_display = ("started", "username", "action", "total", "done", "skipped", "failed")
    list_filter = ("action", "scope")
    search_fields = ("username", "reason", "items__item_id")
    date_hierarchy = "started"
    inlines = [ItemInline]


def decide_request(verb: str):
    """The request's page, where its approve, reject and withdraw forms are: one request at a
    time, as its page shows exactly what it deletes."""

    def run(modeladmin, request, queryset):
        if queryset.count() != 1:
            modeladmin.message_user(request, f"{verb.capitalize()} one request at a time.")
            return None
        return redirect(reverse("steering:deletion-request", args=[queryset.get().pk]))

    run.__name__ = f"{verb}_request"
    return admin.action(description=f"{verb.capitalize()} (confirm first)…")(run)


@admin.register(DeletionRequest)
class DeletionRequestAdmin(ReadOnlyAdmin):
    """Two-person deletion requests (``steering.twoperson``), decided on their own page."""

    list_display = ("pk", "action", "state", "count", "requester_name", "created", "approver_name")
    list_filter = ("state", "kind")
    search_fields = ("requester_name", "approver_name", "reason")
    exclude = ("token",)
    actions = [decide_request("approve"), decide_request("reject")]


@admin.register(CollectionScope)
class CollectionScopeAdmin(admin.ModelAdmin):
    """Which collections a person acts on and, for a depositor, submits to (docs/security.md)."""

    form = CollectionScopeForm
    list_display = ("user", "collections")
    search_fields = ("user__username",)


class RoleGivingUserAdmin(UserAdmin):
    """Administrators give roles here (``steering.staff``); only a superuser makes or changes
    a superuser, gives rights outside the groups or sets another person's password, so the
    role can neither raise itself nor act as someone else."""

    RESERVED = ("is_superuser", "is_staff", "user_permissions")

    def get_readonly_fields(self, request, obj=None):
        fields = super().get_readonly_fields(request, obj)
        return fields if request.user.is_superuser else (*fields, *self.RESERVED)

    def has_change_permission(self, request, obj=None):
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def user_change_password(self, request, id, form_url=""):
        # Setting someone's password is acting as them, past the audit trail.
        if not request.user.is_superuser and str(request.user.pk) != str(id):
            raise PermissionDenied("only a superuser sets another person's password")
        return super().user_change_password(request, id, form_url)


admin.site.unregister(User)
admin.site.register(User, RoleGivingUserAdmin)
