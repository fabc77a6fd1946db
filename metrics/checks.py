"""System checks of the /metrics settings (``mq.E070``, ``mq.W071``)."""

from __future__ import annotations

import os

from django.conf import settings
from django.core import checks

from .access import parse_networks


def check_allow(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    _, bad = parse_networks(settings.MQ_METRICS_ALLOW)
    if not bad:
        return []
    return [
        checks.Error(
            f"MQ_METRICS_ALLOW has entries that are not networks: {', '.join(bad)}",
            hint="Give networks or addresses, comma-separated, e.g. 127.0.0.0/8,::1/128,"
            "10.1.2.0/24. Until then only a request with MQ_METRICS_TOKEN may read /metrics.",
            id="mq.E070",
        )
    ]


def check_dir(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    path = settings.MQ_METRICS_DIR
    if not path or (os.path.isdir(path) and os.access(path, os.W_OK)):
        return []
    return [
        checks.Warning(
            f"MQ_METRICS_DIR {path!r} is not a writable directory",
            hint="Every process of this host counts its steps there and /metrics sums them; "
            "without it /metrics shows only the web process's own counts.",
            id="mq.W071",
        )
    ]


def register() -> None:
    checks.register(check_allow)
    checks.register(check_dir)
