"""Purging finished batches, deleted jobs and orphaned working directories: what
``manage.py cleanup`` and the Maintenance page both run.

Ages are read from ZooKeeper (each item's ``last_modified``), never from the mirror.
Removed: Completed and Deleted batches with their jobs (``store.removal.purge_batch``), Deleted
jobs (``store.removal.purge_job``), ``MQ_WORK_DIR/jobs/<jid>`` directories whose job no
longer exists, the upload folders (``MQ_WORK_DIR/uploads/<uuid>``) of the batches it purged,
and upload folders older than the cutoff that no batch in the tree refers to (upload ages
are the folders' own). A dry run only says what would go, and writes nothing.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings

from merritt_queue.core.errors import NotFound, QueueError
from merritt_queue.core.history import CLEANUP
from merritt_queue.core.states import BatchStatus, JobStatus
from merritt_queue.core.store import QueueStore
from merritt_queue.core.tree import is_job_id, parse_timestamp
from merritt_queue.deposit.uploads import upload_folder, uploads_root
from steering.models import AdminActionItem

UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# Told (done, total) as the run goes: batches, jobs, directories and uploads looked at.
OnProgress = Callable[[int, int], None]


def age(text: str) -> timedelta:
    """``7d``, ``12h``, ``30m``... as a duration; ValueError saying how to write one."""
    match = re.fullmatch(r"\s*(\d+)\s*([smhdw])\s*", text or "")
    if not match:
        raise ValueError(f"--older-than {text!r}: use a number and a unit, e.g. 7d, 12h, 30m")
    return timedelta(**{UNITS[match[2]]: int(match[1])})


def _older(last_modified: str, cutoff: datetime) -> bool:
    when = parse_timestamp(last_modified)
    if when is None:  # no readable time: never removed on a guess
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when < cutoff


class Cleanup:
    """One run: ``run()`` acts (or, dry, only looks) and returns the audit rows, unsaved.

    ``say`` is told each row's line as it is made (the command prints them); ``progress``
    is told ``(done, total)`` after each item looked at.
    """

    def __init__(
        self,
        store: QueueStore,
        cutoff: datetime,
        *,
        dry_run: bool,
        progress: OnProgress | None = None,
        say: Callable[[str], None] | None = None,
        actor: str = CLEANUP,
        allowed: dict[str, int | None] | None = None,
    ):
        self.store, self.cutoff, self.dry_run, self.actor = store, cutoff, dry_run, actor
        # An approved request's cleanup removes only what its dry run listed, each node at
        # the version listed (``allowed_by``); None: whatever is old enough.
        self.allowed = allowed
        self.progress, self.say = progress, say
        self.rows: list[AdminActionItem] = []
        self.verb = "would remove" if dry_run else "removed"
        self.done = self.total = 0

    def run(self) -> list[AdminActionItem]:
        # Its writes are the cleanup's (or the person's) for this run only: a worker's
        # store serves its other jobs too.
        with self.store.changes.acting_as(self.actor):
            self._run()
        if self.progress is not None:
            self.progress(self.total, self.total)
        return self.rows

    def _run(self) -> None:
        store, verb, dry_run = self.store, self.verb, self.dry_run
        uploads = uploads_root(settings.MQ_WORK_DIR)
        work = Path(settings.MQ_WORK_DIR) / "jobs"
        bids = store.batches.list_batch_ids()
        self.total = len(bids) + len(store.jobs.list_job_ids()) + _entries(work) + _entries(uploads)
        kept_uploads: set[Path | None] = set()
        purged_uploads: set[Path | None] = set()

        for bid in bids:
            self._step()
            try:
                batch = store.batches.get_batch(bid)
            except NotFound:
                continue
            upload = upload_folder(uploads, (batch.submission or {}).get("payload_url"))
            purged = (
                batch.status in (BatchStatus.COMPLETED, BatchStatus.DELETED)
                and _older(batch.last_modified, self.cutoff)
                and self._do(
                    bid,
                    batch,
                    lambda bid=bid: f"{verb} with {len(store.removal.purge_batch(bid))} job(s)",
                    f"{verb} with its jobs",
                )
            )
            (purged_uploads if purged else kept_uploads).add(upload)

        jids = set(store.jobs.list_job_ids())
        for jid in sorted(jids):
            self._step()
            try:
                job = store.jobs.get_job(jid)
            except NotFound:  # went with its batch
                jids.discard(jid)
                continue
            if job.status != JobStatus.DELETED or not _older(job.last_modified, self.cutoff):
                continue
            if self._do(jid, job, lambda jid=jid: store.removal.purge_job(jid) or verb, verb):  # type: ignore[func-returns-value]
                jids.discard(jid)
        if work.is_dir():
            entries = sorted(work.iterdir())
            if not dry_run:
                # Listed after the directories: a job's node is written before its working
                # directory, so the job of every directory seen is in this list, however new.
                jids = set(store.jobs.list_job_ids())
            for entry in entries:
                self._step()
                if not is_job_id(entry.name) or entry.name in jids or entry.is_symlink():
                    continue
                if not self._listed(f"workdir:{entry.name}"):
                    continue
                if not dry_run:
                    shutil.rmtree(entry, ignore_errors=True)
                self._row(
                    f"workdir:{entry.name}", "", None, "done", f"{verb} working directory {entry}"
                )

        self._uploads(uploads, kept_uploads, purged_uploads)

    def _uploads(self, uploads: Path, kept: set, purged: set) -> None:
        """Upload folders of purged batches, and old ones no batch refers to."""
        if not uploads.is_dir():
            return
        for entry in sorted(uploads.iterdir()):
            self._step()
            folder = entry.resolve()
            if entry.is_symlink() or not entry.is_dir() or folder in kept:
                continue
            if not self._listed(f"upload:{entry.name}"):
                continue
            modified = datetime.fromtimestamp(entry.stat().st_mtime, tz=UTC)
            if folder not in purged and modified >= self.cutoff:
                continue  # maybe a submission whose batch is being written right now
            if not self.dry_run:
                shutil.rmtree(entry, ignore_errors=True)
            why = "its batch was purged" if folder in purged else "no batch refers to it"
            self._row(
                f"upload:{entry.name}", "", None, "done", f"{self.verb} upload {entry} ({why})"
            )

    def _listed(self, item_id: str) -> bool:
        return self.allowed is None or item_id in self.allowed

    def _step(self) -> None:
        self.done += 1
        self.total = max(self.total, self.done)  # jobs created since the count
        if self.progress is not None:
            self.progress(self.done, self.total)

    def _do(self, item_id, record, purge, dry_text) -> bool:
        if self.allowed is not None:
            if item_id not in self.allowed:
                return False
            if self.allowed[item_id] != record.status_version:
                shown = self.allowed[item_id]
                detail = (
                    f"not removed: changed since the request (version {shown}, now "
                    f"{record.status_version}, {record.status})"
                )
                self._row(item_id, record.status, record.status_version, "skipped", detail)
                return False
        try:
            detail = dry_text if self.dry_run else purge()
        except QueueError as e:
            self._row(item_id, record.status, record.status_version, "failed", str(e))
            return False
        self._row(item_id, record.status, record.status_version, "done", detail)
        return True

    def _row(self, item_id, status, version, result, detail) -> None:
        if self.say is not None:
            self.say(f"{item_id} ({status or 'directory'}): {detail}")
        self.rows.append(
            AdminActionItem(
                item_id=item_id,
                before_status=status,
                before_version=version,
                result=result,
                detail=detail,
            )
        )


def allowed_by(rows) -> dict[str, int | None]:
    """What a dry run listed as going (its done rows), each at the version it read."""
    return {r.item_id: r.before_version for r in rows if r.result == "done"}


def _entries(folder: Path) -> int:
    return sum(1 for _ in folder.iterdir()) if folder.is_dir() else 0


def counts(rows: list[AdminActionItem]) -> dict[str, int]:
    """What a run removed (or would), by kind, and what failed: the confirmation's numbers."""
    found = {"batches": 0, "jobs": 0, "workdirs": 0, "uploads": 0, "failed": 0, "skipped": 0}
    for row in rows:
        if row.result in ("failed", "skipped"):
            found[row.result] += 1
        elif row.item_id.startswith("workdir:"):
            found["workdirs"] += 1
        elif row.item_id.startswith("upload:"):
            found["uploads"] += 1
        elif is_job_id(row.item_id):
            found["jobs"] += 1
        else:
            found["batches"] += 1
    return found
