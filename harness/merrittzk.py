"""A Python replay of MerrittZK: the node reads and writes Merritt's Java library makes.

Read from CDLUC3/mrt-zk (``Batch.java``, ``Job.java``, ``QueueItem.java``,
``QueueItemHelper.java``, ``MerrittLocks.java``) and the mrt-ingest consumers that call it
(``BatchConsumer``, ``InitializeConsumer``, ``BatchReportConsumer``, ``ProcessManager``),
re-expressed with kazoo: the same order of calls, the same plain (non-multi) writes, the
same state tables, the same silent lock leaks when a call throws half-way. Its own
session, so the project's store and workers see it as another process on the ensemble.

Nothing here is the project's code: it is the other writer, kept honest by the
conformance tests (``test_merrittzk_conformance.py`` compares the project's trees with
MerrittZK's; this module writes Merritt's trees for the project to meet).
"""

from __future__ import annotations

import json
import posixpath
import re
import time
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

BATCHES, JOBS, JOB_STATES = "/batches", "/jobs", "/jobs/states"
LOCK_COLLECTIONS, LOCK_LOCALID = "/locks/collections", "/locks/localid"
LOCK_STORAGE, LOCK_INVENTORY = "/locks/storage", "/locks/inventory"
LOCK_QUEUE_INGEST = "/locks/queue/ingest"

# BatchState.java / JobState.java: nextStates() of each state.
BATCH_NEXT = {
    "Pending": {"Held", "Processing"},
    "Held": {"Pending", "Deleted"},
    "Processing": {"Reporting", "Failed"},
    "Reporting": {"Failed", "Completed"},
    "Failed": {"UpdateReporting", "Deleted"},
    "UpdateReporting": {"Failed", "Completed"},
    "Completed": set(),
    "Deleted": set(),
}
JOB_NEXT = {
    "Pending": {"Held", "Estimating", "Failed"},
    "Held": {"Pending", "Deleted"},
    "Estimating": {"Provisioning", "Failed"},
    "Provisioning": {"Failed", "Downloading"},
    "Downloading": {"Failed", "Processing"},
    "Processing": {"Failed", "Storing"},
    "Storing": {"Failed", "Recording"},
    "Recording": {"Failed", "Notify"},
    "Notify": {"Failed", "Completed"},
    "Failed": {
        "Pending",
        "Estimating",
        "Provisioning",
        "Downloading",
        "Processing",
        "Storing",
        "Recording",
        "Notify",
        "Deleted",
    },
    "Completed": {"Deleted"},
    "Deleted": set(),
}
JOB_SUCCESS = {
    "Estimating": "Provisioning",
    "Provisioning": "Downloading",
    "Downloading": "Processing",
    "Processing": "Storing",
    "Storing": "Recording",
    "Recording": "Notify",
    "Notify": "Completed",
}


class MerrittStateError(Exception):
    """MerrittZK's MerrittStateError: a state change its tables do not allow."""


class MerrittZKNodeInvalid(Exception):
    """MerrittZK's MerrittZKNodeInvalid: a node missing or not in its format."""


def now() -> str:
    """QueueItemHelper.now(): ``yyyy-MM-dd HH:mm:ss Z``."""
    return time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime())


def serialize(value: Any) -> bytes:
    """QueueItemHelper.serializeAsBytes: ``toString()`` of the value; null or "" is empty."""
    if value is None:
        return b""
    if isinstance(value, dict | list):
        text = json.dumps(value, separators=(",", ":"))
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = str(value)
    return text.encode()


def lock_name(value: str) -> str:
    """MerrittLocks: ``replaceAll(":?/", "_")``."""
    return re.sub(r":?/", "_", value)


class Item:
    """A loaded Batch or Job: its id, status and data as MerrittZK holds them in memory."""

    def __init__(self, kind: str, id: str, bid: str | None = None):
        self.kind, self.id, self.bid = kind, id, bid
        self.status: str | None = None
        self.data: dict = {}
        self.retry_count = 0
        self.priority = 5
        self.job_state_path: str | None = None
        self.batch_state_path: str | None = None

    @property
    def path(self) -> str:
        return f"{BATCHES if self.kind == 'batch' else JOBS}/{self.id}"


class MerrittZK:
    """MerrittZK's static and instance calls over one kazoo session."""

    def __init__(self, client: KazooClient):
        self.zk = client

    # --- QueueItemHelper ------------------------------------------------------

    def exists(self, path: str) -> bool:
        return self.zk.exists(path) is not None

    def _create(self, path: str, data: bytes = b"", *, ephemeral=False, sequence=False) -> str:
        return self.zk.create(path, data, ephemeral=ephemeral, sequence=sequence)

    def _delete(self, path: str | None) -> None:
        if path and self.exists(path):
            try:
                self.zk.delete(path)
            except NoNodeError:
                pass

    def _delete_all(self, path: str) -> None:
        if self.exists(path):
            for child in self.zk.get_children(path):
                self._delete_all(f"{path}/{child}")
            self._delete(path)

    def _create_if_needed(self, path: str) -> None:
        if not self.exists(path):
            try:
                self._create(path)
            except NodeExistsError:  # createIfNeededForgiving
                pass

    def _string(self, path: str) -> str:
        """QueueItem.stringProperty: a missing node is invalid."""
        if not self.exists(path):
            raise MerrittZKNodeInvalid(f"Path not found for {path}")
        return self.zk.get(path)[0].decode()

    def _number(self, path: str) -> int:
        """QueueItem.intProperty / longProperty: ``Integer.parseInt``, no spaces or ``_``."""
        text = self._string(path)
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise MerrittZKNodeInvalid(f"Improperly formatted number for {path}")
        return int(text)

    @staticmethod
    def _object(text: str, path: str) -> dict:
        """``new JSONObject(text)``: anything but a JSON object is invalid."""
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise MerrittZKNodeInvalid(f"Improperly formatted object for {path}")
        return value

    def _json(self, path: str) -> dict:
        """QueueItem.jsonProperty."""
        return self._object(self._string(path), path)

    def _opt_json(self, path: str) -> dict:
        """QueueItem.optJsonProperty: a missing or empty node is ``{}``."""
        text = self.zk.get(path)[0].decode() if self.exists(path) else ""
        return self._object(text, path) if text else {}

    # --- QueueItem -------------------------------------------------------------

    def lock(self, item: Item) -> bool:
        path = f"{item.path}/lock"
        try:
            if self.exists(path):
                return False
            self._create(path, ephemeral=True)
            return True
        except KazooException:
            return False

    def unlock(self, item: Item) -> None:
        self._delete(f"{item.path}/lock")

    def load(self, item: Item) -> Item:
        if not self.exists(item.path):
            raise MerrittZKNodeInvalid(f"Missing Node {item.path}")
        status = self._json(f"{item.path}/status")
        item.status = status["status"]
        if status["status"] not in (BATCH_NEXT if item.kind == "batch" else JOB_NEXT):
            raise ValueError(f"No enum constant {status['status']}")  # valueOf() throws
        if item.kind == "batch":
            item.data = self._opt_json(f"{item.path}/submission")
        else:
            item.retry_count = status["retry_count"]  # getInt(): throws when absent
            item.data = self._opt_json(f"{item.path}/configuration")
            item.bid = self._string(f"{item.path}/bid")
            item.priority = self._number(f"{item.path}/priority")
            self._number(f"{item.path}/space_needed")
            for name in ("identifiers", "metadata", "inventory", "store"):
                self._opt_json(f"{item.path}/{name}")
            self._set_job_state_path(item)
            self._set_batch_state_path(item)
        return item

    def set_status(self, item: Item, status: str, message: str = "") -> None:
        """QueueItem.setStatus (and Job's statusObject and setStatusTrigger)."""
        table = BATCH_NEXT if item.kind == "batch" else JOB_NEXT
        if status != item.status:
            if item.status is not None and status not in table[item.status]:
                raise MerrittStateError(f"State change ({item.status}->{status}) is not allowed")
            path = f"{item.path}/status"
            old = self._json(path) if self.exists(path) else {}
            record = dict(old)
            record["status"] = status
            record["last_modified"] = now()
            if item.kind == "job":
                record.setdefault("last_successful_status", None)
                prior = old.get("status")
                if prior is not None and status not in ("Failed", "Deleted") and status != prior:
                    record["last_successful_status"] = prior  # "Failed" after a requeue
                record["retry_count"] = item.retry_count
            record["message"] = message or ""
            data = serialize(record)
            if item.status is None:
                self._create(path, data)
            else:
                self.zk.set(path, data)
            item.status = status
        if item.kind == "job":
            self._set_job_state_path(item)
            self._set_batch_state_path(item)

    # --- Batch -----------------------------------------------------------------

    def create_batch(self, submission: dict) -> Item:
        path = self._create(f"{BATCHES}/bid", sequence=True)
        batch = Item("batch", posixpath.basename(path))
        batch.data = submission
        uuid = submission.get("batchID", "")
        if uuid:
            self._create(f"/batch-uuids/{uuid}", batch.id.encode())
        self._create(f"{batch.path}/submission", serialize(submission))
        self.set_status(batch, "Pending")
        return batch

    def acquire_pending_batch(self) -> Item | None:
        for bid in sorted(self.zk.get_children(BATCHES)):
            if not self.exists(f"{BATCHES}/{bid}/states"):
                batch = Item("batch", bid)
                if self.lock(batch):
                    self.load(batch)
                    self._create(f"{batch.path}/states")
                    self.set_status(batch, "Processing")  # throws from Held: lock stays
                    return batch
        return None

    def acquire_batch_for_reporting(self) -> Item | None:
        for bid in sorted(self.zk.get_children(BATCHES)):
            processing = f"{BATCHES}/{bid}/states/batch-processing"
            if self.exists(processing) and not self.zk.get_children(processing):
                batch = self.load(Item("batch", bid))
                if batch.status in ("Completed", "Failed", "UpdateReporting"):
                    continue
                if self.lock(batch):
                    self.set_status(batch, "Reporting")  # throws from Deleted/Held/Pending
                    return batch
        return None

    def acquire_update_batch_for_reporting(self) -> Item | None:
        for bid in sorted(self.zk.get_children(BATCHES)):
            processing = f"{BATCHES}/{bid}/states/batch-processing"
            if self.exists(processing) and not self.zk.get_children(processing):
                batch = self.load(Item("batch", bid))
                if batch.status == "UpdateReporting":
                    if self.lock(batch):
                        return batch
        return None

    def delete_completed_batches(self) -> list[str]:
        deleted = []
        for bid in sorted(self.zk.get_children(BATCHES)):
            processing = f"{BATCHES}/{bid}/states/batch-processing"
            if self.exists(processing) and not self.zk.get_children(processing):
                batch = self.load(Item("batch", bid))
                if batch.status not in ("Completed", "Deleted"):
                    continue
                try:
                    self.delete_batch(batch)
                    deleted.append(bid)
                except Exception:  # Java prints the error and goes on with the next batch
                    continue
        return deleted

    def delete_batch(self, batch: Item) -> None:
        if batch.status not in ("Completed", "Deleted"):  # isDeletable()
            raise MerrittStateError(f"Can not delete Batch: {batch.path} ({batch.status})")
        for d in ("batch-processing", "batch-failed", "batch-completed", "batch-deleted"):
            p = f"{batch.path}/states/{d}"
            if self.exists(p):
                for jid in self.zk.get_children(p):
                    job = self.load(Item("job", jid, batch.id))
                    self.delete_job(job)
        uuid = batch.data.get("batchID", "")
        if uuid:
            self._delete(f"/batch-uuids/{uuid}")
        self._delete_all(batch.path)

    def batch_jobs(self, batch: Item, directory: str) -> list[str]:
        p = f"{batch.path}/states/{directory}"
        return sorted(self.zk.get_children(p)) if self.exists(p) else []

    # --- Job -------------------------------------------------------------------

    def create_job(
        self,
        bid: str,
        configuration: dict,
        priority: int = 5,
        identifiers: dict | None = None,
        metadata: dict | None = None,
    ) -> Item | None:
        path = self._create(f"{JOBS}/jid", sequence=True)
        job = Item("job", posixpath.basename(path), bid)
        job.data = configuration
        if not self.lock(job):
            return None
        try:
            self._create(f"{job.path}/bid", bid.encode())
            self._create(f"{job.path}/priority", b"5")
            self._create(f"{job.path}/space_needed", b"0")
            self._create(f"{job.path}/configuration", serialize(configuration))
            if identifiers:
                self._create(f"{job.path}/identifiers", serialize(identifiers))
            if metadata:
                self._create(f"{job.path}/metadata", serialize(metadata))
            if priority != 5:
                job.priority = priority
                self.zk.set(f"{job.path}/priority", str(priority).encode())
            self.set_status(job, "Pending")
            self._set_batch_state_path(job)  # createJob sets both again after setStatus
            self._set_job_state_path(job)
            return job
        finally:
            self.unlock(job)

    def acquire_job(self, state: str) -> Item | None:
        directory = f"{JOB_STATES}/{state.lower()}"
        if not self.exists(directory):
            return None
        for entry in sorted(self.zk.get_children(directory)):
            job = Item("job", entry[3:])
            if self.lock(job):
                try:
                    return self.load(job)
                except (MerrittZKNodeInvalid, KazooException):
                    self.unlock(job)
                    raise
        return None

    def set_status_with_retry(self, job: Item, status: str, message: str = "") -> None:
        job.retry_count += 1
        self.set_status(job, status, message)

    def delete_job(self, job: Item) -> None:
        if job.status not in ("Completed", "Deleted", "Failed", "Held"):  # isDeletable()
            raise MerrittStateError(f"Can not delete Job: {job.path} ({job.status})")
        self._delete(job.job_state_path)
        self._delete(job.batch_state_path)
        self._delete_all(job.path)

    # Job.setJobStatePath and setBatchStatePath compare the new path with ``==``, which for
    # a String.format result is never true in Java: each call deletes the job's state
    # node and creates it again, even when it does not move. Between the two, another
    # reader sees the job in no state directory (an empty batch-processing, for one).

    def _set_job_state_path(self, job: Item) -> None:
        assert job.status is not None
        js = f"{JOB_STATES}/{job.status.lower()}/{job.priority:02d}-{job.id}"
        if job.job_state_path is not None:
            self._delete(job.job_state_path)
        job.job_state_path = js
        if not self.exists(js):
            self._create_if_needed(posixpath.dirname(js))
            self._create(js)

    def _set_batch_state_path(self, job: Item) -> None:
        assert job.status is not None
        sub = {"Failed": "batch-failed", "Completed": "batch-completed", "Deleted": "batch-deleted"}
        bs = f"{BATCHES}/{job.bid}/states/{sub.get(job.status, 'batch-processing')}/{job.id}"
        if job.batch_state_path is not None:
            self._delete(job.batch_state_path)
        job.batch_state_path = bs
        if not self.exists(bs):
            parent = posixpath.dirname(bs)
            if not self.exists(parent):
                self._create_if_needed(parent)
            self._create_if_needed(bs)

    # --- MerrittLocks ----------------------------------------------------------

    def _lock(self, path: str, *, ephemeral: bool) -> bool:
        try:
            self._create(path, ephemeral=ephemeral)
            return True
        except KazooException:
            return False

    def lock_collection(self, mnemonic: str) -> bool:
        return self._lock(f"{LOCK_COLLECTIONS}/{mnemonic}", ephemeral=False)

    def unlock_collection(self, mnemonic: str) -> None:
        self._delete(f"{LOCK_COLLECTIONS}/{mnemonic}")

    def check_lock_collection(self, mnemonic: str) -> bool:
        return self.exists(f"{LOCK_COLLECTIONS}/{mnemonic}")

    def lock_object_localid(self, lid: str) -> bool:
        return self._lock(f"{LOCK_LOCALID}/{lock_name(lid)}", ephemeral=True)

    def unlock_object_localid(self, lid: str) -> None:
        self._delete(f"{LOCK_LOCALID}/{lock_name(lid)}")

    def check_lock_object_localid(self, lid: str) -> bool:
        return self.exists(f"{LOCK_LOCALID}/{lock_name(lid)}")

    def lock_object_storage(self, ark: str) -> bool:
        return self._lock(f"{LOCK_STORAGE}/{lock_name(ark)}", ephemeral=False)

    def unlock_object_storage(self, ark: str) -> None:
        self._delete(f"{LOCK_STORAGE}/{lock_name(ark)}")

    def check_lock_ingest_queue(self) -> bool:
        return self.exists(LOCK_QUEUE_INGEST)


class MerrittIngest:
    """The parts of mrt-ingest's consumers that decide which node is touched when.

    Each method is one poll of one consumer; the work itself (fetching, storing) is
    Merritt's business and is played by the caller moving the job on.
    """

    def __init__(self, zk: MerrittZK):
        self.zk = zk

    def submit(self, profile: str, *, update: bool = False, objects: int = 1, **extra) -> Item:
        """HandlerSubmit (batchProcess) then BatchConsumeData and HandlerSubmit (queue): a
        batch in Merritt's submission format, acquired, its jobs created, set Reporting."""
        submission = {
            "submitter": "merritt-tester",
            "profile": profile,
            "filename": "hello.txt",
            "type": "file",
            "update": update,
            "responseForm": "json",
            **extra,
        }
        self.zk.create_batch(submission)
        batch = self.zk.acquire_pending_batch()
        assert batch is not None, "Merritt's batch consumer found nothing to acquire"
        self.create_jobs(batch, objects)
        self.zk.set_status(batch, "Reporting")  # at once: BatchConsumeData
        self.zk.unlock(batch)
        return batch

    def create_jobs(self, batch: Item, objects: int) -> list[Item]:
        jobs = []
        for i in range(objects):
            configuration = dict(batch.data)  # jproperties: the submission's keys
            configuration["filename"] = f"object-{i}.txt"
            job = self.zk.create_job(
                batch.id, configuration, 5, {"primary_id": "", "local_id": [f"merritt-{i}"]}
            )
            assert job is not None
            jobs.append(job)
        return jobs

    def consume_batch(self) -> Item | None:
        """BatchConsumer and BatchConsumeData: acquire a Pending batch, create its jobs, set
        it Reporting. A submission not in Merritt's format (``getBoolean("update")`` throws)
        is abandoned Processing, its lock gone with the consumer's session."""
        batch = self.zk.acquire_pending_batch()
        if batch is None:
            return None
        if not isinstance(batch.data.get("update"), bool):
            self.zk.unlock(batch)
            return batch
        self.create_jobs(batch, 1)
        self.zk.set_status(batch, "Reporting")
        self.zk.unlock(batch)
        return batch

    def initialize(self) -> Item | None:
        """InitializeConsumer: take a Pending job, hold it if its profile's collection is
        held, else move it to Estimating."""
        if self.zk.check_lock_ingest_queue():
            return None
        job = self.zk.acquire_job("Pending")
        if job is None:
            return None
        profile = job.data.get("profile", "")
        if profile and self.zk.check_lock_collection(profile):
            self.zk.set_status(job, "Held")
            self.zk.unlock(job)
            return job
        self.zk.set_status(job, "Estimating")
        self.zk.unlock(job)
        return job

    def run_step(self, state: str) -> Item | None:
        """A step consumer (Estimate, Provision, ...): take a job in ``state``, succeed it."""
        job = self.zk.acquire_job(state)
        if job is None:
            return None
        self.zk.set_status(job, JOB_SUCCESS[state])
        self.zk.unlock(job)
        return job

    def finish_jobs(self, count: int = 1) -> None:
        """The consumers carry ``count`` Pending jobs through every step to Completed."""
        for _ in range(count):
            assert self.initialize() is not None
        for state in JOB_SUCCESS:
            for _ in range(count):
                assert self.run_step(state) is not None

    def report(self) -> Item | None:
        """BatchReportConsumer: report a batch with no job left processing."""
        batch = self.zk.acquire_batch_for_reporting()
        if batch is None:
            return None
        failed = self.zk.batch_jobs(batch, "batch-failed")
        self.zk.set_status(batch, "Failed" if failed else "Completed")
        self.zk.unlock(batch)
        return batch

    def requeue(self, job: Item, state: str) -> None:
        """The admin tool's requeue of a Failed job (Job.setStatusWithRetry)."""
        self.zk.set_status_with_retry(job, state)
