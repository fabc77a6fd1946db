"""Giving a test's account a role: an account in no group reads nothing (ui.reading_scope)."""

from django.contrib.auth.models import Group


def viewer(user):
    """``user`` in the viewer group: reads every collection, takes no action."""
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])
    return user
