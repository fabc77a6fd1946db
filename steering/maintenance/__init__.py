"""Maintenance operations (cleanup, reconcile, check tree), their page and the cleanup itself."""

# Queued RQ jobs name ``steering.maintenance.run_operation`` (``operations.TASK``).
from steering.maintenance.operations import run_operation

__all__ = ["run_operation"]
