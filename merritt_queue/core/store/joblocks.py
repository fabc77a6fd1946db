"""A worker taking a job: its lock, the job read under it, and letting go of it.

Guarantee: a job is locked by one session at a time, and read under the lock, so the
record returned holds whatever was written before. ``still_ours`` answers whether the
worker may go on to the job's next step: the job is at the status version it wrote and
the lock is this session's. A job of ours left in Storing or Recording keeps a parked
lock (``parking``) when let go.
"""

from __future__ import annotations

from kazoo.exceptions import NoNodeError

from .. import parking
from .. import tree as t
from ..errors import InvalidData, NotFound, QueueError
from ..records import JobRecord, Op, OpKind, evolve
from .engine import CONNECTION_ERRORS, log
from .jobs import Jobs
from .shared import Shared


class JobLocks:
    """Locking, re-checking and unlocking jobs."""

    def __init__(self, shared: Shared, jobs: Jobs):
        self.client = shared.client
        self.engine = shared.engine
        self.reads = shared.reads
        self.stats = shared.stats
        self.session = shared.session
        self.data_written = shared.data_written
        self.rechecked = shared.rechecked
        self.jobs = jobs

    def acquire_job(self, status: str) -> JobRecord | None:
        """Lock the first unlocked job of ``status`` (priority, then FIFO).

        The job is re-read under the lock; an index entry whose job is in
        another status is skipped (and left for the consistency check).
        """
        for priority, jid in self.jobs.jobs_in_state(status):
            try:
                job = self.lock_job(jid)
            except InvalidData as e:  # leave a damaged job to check_tree, serve the others
                log.error("skipping %s: %s", jid, e)
                continue
            if job is None:
                continue
            if job.status == status and job.priority == priority:
                return job
            log.warning(
                "index %s/%02d-%s disagrees with job status %s", status, priority, jid, job.status
            )
            self.unlock_job(job)
        return None

    def lock_job(self, jid: str) -> JobRecord | None:
        """Take the job's ephemeral lock and read the job; None when someone else holds it.

        The read goes out behind the lock's create, not after its answer: ZooKeeper serves
        a session's requests in order, so it reads the job under the lock, and is dropped
        when the lock was not ours.
        """
        t.check_id(t.JOB_PREFIX, jid)
        path = t.job_node(jid, "lock")
        sent = self.session.send(path)
        read = self.jobs.send_read(jid)
        if not self.session.taken(path, sent):
            if not self._take_parked(path):
                return None
            read = self.jobs.send_read(jid)
        # Read under the lock, the job holds whatever this store wrote in an earlier step
        # that never reached its status write; one process's store lives through many.
        self.data_written.pop(jid, None)
        self.rechecked.pop(jid, None)
        try:
            return evolve(
                self.jobs.from_read(jid, read, True), lock_session=self.session.session_id
            )
        except NotFound:
            self.session.unlock(t.job_node(jid, "lock"))
            return None
        except BaseException:
            self.session.unlock(t.job_node(jid, "lock"))
            raise

    def still_ours(self, job: JobRecord) -> bool:
        """Whether ``job`` is still at its status version and locked by this session.

        For a worker going on to the job's next step under its lock. After a commit that
        kept the lock, the status was read with it (``Engine.commit_and_stat``): no wait;
        else one round trip. The status version alone answers while this session lives:
        the lock is ephemeral and only a status write (a force-fail) removes it otherwise.
        When not, the lock is dropped if this session still holds it, and only then: after
        an admin's force-fail it may be another worker's.
        """
        status = self.rechecked.pop(job.jid, None)
        if status is None:
            self.stats["round_trips"] += 1
            status = self.reads.stat(t.job_node(job.jid, "status"))
        same_session = self.session.session_id == job.lock_session
        if same_session and status is not None and status.version == job.status_version:
            return True
        lock = self.client.exists(t.job_node(job.jid, "lock"))
        if same_session and lock is not None and lock.ephemeralOwner == self.session.session_id:
            self.session.unlock(t.job_node(job.jid, "lock"))
        return False

    def _take_parked(self, path: str) -> bool:
        """Turn a parked lock (``parking``) into this session's lock; False when the lock
        is a live one, or another worker took it over first."""
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            return False
        if not parking.is_parked(data, stat.ephemeralOwner):
            return False
        try:
            self.engine.commit(parking.take_over_ops(path, stat.version), f"lock {path}")
        except QueueError:
            return False
        except CONNECTION_ERRORS:
            self.session.orphan(
                path
            )  # perhaps taken, its answer lost: released once ZooKeeper answers
            raise
        return True

    def unlock_job(self, job: JobRecord | str) -> None:
        """Drop this session's lock; a job of ours left in Storing or Recording keeps a
        parked lock instead, in the same multi (``parking``)."""
        jid = job if isinstance(job, str) else job.jid
        path = t.job_node(jid, "lock")
        parks = isinstance(job, JobRecord) and parking.parks(job.configuration, job.status)
        if not (parks and self._park(path)):
            self.session.unlock(path)

    def _park(self, path: str) -> bool:
        """Turn this session's lock into a parked one; False when it is not ours or
        ZooKeeper does not answer (then ``SessionLocks.unlock`` releases it once it does)."""
        try:
            lock = self.client.exists(path)
            if lock is None or lock.ephemeralOwner != self.session.session_id:
                return False
            ops = [Op(OpKind.DELETE, path, version=lock.version), parking.park_op(path)]
            self.engine.commit(ops, f"lock {path}")
        except (QueueError, *CONNECTION_ERRORS):
            return False
        return True
