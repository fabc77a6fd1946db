"""A profile's key rotated: its default webhook subscriptions get the secrets derived from the
new key (``keys.derived``). Apart from ``keys``, which the models take their default secret
from, so that the two do not import each other.
"""

from __future__ import annotations

from .keys import derived
from .models import PROFILE, WEBHOOK, Subscription


def rederive(profile) -> int:
    """Give the profile's default webhook subscriptions the secrets derived from its current
    key (after a rotation); how many."""
    subscriptions = list(
        Subscription.objects.filter(profile=profile.name, source=PROFILE, channel=WEBHOOK)
    )
    for subscription in subscriptions:
        subscription.secret = derived(profile.notify_secret, subscription.pk)
    Subscription.objects.bulk_update(subscriptions, ["secret"], batch_size=1000)
    return len(subscriptions)
