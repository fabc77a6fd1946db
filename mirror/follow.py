"""Following writes made by others (another host's workers, Merritt's own services).

Write-through (mirror) covers every write made through the core in a
Django process; this covers the rest, from ZooKeeper watches.

Guarantees:

- Watch callbacks only record what changed and wake the loop; all reads and
  mirror writes happen in the loop's thread.
- Every job entering or leaving a state directory (``/jobs/states/<status>``),
  or changing priority, is re-read and applied. The first listing of a
  directory is compared with the mirror, later ones with the previous listing.
  A directory is listed again (and its one-shot watch re-armed) by the loop
  as soon as it changes, but a big one at most once per
  ``LIST_SECONDS_PER_100K`` seconds per 100,000 entries: listing a
  100,000-job Completed directory costs some 40 ms of CPU, and kazoo's
  ChildrenWatch would list it again on every single completion.
- New and removed batches are seen through ``/batches``; the status changes
  of every batch not Completed or Deleted through a data watch on its status
  node (also set on a new batch before its status exists).
- Holds and the queue pause are seen through ``/locks/collections`` and
  ``/locks/queue``.
- An item's ``locked`` flag follows its ``lock`` node, which another writer
  (MerrittZK) creates and deletes with no status write, or in a separate call
  after one: an exists watch on the lock of every job and batch that is not
  final, or is locked. Each watch is armed once and re-armed when it fires;
  the lock's presence seen when arming it is compared with the item as read,
  and a difference has the item read again. kazoo lets go of every watch when
  its connection drops (the session may live on): the next turn arms them all
  again from the mirror's rows.
- What no watch shows (data nodes written by others, storage locks, a change
  missed while a session was lost) is caught by a full reconcile at start and
  every ``reconcile_seconds``; a loop turn that fails brings the next one
  forward.
- Read only: the follower never writes to ZooKeeper; the containers must
  exist (``runtime.get_store()`` creates them).
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.utils import timezone
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from batches.models import Batch
from jobs.models import Job
from merritt_queue.core import history, snapshot
from merritt_queue.core import tree as t
from merritt_queue.core.states import BatchStatus, JobStatus
from merritt_queue.core.store import QueueStore

from . import facade as mirror
from .accessfollow import AccessFollow
from .outage import OutageReport

log = logging.getLogger(__name__)

FINAL_BATCH = (BatchStatus.COMPLETED, BatchStatus.DELETED)
FINAL_JOB = (JobStatus.COMPLETED, JobStatus.DELETED)
ACTOR = history.MIRROR_WATCH  # a row only seen, when the item's history could not be read
RECHECK_SECONDS = 10.0  # how long a job is re-read each turn until its listing agrees
LIST_SECONDS_PER_100K = 2.0


def _ids(lock_paths: set[str], root: str) -> set[str]:
    """The item ids of ``/<root>/<id>/lock`` paths."""
    return {p.split("/")[2] for p in lock_paths if p.startswith(f"/{root}/")}


class Follower:
    """Keeps the mirror following the tree; ``run(stop)`` until ``stop`` is set."""

    def __init__(self, store: QueueStore, *, reconcile_seconds: float | None = None):
        self.store = store
        self.reconcile_seconds = (
            settings.MQ_RECONCILE_SECONDS if reconcile_seconds is None else reconcile_seconds
        )
        self.stop = threading.Event()
        self.wake = threading.Event()
        self._lock = threading.Lock()
        # Recorded by watch callbacks, taken by the loop.
        self._dirty_dirs: set[str] = set(JobStatus)
        self._batch_names: list[str] | None = None
        self._dirty_batches: set[str] = set()
        self._flags: set[str] = set()
        self._dirty_locks: set[str] = set()  # item lock paths whose watch fired
        self._rearm_locks = False  # the connection dropped every lock watch
        # The loop's own state: what it has applied.
        self._seen: dict[str, set[str]] = {}
        self._listed_at: dict[str, float] = {}
        self._seen_batches: set[str] | None = None
        self._watched: set[str] = set()
        self._lock_watched: set[str] = set()  # item lock paths with an armed watch
        # Jobs read in a state their directory's listing did not show yet: read again next turn.
        self._recheck: dict[str, float] = {}  # jid -> until when (monotonic)
        self.applied = 0
        self.access = AccessFollow(store.client, self._record)  # Merritt's access queues

    # --- watch callbacks: record and wake -------------------------------------------

    def _record(self, update) -> bool:
        if self.stop.is_set():
            return False
        with self._lock:
            update()
        self.wake.set()
        return True

    def _dir_event(self, status: str):
        return lambda _event: self._record(lambda: self._dirty_dirs.add(status))

    def _session(self, state) -> None:
        if state == KazooState.LOST:  # the one-shot watches died with the session
            self._record(lambda: self._dirty_dirs.update(JobStatus))
            self.access.forget_watches()

    def _lock_event(self, event) -> None:
        """An item's lock was created or deleted: that watch is spent, read the item again.
        With no path, the connection dropped and kazoo let go of every watch."""

        def update() -> None:
            if event.path is None:
                self._lock_watched.clear()
                self._rearm_locks = True
                self.access.forget_watches()
                return
            self._lock_watched.discard(event.path)
            self._dirty_locks.add(event.path)

        self._record(update)

    def _batches_cb(self, names) -> bool:
        return self._record(lambda: setattr(self, "_batch_names", names))

    def _flag_cb(self, flag: str):
        return lambda _names: self._record(lambda: self._flags.add(flag))

    def install_watches(self) -> None:
        self.store.client.add_listener(self._session)
        self._children(t.BATCHES, self._batches_cb)
        self._children(t.LOCK_COLLECTIONS, self._flag_cb("collections"))
        self._children(t.LOCK_QUEUE, self._flag_cb("locks"))

    def _children(self, path: str, callback) -> None:
        # allow_session_lost: keep watching after a session expiry (ZooKeeper restarts).
        ChildrenWatch(self.store.client, path, callback, allow_session_lost=True)

    def watch_batch(self, bid: str) -> None:
        """Watch a batch's status node (it may not exist yet) until the batch is final."""
        if bid in self._watched:
            return
        self._watched.add(bid)

        def callback(_data, _stat) -> bool:
            if bid not in self._watched:
                return False
            return self._record(lambda: self._dirty_batches.add(bid))

        DataWatch(self.store.client, t.batch_node(bid, "status"), callback)

    def _take(self):
        with self._lock:
            taken = (self._batch_names, self._dirty_batches, self._flags, self._dirty_locks)
            self._batch_names, self._dirty_batches, self._flags = None, set(), set()
            self._dirty_locks = set()
            rearm = self._rearm_locks and self.store.client.connected
            self._rearm_locks &= not rearm
        return (*taken, rearm)

    def watch_locks(self, expected: dict[str, bool]) -> set[str]:
        """Arm the exists watch on each item lock path not yet watched; the paths whose
        lock, seen while arming, differs from ``expected`` (the item as last read)."""
        with self._lock:
            new = [p for p in expected if p not in self._lock_watched]
            self._lock_watched.update(new)
        client = self.store.client
        pending = [(p, client.exists_async(p, watch=self._lock_event)) for p in new]
        differ = set()
        for path, result in pending:
            try:
                present = result.get() is not None
            except Exception:  # not armed: forget it, so the next read arms it again
                with self._lock:
                    self._lock_watched.discard(path)
                differ.add(path)
                continue
            if present != expected[path]:
                differ.add(path)
        return differ

    def _list_due(self) -> dict[str, list[str]]:
        """List the changed state directories whose turn has come, re-arming their watches."""
        now = time.monotonic()
        with self._lock:
            due = {s for s in self._dirty_dirs if now >= self._next_listing(s)}
            self._dirty_dirs -= due
        listings = {}
        try:
            for status in due:
                path = t.job_state_dir(status)
                listings[status] = self.store.client.get_children(path, self._dir_event(status))
                self._listed_at[status] = time.monotonic()
        except Exception:
            with self._lock:  # list them again next turn
                self._dirty_dirs |= due - set(listings)
            raise
        return listings

    def _next_listing(self, status: str) -> float:
        size = len(self._seen.get(status, ()))
        return self._listed_at.get(status, 0.0) + LIST_SECONDS_PER_100K * size / 100_000

    # --- the loop ---------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        self.stop = stop
        installed, next_full = False, 0.0
        report = OutageReport(
            log,
            "mirror follower",
            "ZooKeeper keeps every change; the follower rebuilds the mirror with a full "
            "reconcile once both answer again",
        )
        while not stop.is_set():
            self.wake.clear()
            try:
                if not installed:
                    self.install_watches()
                    installed = True
                if time.monotonic() >= next_full:
                    self.reconcile()
                    next_full = time.monotonic() + self.reconcile_seconds
                self.step()
                report.worked()
            except Exception as e:  # ZooKeeper or the database away: rebuild soon
                report.failed(e, "mirror follow step failed; a full reconcile follows shortly")
                next_full = min(next_full, time.monotonic() + 5)
                stop.wait(1)
            self.wake.wait(timeout=0.5)

    def reconcile(self) -> mirror.Drift:
        drift = mirror.full_reconcile(self.store)
        log.info("full reconcile: %s", drift.summary())
        for bid in (
            Batch.objects.exclude(status__in=FINAL_BATCH)
            .filter(removed_at__isnull=True)
            .values_list("bid", flat=True)
        ):
            self.watch_batch(bid)
        self._watch_live_locks()
        return drift

    def _watch_live_locks(self) -> None:
        """Arm the lock watch of every item the mirror has as live or locked."""
        jobs = Job.objects.exclude(status__in=FINAL_JOB, locked=False).filter(removed_at=None)
        batches = Batch.objects.exclude(status__in=FINAL_BATCH, locked=False).filter(
            removed_at=None
        )
        expected = {t.job_node(j, "lock"): lk for j, lk in jobs.values_list("jid", "locked")}
        for bid, locked in batches.values_list("bid", "locked"):
            expected[t.batch_node(bid, "lock")] = locked
        self._stale_locks(self.watch_locks(expected))

    def _stale_locks(self, paths: set[str]) -> None:
        """Have the items of these lock paths read again next turn."""
        if paths:
            with self._lock:
                self._dirty_locks |= paths
            self.wake.set()

    def step(self) -> int:
        """Apply what the watches recorded since the last turn; the number of items applied."""
        batch_names, dirty_batches, flags, dirty_locks, rearm = self._take()
        jids = set(self._recheck) | _ids(dirty_locks, "jobs")
        for status, names in self._list_due().items():
            jids |= self._diff_dir(status, names)
        bids = set(dirty_batches) | _ids(dirty_locks, "batches")
        if batch_names is not None:
            bids |= self._diff_batches(batch_names)
        try:
            if rearm:
                self._watch_live_locks()
            count = self._apply_jobs(jids) + self._apply_batches(bids) + self.access.step()
            if flags:
                self._sync_locks(flags)
        except Exception:
            self._put_back(jids, bids, flags)
            with self._lock:
                self._dirty_locks |= dirty_locks
                self._rearm_locks |= rearm
            raise
        if count or flags:
            mirror.mark(mirror.WATCH)
        self.applied += count
        return count

    def _put_back(self, jids: set[str], bids: set[str], flags: set[str]) -> None:
        """What a failed step took, for the next step: its listings are already counted as
        seen, so without this a change would wait for the next full reconcile (a database
        lock is usually gone a second later)."""
        until = time.monotonic() + RECHECK_SECONDS
        for jid in jids:
            self._recheck.setdefault(jid, until)
        with self._lock:
            self._dirty_batches |= bids
            self._flags |= flags

    # --- diffs ------------------------------------------------------------------------

    def _diff_dir(self, status: str, names: list[str]) -> set[str]:
        entries = set(names)
        before = self._seen.get(status)
        if before is None:
            live = Job.objects.filter(status=status, removed_at__isnull=True)
            rows = live.values_list("jid", "priority")
            before = {f"{priority:02d}-{jid}" for jid, priority in rows}
        self._seen[status] = entries
        parsed = (t.parse_index_name(name) for name in before ^ entries)
        return {p[1] for p in parsed if p}

    def _diff_batches(self, names: list[str]) -> set[str]:
        current = {n for n in names if t.is_batch_id(n)}
        before = self._seen_batches
        if before is None:
            before = set(
                Batch.objects.filter(removed_at__isnull=True).values_list("bid", flat=True)
            )
        self._seen_batches = current
        for bid in current - before:
            self.watch_batch(bid)
        return current ^ before

    # --- applying ---------------------------------------------------------------------

    def _apply_jobs(self, jids: set[str]) -> int:
        if not jids:
            return 0
        items = snapshot.read_jobs(self.store.client, sorted(jids))
        if items.records:
            mirror.apply_jobs(list(items.records.values()), actor=ACTOR)
        if items.missing:
            mirror.remove_jobs(items.missing)
        for jid, why in items.unreadable.items():
            log.warning("job %s not mirrored: %s", jid, why)
        for jid in jids:
            self._track(jid, items.records.get(jid))
        self._stale_locks(
            self.watch_locks(
                {
                    t.job_node(r.jid, "lock"): r.locked
                    for r in items.records.values()
                    if r.locked or r.status not in FINAL_JOB
                }
            )
        )
        return len(items.records) + len(items.missing)

    def _track(self, jid: str, record) -> None:
        """Re-read a job whose state its directory's listing does not show yet.

        A listing is fetched once per watch event, so a job that passes through
        a state between two fetches never shows there: read as Held, then
        deleted and removed, it would stay Held. Read again until the listing
        agrees, for RECHECK_SECONDS at most (then the next full reconcile settles it).
        """
        listing = self._seen.get(record.status) if record else None
        until = self._recheck.get(jid, time.monotonic() + RECHECK_SECONDS)
        if listing is None or f"{record.priority:02d}-{jid}" in listing or until < time.monotonic():
            self._recheck.pop(jid, None)
        else:
            self._recheck[jid] = until

    def _apply_batches(self, bids: set[str]) -> int:
        if not bids:
            return 0
        items = snapshot.read_batches(self.store.client, sorted(bids))
        if items.records:
            mirror.apply_batches(list(items.records.values()), actor=ACTOR)
        listed = self._seen_batches or set()
        gone = [b for b in items.missing if b not in listed]  # the others are being created
        if gone:
            mirror.remove_batches(gone)
        for bid, record in items.records.items():
            if record.status in FINAL_BATCH:
                self._watched.discard(bid)
        self._stale_locks(
            self.watch_locks(
                {
                    t.batch_node(r.bid, "lock"): r.locked
                    for r in items.records.values()
                    if r.locked or r.status not in FINAL_BATCH
                }
            )
        )
        self._watched.difference_update(gone)
        return len(items.records) + len(gone)

    def _sync_locks(self, flags: set[str]) -> None:
        locks = snapshot.read_locks(self.store.client)
        now = timezone.now()
        if "collections" in flags:
            mirror.sync_collections(snapshot.collection_holds(locks), now)
        mirror.refresh_locks(locks, now)
