"""The access (assembly) queue's paths and states, as MerrittZK (``Access.java``,
``AccessState.java``, ``merritt_zk_access.rb``) defines them; see docs/access-queue.md.

Pure: no client, no I/O, like ``core.tree``.
"""

from __future__ import annotations

import re
from enum import StrEnum

ROOT = "/access"
QUEUES = ("small", "large")
PREFIX = "qid"  # a sequential create of /access/<queue>/qid gives qid0000000042
# MerrittZK's queue pause locks: persistent, empty (``MerrittLocks.lock*AccessQueue``).
PAUSE_LOCKS = {"small": "/locks/queue/accessSmall", "large": "/locks/queue/accessLarge"}
CONTAINERS = (ROOT, *(f"{ROOT}/{q}" for q in QUEUES))

TOKEN = "token"
STATUS = "status"
LOCK = "lock"
HISTORY = "history"  # ours; MerrittZK reads children by name and deletes recursively
KNOWN_CHILDREN = frozenset({TOKEN, STATUS, LOCK, HISTORY})

_QID = re.compile(r"^qid\d{10}$")


class AccessStatus(StrEnum):
    PENDING = "Pending"
    PROCESSING = "Processing"
    COMPLETED = "Completed"
    FAILED = "Failed"
    DELETED = "Deleted"


# AccessState.java / states.yml ``access_states``: what MerrittZK's Java side allows.
TRANSITIONS: dict[str, frozenset[str]] = {
    AccessStatus.PENDING: frozenset({AccessStatus.PROCESSING}),
    AccessStatus.PROCESSING: frozenset({AccessStatus.COMPLETED, AccessStatus.FAILED}),
    AccessStatus.FAILED: frozenset({AccessStatus.PROCESSING, AccessStatus.DELETED}),
    AccessStatus.COMPLETED: frozenset(),
    AccessStatus.DELETED: frozenset(),
}
STATUSES = frozenset(s.value for s in AccessStatus)
# The admin tool's actions (mrt-admin-sinatra ``requeue_access``/``delete_access``), which
# go through the Ruby gem's ``set_status`` (no transition check): requeue sets Pending on a
# Failed request; delete sets Deleted on a Failed or Completed one.
REQUEUE_FROM = frozenset({AccessStatus.FAILED})
DELETE_FROM = frozenset({AccessStatus.FAILED, AccessStatus.COMPLETED})
# ``IngestState.isDeletable`` (no next state): what MerrittZK's ``delete`` and the admin
# tool's cleanup remove.
REMOVABLE = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)


def is_qid(name: str) -> bool:
    return bool(_QID.match(name or ""))


def check_queue(queue: str) -> str:
    if queue not in QUEUES:
        raise ValueError(f"{queue!r} is not an access queue (small or large)")
    return queue


def queue_dir(queue: str) -> str:
    return f"{ROOT}/{check_queue(queue)}"


def item_path(queue: str, qid: str) -> str:
    return f"{queue_dir(queue)}/{qid}"


def node(queue: str, qid: str, name: str) -> str:
    return f"{item_path(queue, qid)}/{name}"


def key(queue: str, qid: str) -> str:
    """One name for an item across both queues (qids are counted per queue)."""
    return f"{queue}/{qid}"


def split_key(value: str) -> tuple[str, str]:
    queue, _, qid = (value or "").partition("/")
    if queue not in QUEUES or not is_qid(qid):
        raise ValueError(f"{value!r} is not an access request (small/qid... or large/qid...)")
    return queue, qid
