"""Paths and encodings of the canonical ZooKeeper tree (see zk-tree.md).

Everything here is pure: no client, no I/O, so the wire format can be tested
without a server and shared by the store, the consistency check and the mirror.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import Any

from .errors import InvalidData
from .nodenames import node_name_problem
from .states import JobStatus, batch_dir_for

BATCHES = "/batches"
BATCH_UUIDS = "/batch-uuids"
JOBS = "/jobs"
JOB_STATES = "/jobs/states"
LOCKS = "/locks"
LOCK_QUEUE = "/locks/queue"
LOCK_QUEUE_INGEST = "/locks/queue/ingest"
LOCK_COLLECTIONS = "/locks/collections"
LOCK_STORAGE = "/locks/storage"
LOCK_INVENTORY = "/locks/inventory"
LOCK_LOCALID = "/locks/localid"

BATCH_PREFIX = "bid"
JOB_PREFIX = "jid"

CONTAINERS: tuple[str, ...] = (
    BATCHES,
    BATCH_UUIDS,
    JOBS,
    JOB_STATES,
    *(f"{JOB_STATES}/{s.lower()}" for s in JobStatus),
    LOCKS,
    LOCK_QUEUE,
    LOCK_COLLECTIONS,
    LOCK_STORAGE,
    LOCK_INVENTORY,
    LOCK_LOCALID,
    # Merritt's access queue (core.access.paths.CONTAINERS), as MerrittZK's Access.initNodes
    # makes them: read and steered here, never worked.
    "/access",
    "/access/small",
    "/access/large",
)

# Children of /jobs/JID besides the lock, and how each is encoded.
JOB_JSON_NODES = ("configuration", "status", "identifiers", "metadata", "inventory", "store")
JOB_OPTIONAL_NODES = ("identifiers", "metadata", "inventory", "store")

_ID_RE = {
    BATCH_PREFIX: re.compile(r"^bid\d{10}$"),
    JOB_PREFIX: re.compile(r"^jid\d{10}$"),
}
_INDEX_RE = re.compile(r"^(\d{2})-(jid\d{10})$")
# zk-tree.md's ":?/" is a pattern: an optional colon, then a slash.
_LOCK_NAME_RE = re.compile(r":?/")
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S %z"


def is_batch_id(name: str) -> bool:
    return bool(_ID_RE[BATCH_PREFIX].match(name))


def is_job_id(name: str) -> bool:
    return bool(_ID_RE[JOB_PREFIX].match(name))


def check_id(kind: str, value: str) -> str:
    if not _ID_RE[kind].match(value or ""):
        raise InvalidData(f"{value!r} is not a valid {kind} id (expected {kind} and 10 digits)")
    return value


# --- batch paths -------------------------------------------------------------


def batch_path(bid: str) -> str:
    return f"{BATCHES}/{bid}"


def batch_node(bid: str, name: str) -> str:
    return f"{BATCHES}/{bid}/{name}"


def batch_states(bid: str) -> str:
    return f"{BATCHES}/{bid}/states"


def batch_job_dir(bid: str, dirname: str) -> str:
    return f"{BATCHES}/{bid}/states/{dirname}"


def batch_job_ref(bid: str, job_status: str, jid: str) -> str:
    return f"{BATCHES}/{bid}/states/{batch_dir_for(job_status)}/{jid}"


def batch_uuid_path(uuid: str) -> str:
    if not uuid or "/" in uuid:
        raise InvalidData(f"batchID {uuid!r} cannot be a node name (empty or contains '/')")
    return f"{BATCH_UUIDS}/{uuid}"


# --- job paths ---------------------------------------------------------------


def job_path(jid: str) -> str:
    return f"{JOBS}/{jid}"


def job_node(jid: str, name: str) -> str:
    return f"{JOBS}/{jid}/{name}"


def job_state_dir(status: str) -> str:
    return f"{JOB_STATES}/{status.lower()}"


def index_name(priority: int, jid: str) -> str:
    return f"{check_priority(priority):02d}-{jid}"


def job_index(status: str, priority: int, jid: str) -> str:
    return f"{job_state_dir(status)}/{index_name(priority, jid)}"


def parse_index_name(name: str) -> tuple[int, str] | None:
    """``05-jid0000000001`` -> ``(5, "jid0000000001")``; None for a foreign name."""
    m = _INDEX_RE.match(name)
    return (int(m.group(1)), m.group(2)) if m else None


def check_priority(priority: int) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 99:
        raise InvalidData(f"priority must be a whole number from 0 to 99, not {priority!r}")
    return priority


# --- locks -------------------------------------------------------------------


def lock_name(value: str) -> str:
    """``ark:/13030/m5abc`` -> ``ark_13030_m5abc``; InvalidData for a name ZooKeeper would
    refuse (``nodenames``), naming the rule instead of failing as the node is made."""
    if not value:
        raise InvalidData("a lock needs a non-empty name")
    name = _LOCK_NAME_RE.sub("_", value)
    if problem := node_name_problem(name):
        raise InvalidData(f"no lock can be named after {value!r}: {problem}")
    return name


def collection_lock(mnemonic: str) -> str:
    return f"{LOCK_COLLECTIONS}/{lock_name(mnemonic)}"


def storage_lock(ark: str) -> str:
    return f"{LOCK_STORAGE}/{lock_name(ark)}"


def inventory_lock(ark: str) -> str:
    return f"{LOCK_INVENTORY}/{lock_name(ark)}"


def localid_lock(local_id: str) -> str:
    return f"{LOCK_LOCALID}/{lock_name(local_id)}"


# --- encoding ----------------------------------------------------------------


def now() -> str:
    # time.strftime is several times cheaper than datetime's, and this runs on every move.
    return time.strftime(TIMESTAMP_FORMAT, time.localtime())


def parse_timestamp(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.strptime(text, TIMESTAMP_FORMAT)
    except ValueError:
        return None


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def encode_json(value: Any) -> bytes:
    if value is None:
        return b""
    try:
        return _ENCODER.encode(value).encode()
    except (TypeError, ValueError) as e:
        raise InvalidData(f"value cannot be stored as JSON: {e}") from None


def decode_json(data: bytes | None) -> Any:
    if not data:
        return None
    return json.loads(data.decode())


def encode_int(value: int) -> bytes:
    return str(int(value)).encode()


def decode_int(data: bytes | None, default: int = 0) -> int:
    if not data:
        return default
    return int(data.decode().strip())


def encode_str(value: str | None) -> bytes:
    return value.encode() if value else b""


def decode_str(data: bytes | None) -> str | None:
    return data.decode() if data else None


def job_status_record(
    status: str,
    last_successful_status: str | None = None,
    retry_count: int = 0,
    message: str = "",
    last_modified: str | None = None,
) -> dict[str, Any]:
    return {
        "status": status,
        "last_successful_status": last_successful_status,
        "last_modified": last_modified or now(),
        "retry_count": retry_count,
        "message": message or "",
    }


def batch_status_record(
    status: str, message: str = "", last_modified: str | None = None
) -> dict[str, Any]:
    return {"status": status, "last_modified": last_modified or now(), "message": message or ""}
