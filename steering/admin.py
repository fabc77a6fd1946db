"""Django admin: the mirror read-only, its admin actions through the confirmation page.

An admin action here only redirects to ``/actions/<name>/confirm?ids=...``, so the same
confirmation, permissions, version checks and audit trail apply as on the queue pages.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.shortcuts import redirect
from django.urls import reverse

from steering.catalog import ACTIONS
from steering.models import AdminAction, AdminActionItem, CollectionScope


def confirm_action(name: str, key: str):
    action = ACTIONS[name]

    def run(modeladmin, request, queryset):
        ids = ",".join(queryset.values_list(key, flat=True))
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


@admin.register(CollectionScope)
class CollectionScopeAdmin(admin.ModelAdmin):
    """Which collections a person acts on and, for a depositor, submits to (docs/security.md)."""

    list_display = ("user", "collections")
    search_fields = ("user__username",)
