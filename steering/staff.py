"""The administrator role opens the Django admin: ``is_staff`` follows membership of the
administrator group, whichever side of the membership was changed (a user's groups, or a
group's users), so the Roles page's "given in Admin → Users" is true for the people it names.

Only joining or leaving the administrators moves the flag: a staff account that was never an
administrator (made so by hand, for its API tokens) keeps it through its other groups'
changes; a superuser stays staff.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models.signals import m2m_changed

from steering.models import ADMINISTRATOR


def set_staff(user_ids) -> None:
    """Each user's ``is_staff`` made to say whether they are an administrator now."""
    users = get_user_model().objects.filter(pk__in=user_ids, is_superuser=False)
    admins = users.filter(groups__name=ADMINISTRATOR).values("pk")
    users.filter(pk__in=admins).update(is_staff=True)
    users.exclude(pk__in=admins).update(is_staff=False)


def _administrator_members_changed(sender, instance, action, reverse, model, pk_set, **kw):
    if reverse:  # a group's users changed
        if instance.name == ADMINISTRATOR:
            _moved(instance, action, pk_set, lambda: instance.user_set.values_list("pk", flat=True))
    else:  # a user's groups changed: only leaving or joining the administrators counts
        admins = model.objects.filter(name=ADMINISTRATOR).values_list("pk", flat=True)
        if action == "pre_clear":
            pk_set = set(instance.groups.values_list("pk", flat=True))
        if action == "post_clear" and hasattr(instance, "_mq_cleared"):
            pk_set = set(admins)  # it was an administrator before the clear
        if set(pk_set or ()) & set(admins):
            _moved(instance, action, {instance.pk}, lambda: [instance.pk])


def _moved(instance, action, ids, members) -> None:
    """Set the flags after an add or remove; a clear's members are read before it."""
    if action in ("post_add", "post_remove"):
        set_staff(list(ids or ()))
    elif action == "pre_clear":
        instance._mq_cleared = list(members())
    elif action == "post_clear":
        set_staff(instance.__dict__.pop("_mq_cleared", []))


def connect() -> None:
    m2m_changed.connect(
        _administrator_members_changed,
        sender=get_user_model().groups.through,
        dispatch_uid="mq-administrator-is-staff",
    )
