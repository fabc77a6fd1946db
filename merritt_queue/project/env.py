"""Typed reads of environment variables; a bad value names the variable."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

DEV_SECRET_KEY = "django-insecure-merritt-queue-dev-only-change-me"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw.strip().lower() in _TRUE:
        return True
    if raw.strip().lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use true or false")


def env_host_ports(name: str) -> list[tuple[str, int]]:
    """A comma list of ``host:port`` (e.g. Redis Sentinels); empty when unset or blank."""
    raw = os.environ.get(name, "")
    out = []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        host = host.strip("[]")  # [::1]:26379
        if not (sep and host and port.isdigit() and 0 < int(port) < 65536):
            raise ImproperlyConfigured(
                f"{name}={raw!r}: {entry!r} is not host:port (e.g. sentinel1:26379)"
            )
        out.append((host, int(port)))
    return out


def known_time_zone(name: str) -> bool:
    """Whether ``name`` is an IANA zone (``Europe/Zurich``, ``UTC``) this host knows."""
    from zoneinfo import ZoneInfo

    try:
        ZoneInfo(name)
    except (ValueError, KeyError, OSError):
        return False
    return bool(name)
