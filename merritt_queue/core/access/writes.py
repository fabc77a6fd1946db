"""Steering the access queues: requeue, delete, remove finished requests, pause.

Every status write is the one MerrittZK's ``setStatus`` makes (the old status JSON kept,
``status``, ``last_modified`` and ``message`` set), sent as one multi checked on the status
version read, with the request's ``history`` node rewritten in the same multi (see
core.history; MerrittZK reads an item's children by name and deletes recursively, so it
never trips on it). A write that would change nothing writes nothing, so a second click
finds the request already where the first one put it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from kazoo.client import KazooClient

from .. import history
from .. import tree as t
from ..errors import ChangedUnderYou, InvalidTransition, NotFound, QueueError
from ..records import Op, OpKind
from ..store.engine import Engine
from . import paths as p
from .reads import list_all, read_item, read_items
from .records import AccessItem


@dataclass(frozen=True)
class Written:
    """A status write's outcome: the request as it is now, and whether this call wrote."""

    item: AccessItem
    changed: bool


def requeue(
    client: KazooClient,
    queue: str,
    qid: str,
    *,
    actor: str,
    reason: str = "",
    expected_version: int | None = None,
    dry_run: bool = False,
) -> Written:
    """A Failed request back to Pending, as the admin tool's ``requeue_access`` does."""
    return _move(
        client,
        queue,
        qid,
        p.AccessStatus.PENDING,
        p.REQUEUE_FROM,
        actor=actor,
        reason=reason,
        expected_version=expected_version,
        dry_run=dry_run,
    )


def delete(
    client: KazooClient,
    queue: str,
    qid: str,
    *,
    actor: str,
    reason: str = "",
    expected_version: int | None = None,
    dry_run: bool = False,
) -> Written:
    """A Failed or Completed request to Deleted, as the admin tool's ``delete_access`` does;
    its nodes stay until ``remove_finished``."""
    return _move(
        client,
        queue,
        qid,
        p.AccessStatus.DELETED,
        p.DELETE_FROM,
        actor=actor,
        reason=reason,
        expected_version=expected_version,
        dry_run=dry_run,
    )


def _move(client, queue, qid, target, allowed, *, actor, reason, expected_version, dry_run):
    what = f"access request {p.key(queue, qid)}"
    item = read_item(client, queue, qid)
    if item is None:
        raise NotFound(f"{what} does not exist (removed?); nothing was written")
    if expected_version is not None and item.status_version != expected_version:
        raise ChangedUnderYou(
            f"{what} changed under you (status version {item.status_version}, not "
            f"{expected_version}); nothing was written, reload and try again"
        )
    if item.status == target:
        return Written(item, changed=False)
    if item.status not in allowed:
        now = item.status or "unreadable"
        ok = " or ".join(sorted(allowed))
        raise InvalidTransition(f"{what} is {now}; only a {ok} request can go to {target}")
    if dry_run:
        return Written(item, changed=False)
    ops, status_json, hist = status_ops(item, str(target), actor=actor, reason=reason)
    Engine(client).commit(ops, what)
    after = replace(
        item,
        status=str(target),
        status_version=item.status_version + 1,
        status_json=status_json,
        status_mtime_ms=int(time.time() * 1000),
        history=hist,
        children=tuple(sorted({*item.children, p.HISTORY})),
    )
    return Written(after, changed=True)


def status_ops(
    item: AccessItem, target: str, *, actor: str, reason: str = "", message: str = ""
) -> tuple[list[Op], dict, history.History]:
    """The multi that writes ``target`` as MerrittZK's ``setStatus`` does, checked on the
    status version read (a status that is not there is created), with its history entry:
    the ops, the status JSON written and the history as it will be."""
    status_json = dict(item.status_json)
    at = datetime.now().astimezone().strftime(t.TIMESTAMP_FORMAT)
    status_json.update(status=target, last_modified=at, message=message)
    data = json.dumps(status_json, separators=(",", ":")).encode()
    entry = history.Entry(
        version=item.status_version + 1,
        from_status=item.status or "",
        to_status=target,
        at=at,
        message=reason,
        by=actor,
    )
    hist, hist_data = history.append(item.history, entry)
    status_path = p.node(item.queue, item.qid, p.STATUS)
    hist_path = p.node(item.queue, item.qid, p.HISTORY)
    return (
        [
            Op(OpKind.SET, status_path, data, version=item.status_version)
            if item.status_version >= 0
            else Op(OpKind.CREATE, status_path, data),
            Op(OpKind.SET, hist_path, hist_data)
            if item.history.exists
            else Op(OpKind.CREATE, hist_path, hist_data),
        ],
        status_json,
        hist,
    )


@dataclass
class Removal:
    """What ``remove_finished`` chose and did, by request key."""

    selected: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    items: dict[str, AccessItem] = field(default_factory=dict)  # every request read, by key


def removable(item: AccessItem, older_than: timedelta, now: datetime) -> str | None:
    """Why ``item`` may not be removed now, or None when it may."""
    if item.status not in p.REMOVABLE:
        return f"is {item.status or 'unreadable'}, not Completed or Deleted"
    if item.locked:
        return "is locked"
    changed = item.status_modified  # ZooKeeper's clock: no age asked, no clock compared
    if older_than > timedelta(0) and (changed is None or now - changed < older_than):
        return f"changed less than {older_than} ago"
    return None


def remove_finished(
    client: KazooClient,
    older_than: timedelta,
    *,
    keys: Iterable[tuple[str, str]] | None = None,
    expected: Mapping[str, int] | None = None,
    now: datetime | None = None,
    dry_run: bool = False,
) -> Removal:
    """Remove the Completed and Deleted requests whose status is older than ``older_than``
    (of ``keys`` only, when given), each whole in one multi checked on its status version,
    as MerrittZK's ``delete`` removes one (recursively). A locked one is left, and so is one
    whose status version is not the one ``expected`` names for its key (the page the person
    confirmed showed it otherwise)."""
    now = now or datetime.now(UTC)
    wanted = list(keys) if keys is not None else list_all(client)
    out = Removal()
    batches = []
    for key, item in read_items(client, wanted).items():
        if item is None:
            out.skipped[key] = "is gone"
            continue
        out.items[key] = item
        why = removable(item, older_than, now)
        seen = (expected or {}).get(key, item.status_version)
        if not why and seen != item.status_version:
            why = f"changed since it was shown (status version {item.status_version}, not {seen})"
        if why:
            out.skipped[key] = why
            continue
        out.selected.append(key)
        status = p.node(item.queue, item.qid, p.STATUS)
        ops = [Op(OpKind.CHECK, status, version=item.status_version)]
        ops += [Op(OpKind.DELETE, f"{item.path}/{child}") for child in item.children]
        ops.append(Op(OpKind.DELETE, item.path))
        batches.append((ops, f"access request {key}"))
    if dry_run or not batches:
        return out
    for key, result in zip(out.selected, Engine(client).commit_many(batches), strict=True):
        if isinstance(result, QueueError):
            out.skipped[key] = str(result)
        else:
            out.removed.append(key)
    return out


def pause(client: KazooClient, queue: str) -> bool:
    """Create the queue's pause lock as MerrittZK does (persistent, empty); True when this
    call paused it, False when it already was."""
    return _flag(client, queue, True)


def unpause(client: KazooClient, queue: str) -> bool:
    return _flag(client, queue, False)


def _flag(client: KazooClient, queue: str, on: bool) -> bool:
    client.ensure_path(t.LOCK_QUEUE)  # the flag's create reads a missing parent as "done"
    return Engine(client).flag(p.PAUSE_LOCKS[p.check_queue(queue)], on)
