"""The access queue's mirror in the Django admin: read-only, its actions through the
confirmation pages (``steering.admin.confirm_action``)."""

from django.contrib import admin

from access.models import AccessRequest
from steering.admin import ReadOnlyAdmin, confirm_action, scope_actions


@admin.register(AccessRequest)
class AccessRequestAdmin(ReadOnlyAdmin):
    list_display = ("key", "status", "size", "delivery_node", "locked", "status_changed_at")
    list_filter = ("queue", "status", "locked")
    search_fields = ("=key", "=qid", "=token", "=ark")
    show_full_result_count = False
    actions = [
        *scope_actions("access", "key"),
        confirm_action("access.pause", "queue"),
        confirm_action("access.unpause", "queue"),
    ]
