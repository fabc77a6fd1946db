"""Error reports that never show a credential, even one inside a URL.

Django's own filter masks settings named like ``*PASSWORD*`` or ``*SECRET*``; a password in
``REDIS_URL`` or ``DATABASE_URL`` (or in any value built from them, such as ``RQ_QUEUES``, or
in an environment variable shown among the request's META) would still be printed.
"""

from __future__ import annotations

import re

from django.views.debug import SafeExceptionReporterFilter

# scheme://user:password@host -> scheme://user:********@host; scheme://token@host likewise.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")


def mask_url_credentials(text: str, substitute: str) -> str:
    def mask(m: re.Match) -> str:
        user, sep, _ = m["userinfo"].partition(":")
        return f"{m['scheme']}{user}:{substitute}@" if sep else f"{m['scheme']}{substitute}@"

    return _USERINFO.sub(mask, text)


class MaskingReporterFilter(SafeExceptionReporterFilter):
    # Whole values of settings named like *_URL too (a credential may hide in a query string).
    hidden_settings = re.compile(
        SafeExceptionReporterFilter.hidden_settings.pattern + "|URL$", flags=re.I
    )

    def cleanse_setting(self, key, value):
        value = super().cleanse_setting(key, value)
        if isinstance(value, str) and value != self.cleansed_substitute:
            return mask_url_credentials(value, self.cleansed_substitute)
        return value
