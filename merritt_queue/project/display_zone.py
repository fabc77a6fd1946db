"""The time zone pages show times in (MQ_DISPLAY_TIME_ZONE), for each request only.

Django's TIME_ZONE also sets the process's own zone (the TZ variable), and with it every
timestamp the queue core writes into ZooKeeper and every log line: those stay in UTC, and the
display zone is a matter of the pages alone.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

from .env import known_time_zone


def display_zone():
    """The configured zone, or UTC when the host does not know it (check mq.E060 says so)."""
    name = settings.MQ_DISPLAY_TIME_ZONE
    return ZoneInfo(name) if known_time_zone(name) else timezone.get_default_timezone()


class DisplayZoneMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        timezone.activate(display_zone())
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
