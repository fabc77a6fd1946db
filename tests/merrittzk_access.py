"""A replay of MerrittZK's access-queue calls, written from its source (CDLUC3/mrt-zk:
``Access.java``, ``QueueItem.java``, ``QueueItemHelper.java``, ``MerrittLocks.java``, and
the Ruby gem's ``merritt_zk_access.rb``/``merritt_zk_queue_item.rb`` that the admin tool,
CDLUC3/mrt-admin-sinatra, calls), so tests can play Merritt's access service and admin tool
against our code in both directions. Its own words, not a copy.
"""

from __future__ import annotations

import json
import posixpath
from datetime import datetime

from kazoo.client import KazooClient

STATES = {
    "Pending": ("Processing",),
    "Processing": ("Completed", "Failed"),
    "Failed": ("Processing", "Deleted"),
    "Completed": (),
    "Deleted": (),
}
LOCKS = {"small": "/locks/queue/accessSmall", "large": "/locks/queue/accessLarge"}


class NodeInvalid(Exception):
    """MerrittZKNodeInvalid: a node MerrittZK cannot load."""


class StateError(Exception):
    """MerrittStateError."""


def _now() -> str:  # QueueItemHelper.now(): "yyyy-MM-dd HH:mm:ss Z"
    return datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %z")


class MerrittAccess:
    """One MerrittZK client of the access queues (one ZooKeeper session)."""

    def __init__(self, client: KazooClient):
        self.zk = client

    def init_nodes(self) -> None:  # Access.initNodes, MerrittLocks.initLocks
        for path in ("/access", "/access/small", "/access/large", "/locks", "/locks/queue"):
            self.zk.ensure_path(path)

    @staticmethod
    def path(queue: str, qid: str) -> str:
        return f"/access/{queue}/{qid}"

    # --- Merritt's access service (Java) ------------------------------------------------

    def create_assembly(self, queue: str, token: dict) -> str:
        """Access.createAssembly: a sequential id, the token, then the Pending status."""
        made = self.zk.create(f"/access/{queue}/qid", b"", sequence=True)
        qid = posixpath.basename(made)
        self.zk.create(f"{self.path(queue, qid)}/token", json.dumps(token).encode())
        status = {"status": "Pending", "last_modified": _now(), "message": ""}
        self.zk.create(f"{self.path(queue, qid)}/status", json.dumps(status).encode())
        return qid

    def load(self, queue: str, qid: str) -> tuple[str, dict]:
        """QueueItem.load (Java): the status must be a JSON object naming an AccessState
        (``AccessState.valueOf``); the token is optional JSON."""
        base = self.path(queue, qid)
        if not self.zk.exists(base):
            raise NodeInvalid(f"Missing Node {base}")
        if not self.zk.exists(f"{base}/status"):
            raise NodeInvalid(f"Path not found for {base}/status")
        try:
            status = json.loads(self.zk.get(f"{base}/status")[0].decode())
            name = status["status"]
        except (ValueError, KeyError, TypeError) as e:
            raise NodeInvalid(f"Improperly formatted object for {base}/status") from e
        if name not in STATES:
            raise NodeInvalid(f"No enum constant AccessState.{name}")
        token: dict = {}
        if self.zk.exists(f"{base}/token"):
            raw = self.zk.get(f"{base}/token")[0]
            if raw:
                try:
                    token = json.loads(raw.decode())
                except ValueError as e:
                    raise NodeInvalid(f"Improperly formatted object for {base}/token") from e
                if not isinstance(token, dict):  # new JSONObject(s): an object, nothing else
                    raise NodeInvalid(f"Improperly formatted object for {base}/token")
        return name, token

    def ruby_load(self, queue: str, qid: str) -> tuple[str | None, object]:
        """QueueItem#load (Ruby): the ``status`` and ``token`` nodes must both exist and
        parse as JSON, of any kind (``zk.get`` raises on a missing node); a status name
        that is not an AccessState loads as None, and fails later where it is used."""
        base = self.path(queue, qid)
        if not self.zk.exists(base):
            raise NodeInvalid(f"Missing Node {base}")
        parsed = []
        for key in ("status", "token"):
            if not self.zk.exists(f"{base}/{key}"):
                raise NodeInvalid(f"Node Object for ({base}/{key}) missing")
            try:
                parsed.append(json.loads(self.zk.get(f"{base}/{key}")[0].decode()))
            except ValueError as e:
                raise NodeInvalid(f"Node Object for ({base}/{key}) is not valid json") from e
        status, token = parsed
        if not isinstance(status, dict):  # js.fetch(:status, ...) on no Hash: an error
            raise NodeInvalid(f"Node Object for ({base}/status) is not a Hash")
        name = status.get("status")
        return (name if name in STATES else None), token

    def lock(self, queue: str, qid: str) -> bool:
        """QueueItem.lock: an ephemeral, empty ``lock``; False when one is there."""
        path = f"{self.path(queue, qid)}/lock"
        if self.zk.exists(path):
            return False
        try:
            self.zk.create(path, b"", ephemeral=True)
            return True
        except Exception:
            return False

    def unlock(self, queue: str, qid: str) -> None:
        self.zk.delete(f"{self.path(queue, qid)}/lock")

    def acquire_pending_assembly(self, queue: str) -> str | None:
        """Access.acquirePendingAssembly: the first Pending request (by name) it can lock."""
        for qid in sorted(self.zk.get_children(f"/access/{queue}")):
            name, _ = self.load(queue, qid)
            if name == "Pending" and self.lock(queue, qid):
                return qid
        return None

    def set_status(self, queue: str, qid: str, status: str, message: str = "") -> None:
        """QueueItem.setStatus (Java): only AccessState's transitions; the old JSON kept."""
        current, _ = self.load(queue, qid)
        if status == current:
            return
        if status not in STATES[current]:
            raise StateError(f"State change ({current}->{status}) is not allowed")
        path = f"{self.path(queue, qid)}/status"
        old = json.loads(self.zk.get(path)[0].decode())
        old.update(status=status, last_modified=_now(), message=message or "")
        self.zk.set(path, json.dumps(old).encode())

    def delete(self, queue: str, qid: str) -> None:
        """Access.delete (Java): only a deletable (final) request, recursively."""
        name, _ = self.load(queue, qid)
        if STATES[name]:
            raise StateError(f"Delete invalid for {self.path(queue, qid)} ({name})")
        self.zk.delete(self.path(queue, qid), recursive=True)

    def list_jobs(self, queue: str, state: str | None = None) -> list[str]:
        """Access.listJobs (Java): every request (a ``states`` child skipped), loaded."""
        out = []
        for qid in sorted(self.zk.get_children(f"/access/{queue}")):
            if qid == "states":
                continue
            name, _ = self.load(queue, qid)
            if state is None or state == name:
                out.append(qid)
        return out

    # --- the admin tool (Ruby gem) --------------------------------------------------------

    def ruby_set_status(self, queue: str, qid: str, status: str, message: str = "") -> None:
        """QueueItem#set_status (Ruby): no transition check; an old JSON is kept whole, its
        ``last_modified`` too. A status it could not name is created anew: the node is
        there, so that fails."""
        path = f"{self.path(queue, qid)}/status"
        current, _ = self.ruby_load(queue, qid)
        if current == status:
            return
        if current is None:
            raise NodeInvalid(f"cannot create {path}: the node exists")
        old = json.loads(self.zk.get(path)[0].decode())
        old.update(status=status, message=message)
        self.zk.set(path, json.dumps(old).encode())

    def admin_requeue(self, queue: str, qid: str) -> None:  # requeue_access
        self.ruby_set_status(queue, qid, "Pending")

    def admin_delete(self, queue: str, qid: str) -> None:  # delete_access
        self.ruby_set_status(queue, qid, "Deleted")

    def list_jobs_as_json(self) -> list[dict]:
        """Access.list_jobs_as_json (Ruby): what the admin tool's table shows. A request
        it cannot load or list (its token no JSON object, its status unknown) is skipped,
        and the listing goes on."""
        jobs = []
        for queue in ("small", "large"):
            for qid in sorted(self.zk.get_children(f"/access/{queue}")):
                try:
                    name, token = self.ruby_load(queue, qid)
                    if name is None or not isinstance(token, dict):
                        raise NodeInvalid(f"cannot list {queue}/{qid}")
                except NodeInvalid:
                    continue
                status = json.loads(self.zk.get(f"{self.path(queue, qid)}/status")[0].decode())
                jobs.append(
                    {
                        **token,
                        "id": qid,
                        "queueNode": f"/access/{queue}",
                        "queueStatus": token.get("status"),
                        "status": name,
                        "date": status.get("last_modified", ""),
                    }
                )
        return jobs

    def admin_cleanup(self) -> list[str]:
        """cleanup_access_queue: load each listed request again, remove it (recursively)
        when its state is final."""
        removed = []
        for job in self.list_jobs_as_json():
            queue = job["queueNode"].removeprefix("/access/")
            name, _ = self.ruby_load(queue, job["id"])
            if name is not None and not STATES[name]:
                self.zk.delete(self.path(queue, job["id"]), recursive=True)
                removed.append(f"{queue}/{job['id']}")
        return removed

    def pause(self, queue: str) -> bool:  # MerrittLocks.lock{Small,Large}AccessQueue
        try:
            self.zk.create(LOCKS[queue], b"")
            return True
        except Exception:
            return False

    def unpause(self, queue: str) -> None:
        if self.zk.exists(LOCKS[queue]):
            self.zk.delete(LOCKS[queue])

    def paused(self, queue: str) -> bool:
        return self.zk.exists(LOCKS[queue]) is not None

    def metrics(self) -> dict[str, int]:
        """Access.metrics (Ruby): Deleted is not counted; Pending counts as processing.
        Unlike the listing, it stops at a request it cannot load."""
        out = {"completed": 0, "failed": 0, "processing": 0}
        for queue in ("small", "large"):
            for qid in self.zk.get_children(f"/access/{queue}"):
                name, _ = self.ruby_load(queue, qid)
                if name is None:  # job.status.name on nil
                    raise NodeInvalid(f"no AccessState for {queue}/{qid}")
                if name == "Completed":
                    out["completed"] += 1
                elif name == "Failed":
                    out["failed"] += 1
                elif name != "Deleted":
                    out["processing"] += 1
        return out
