"""Subscriptions' signing secrets: one per subscription, so that no subscriber can verify, or
be fooled by, what the queue sends to another.

A subscription the submission named gets a random secret, given once to the depositor in
the submission's answer. A subscription made from the profile's default ``notify_url`` gets a
secret derived from the profile's notification key and its own id: the profile's receiver,
which holds that key, computes the secret of each subscription it is sent, and no two
subscriptions share one. Secrets are kept in clear, as an HMAC needs the key itself.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

# Bytes of randomness in a secret (written as twice as many hex digits).
SECRET_BYTES = 32
DERIVATION = "merritt-queue subscription:"


def new_secret() -> str:
    return secrets.token_hex(SECRET_BYTES)


def derived(profile_key: str, subscription_id: int) -> str:
    """The secret of a profile-default subscription: what its receiver computes as well."""
    message = f"{DERIVATION}{subscription_id}".encode()
    return hmac.new(profile_key.encode(), message, hashlib.sha256).hexdigest()
