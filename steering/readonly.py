"""READ_ONLY in the Django admin: every model stays viewable and nothing can be changed.

Each registered ModelAdmin's add, change and delete permissions are refused while
``READ_ONLY`` is set (read at each request, so a settings change needs no restart of the
check); Django then hides the buttons and answers 403 to a forged POST.
"""

from __future__ import annotations

from functools import wraps

from django.conf import settings

CHANGES = ("has_add_permission", "has_change_permission", "has_delete_permission")


def _unless_read_only(method):
    @wraps(method)
    def permission(*args, **kwargs):
        return not settings.READ_ONLY and method(*args, **kwargs)

    return permission


def guard_admin_site(site) -> None:
    for model_admin in site._registry.values():
        for name in CHANGES:
            setattr(model_admin, name, _unless_read_only(getattr(model_admin, name)))
        # Inlines are made per request from their class; guard the class once.
        for inline in model_admin.inlines:
            if not getattr(inline, "_read_only_guarded", False):
                for name in CHANGES:
                    setattr(inline, name, _unless_read_only(getattr(inline, name)))
                inline._read_only_guarded = True
