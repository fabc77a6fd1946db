"""The dispatcher's one periodic hook: the project's work that runs on a clock rather than on
a change in the tree. The core calls it (``Dispatcher(on_tick=...)``) without knowing any app.

Each part runs on its own: one that fails is logged and does not keep the others from
running; the dispatcher calls the hook again soon after a failure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections
from django.utils.module_loading import import_string

from ..core.store import QueueStore

log = logging.getLogger(__name__)

# Maintenance windows applied at their start and end (seconds until the next boundary).
WINDOWS = "steering.windows.scheduler.apply_windows"
# Depositors' notifications whose retry is due, or queued while Redis was away.
NOTIFICATIONS = "notifications.tasks.sweep"
# Resume runs advanced a slice at a time (seconds until one wants its next slice).
RESUME_RUNS = "steering.runs.driver.advance_runs"
# Finished items removed by age, and oldest first near the listing limit (a slice at a time).
RETENTION = "steering.maintenance.retention.run"


def ticker(store: QueueStore) -> Callable[[], float]:
    # Each part says how soon it wants the next tick (None: no sooner than the sweep); one
    # that fails is logged and tried again soon, never stopping the others.
    parts = [
        (import_string(WINDOWS), "maintenance windows not applied"),
        (import_string(RESUME_RUNS), "resume runs not advanced"),
        (import_string(RETENTION), "retention not applied"),
    ]
    sweep_notifications = import_string(NOTIFICATIONS)

    def tick() -> float:
        # A long-lived process: a database connection dropped since the last tick is
        # replaced rather than failing every tick after.
        close_old_connections()
        wait = float(settings.MQ_SWEEP_SECONDS)
        for part, failed in parts:
            try:
                asked = part(store)
                if asked is not None:
                    wait = min(wait, asked)
            except Exception:
                log.exception("%s; trying again soon", failed)
                wait = min(wait, 5.0)
        try:
            sweep_notifications()
        except Exception:
            log.exception("due notifications not queued; trying again at the next tick")
        return wait

    return tick
