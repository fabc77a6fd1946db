"""Who may submit, to which collections, and on whose behalf.

Submitting is a right of its own, not a steering rank: a ``depositor`` submits to the
collections of their CollectionScope row and steers nothing; an ``administrator`` (or a
superuser) submits anywhere their scope allows and may name another submitter; an
``operator`` or ``viewer`` steers or reads and does not submit unless also a depositor.
Rights are read from the database at every call, so a deactivated user, a removed group or a
narrowed scope takes effect at the next request, whatever token or session they hold.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model

from steering.models import ADMINISTRATOR, DEPOSITOR, CollectionScope

SUBMIT_GROUPS = (DEPOSITOR, ADMINISTRATOR)


def current(user):
    """The user as stored now (a token's or session's copy may predate a change)."""
    return get_user_model().objects.filter(pk=user.pk).first()


def is_administrator(user) -> bool:
    return user.is_superuser or user.groups.filter(name=ADMINISTRATOR).exists()


def submit_refusal(user, collection: str | None) -> str | None:
    """Why ``user`` may not submit to ``collection`` (None: may); read fresh every time."""
    now = current(user) if user is not None and user.pk else None
    if now is None or not now.is_active:
        return "the account that submits is unknown or deactivated"
    name = now.get_username()
    administrator = is_administrator(now)
    if not administrator and not now.groups.filter(name__in=SUBMIT_GROUPS).exists():
        return f"{name} may not submit: submitting needs the {DEPOSITOR} role"
    if collection is None:
        return None
    allowed = _scope(now, administrator)
    if allowed is not None and collection not in allowed:
        return (
            f"{name} may not submit to collection {collection!r}: it is not among the "
            "collections of their scope"
        )
    return None


def behalf_refusal(by, submitter: str, collection: str | None) -> str | None:
    """Why ``by`` may not submit to ``collection`` for ``submitter`` (None: may): both must
    be allowed to submit there, so an administrator's ``on_behalf_of`` makes no one a
    depositor of a collection that is not theirs."""
    if refusal := submit_refusal(by, collection):
        return refusal
    if submitter == by.get_username():
        return None
    person = get_user_model().objects.filter(username=submitter).first()
    if refusal := submit_refusal(person, collection):
        return f"on_behalf_of: {refusal}"
    return None


def _scope(user, administrator: bool) -> set[str] | None:
    """The collections ``user`` may submit to; None means every one (an unscoped administrator)."""
    scope = CollectionScope.objects.filter(user=user).first()
    if scope and scope.collections:
        return set(scope.collections)
    return None if administrator else set()


def submit_collections(user) -> set[str] | None:
    """What the submit form offers ``user``: their collections, None for all, empty for none."""
    if submit_refusal(user, None) is not None:
        return set()
    return _scope(user, is_administrator(user))


def grant_depositor(user, collections: list[str]) -> None:
    """Make ``user`` a depositor of ``collections`` (load_demo, tests, administrators' shells)."""
    from django.contrib.auth.models import Group

    user.groups.add(Group.objects.get_or_create(name=DEPOSITOR)[0])
    CollectionScope.objects.update_or_create(user=user, defaults={"collections": collections})
