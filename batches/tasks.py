"""RQ tasks for batches: create a Pending batch's jobs; report a finished batch."""

from __future__ import annotations

from django.db import close_old_connections

from jobs.services import get_services

from . import handlers


def run_batch_pending(bid: str, status: str = "Pending") -> str:
    close_old_connections()
    try:
        return handlers.run_pending(get_services(), bid)
    finally:
        close_old_connections()


def run_batch_report(bid: str, status: str) -> str:
    close_old_connections()
    try:
        return handlers.run_report(get_services(), bid, status)
    finally:
        close_old_connections()
