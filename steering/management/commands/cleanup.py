"""Purge finished batches, deleted jobs and orphaned working directories.

``python manage.py cleanup --older-than 7d [--dry-run]``

Ages are read from ZooKeeper (each item's ``last_modified``), never from the mirror.
Removed: Completed and Deleted batches with their jobs (``store.purge_batch``), Deleted
jobs (``store.purge_job``), ``MQ_WORK_DIR/jobs/<jid>`` directories whose job no
longer exists, the upload folders (``MQ_WORK_DIR/uploads/<uuid>``) of the batches it purged,
and upload folders older than the cutoff that no batch in the tree refers to (upload ages
are the folders' own). The run is recorded as an admin action by "cleanup"; ``--dry-run``
only says what would go, and writes nothing.
"""

from __future__ import annotations

import re
import shutil
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from merritt_queue.core.errors import NotFound, QueueError
from merritt_queue.core.history import CLEANUP
from merritt_queue.core.states import BatchStatus, JobStatus
from merritt_queue.core.tree import is_job_id, parse_timestamp
from merritt_queue.deposit.uploads import upload_folder, uploads_root
from merritt_queue.project.runtime import get_store
from steering.models import AdminAction, AdminActionItem

UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def age(text: str) -> timedelta:
    match = re.fullmatch(r"\s*(\d+)\s*([smhdw])\s*", text or "")
    if not match:
        raise CommandError(f"--older-than {text!r}: use a number and a unit, e.g. 7d, 12h, 30m")
    return timedelta(**{UNITS[match[2]]: int(match[1])})


def _older(last_modified: str, cutoff: datetime) -> bool:
    when = parse_timestamp(last_modified)
    if when is None:  # no readable time: never removed on a guess
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when < cutoff


class Command(BaseCommand):
    help = "Purge Completed/Deleted batches, Deleted jobs and stale working directories."

    def add_arguments(self, parser):
        parser.add_argument("--older-than", required=True, help="e.g. 7d, 12h, 30m")
        parser.add_argument("--dry-run", action="store_true", help="only say what would go")

    def handle(self, *args, older_than: str, dry_run: bool, **options):
        cutoff = timezone.now() - age(older_than)
        store = get_store()
        store.actor = CLEANUP
        self.dry_run = dry_run
        self.rows: list[AdminActionItem] = []
        verb = "would remove" if dry_run else "removed"
        uploads = uploads_root(settings.MQ_WORK_DIR)
        kept_uploads, purged_uploads = set(), set()

        for bid in store.list_batch_ids():
            try:
                batch = store.get_batch(bid)
            except NotFound:
                continue
            upload = upload_folder(uploads, (batch.submission or {}).get("payload_url"))
            purged = (
                batch.status in (BatchStatus.COMPLETED, BatchStatus.DELETED)
                and _older(batch.last_modified, cutoff)
                and self._do(
                    bid,
                    batch,
                    lambda bid=bid: f"{verb} with {len(store.purge_batch(bid))} job(s)",
                    f"{verb} with its jobs",
                )
            )
            (purged_uploads if purged else kept_uploads).add(upload)

        jids = set(store.list_job_ids())
        for jid in sorted(jids):
            try:
                job = store.get_job(jid)
            except NotFound:  # went with its batch
                jids.discard(jid)
                continue
            if job.status != JobStatus.DELETED or not _older(job.last_modified, cutoff):
                continue
            if self._do(jid, job, lambda jid=jid: store.purge_job(jid) or verb, verb):
                jids.discard(jid)
        if not dry_run:
            jids = set(store.list_job_ids())

        work = Path(settings.MQ_WORK_DIR) / "jobs"
        if work.is_dir():
            for entry in sorted(work.iterdir()):
                if not is_job_id(entry.name) or entry.name in jids or entry.is_symlink():
                    continue
                if not dry_run:
                    shutil.rmtree(entry, ignore_errors=True)
                self._row(
                    f"workdir:{entry.name}", "", None, "done", f"{verb} working directory {entry}"
                )

        self._uploads(uploads, kept_uploads, purged_uploads, cutoff, verb)

        done = sum(r.result == "done" for r in self.rows)
        failed = sum(r.result == "failed" for r in self.rows)
        self.stdout.write(
            f"{'Dry run: ' if dry_run else ''}{done} item(s) {verb}, {failed} failed "
            f"(older than {older_than}, before {cutoff:%Y-%m-%d %H:%M:%S %Z})."
        )
        if not dry_run:
            self._record(older_than, done, failed)

    def _uploads(self, uploads: Path, kept: set, purged: set, cutoff: datetime, verb: str):
        """Upload folders of purged batches, and old ones no batch refers to."""
        if not uploads.is_dir():
            return
        for entry in sorted(uploads.iterdir()):
            folder = entry.resolve()
            if entry.is_symlink() or not entry.is_dir() or folder in kept:
                continue
            modified = datetime.fromtimestamp(entry.stat().st_mtime, tz=UTC)
            if folder not in purged and modified >= cutoff:
                continue  # maybe a submission whose batch is being written right now
            if not self.dry_run:
                shutil.rmtree(entry, ignore_errors=True)
            why = "its batch was purged" if folder in purged else "no batch refers to it"
            self._row(f"upload:{entry.name}", "", None, "done", f"{verb} upload {entry} ({why})")

    def _do(self, item_id, record, purge, dry_text) -> bool:
        try:
            detail = dry_text if self.dry_run else purge()
        except QueueError as e:
            self._row(item_id, record.status, record.status_version, "failed", str(e))
            return False
        self._row(item_id, record.status, record.status_version, "done", detail)
        return True

    def _row(self, item_id, status, version, result, detail) -> None:
        self.stdout.write(f"{item_id} ({status or 'directory'}): {detail}")
        self.rows.append(
            AdminActionItem(
                item_id=item_id,
                before_status=status,
                before_version=version,
                result=result,
                detail=detail,
            )
        )

    def _record(self, older_than: str, done: int, failed: int) -> None:
        record = AdminAction.objects.create(
            user=None,
            username="cleanup",
            action="cleanup",
            scope="queue",
            reason=f"cleanup --older-than {older_than}",
            params={"older_than": older_than},
            total=len(self.rows),
            done=done,
            failed=failed,
            token=uuid.uuid4().hex,
            finished=timezone.now(),
        )
        for row in self.rows:
            row.admin_action = record
        AdminActionItem.objects.bulk_create(self.rows)
