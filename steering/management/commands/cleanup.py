"""Purge finished batches, deleted jobs and orphaned working directories.

``python manage.py cleanup --older-than 7d [--dry-run]``

What goes, and how ages are read, is ``steering.maintenance.cleanup`` (the Maintenance page runs the
same). The run is recorded as an admin action by "cleanup"; ``--dry-run`` only says what
would go, and writes nothing.
"""

from __future__ import annotations

import uuid

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from merritt_queue.project.runtime import get_store
from steering.maintenance import cleanup
from steering.models import AdminAction, AdminActionItem


def age(text: str):
    try:
        return cleanup.age(text)
    except ValueError as e:
        raise CommandError(str(e)) from None


class Command(BaseCommand):
    help = "Purge Completed/Deleted batches, Deleted jobs and stale working directories."

    def add_arguments(self, parser):
        parser.add_argument("--older-than", required=True, help="e.g. 7d, 12h, 30m")
        parser.add_argument("--dry-run", action="store_true", help="only say what would go")

    def handle(self, *args, older_than: str, dry_run: bool, **options):
        cutoff = timezone.now() - age(older_than)
        run = cleanup.Cleanup(get_store(), cutoff, dry_run=dry_run, say=self.stdout.write)
        rows = run.run()
        done = sum(r.result == "done" for r in rows)
        failed = sum(r.result == "failed" for r in rows)
        self.stdout.write(
            f"{'Dry run: ' if dry_run else ''}{done} item(s) {run.verb}, {failed} failed "
            f"(older than {older_than}, before {cutoff:%Y-%m-%d %H:%M:%S %Z})."
        )
        if not dry_run:
            self._record(rows, older_than, done, failed)

    def _record(self, rows: list[AdminActionItem], older_than: str, done: int, failed: int):
        record = AdminAction.objects.create(
            user=None,
            username="cleanup",
            action="cleanup",
            scope="queue",
            reason=f"cleanup --older-than {older_than}",
            params={"older_than": older_than},
            total=len(rows),
            done=done,
            failed=failed,
            token=uuid.uuid4().hex,
            finished=timezone.now(),
        )
        for row in rows:
            row.admin_action = record
        AdminActionItem.objects.bulk_create(rows)
