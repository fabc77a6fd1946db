"""Python replays of Merritt storage's and inventory's queue consumers, beside ``merrittzk``.

Read, not copied, from:

- CDLUC3/mrt-store ``store2-src/.../store/consumer/StoreConsumer.java``: the daemon polls;
  when ``/locks/queue/ingest`` exists it takes nothing. ``Job.acquireJob(Storing)`` takes
  the first entry of ``/jobs/states/storing`` whose job it can lock (``QueueItem.lock``:
  skipped when ``/jobs/<jid>/lock`` exists, else an ephemeral ``lock`` is created) and
  loads it; a job whose status is no longer Storing is unlocked and skipped.
  ``StoreConsumeData.run`` reads the ``store`` node (``jsonProperty``: missing or not an
  object throws) and parses ``manifest_url``, ``mode`` split on ``/`` into action, node
  (``Integer.parseInt``) and object (URL-decoded), and ``delete`` (``getString``: a
  missing key throws); any of these failing fails the job with "Store Job data could not
  be processed <jid>", before anything is fetched. It then loops on
  ``MerrittLocks.lockObjectStorage(ark)`` (a persistent ``/locks/storage/<ark>``, retried
  every 30 s), and calls ``addVersion`` or ``updateVersionZoo(node, ark, delete,
  manifest_url)``. Storage fetches the manifest, reads it as an ``mrt-add-manifest``
  (``Manifest.getManifest(..., ManifestType.add)``; ``#%eof`` last), fetches each row's
  URL and checks its size and digest (``AddVersionContentAbs``, which retries the
  content); any exception sets the job Failed with "StoreConsumeData [error] Store action
  failed: " and the exception's message, ``null`` for most. On success:
  ``setStatus(success(), "Success")`` (Recording), then ``unlock`` the job and release the
  storage lock, each a separate call.
- CDLUC3/mrt-inventory ``inv-src/.../inv/zoo/ZooHandlerAbs.java`` and ``ProcessJob.java``:
  ``Job.acquireJob(Recording)`` likewise; ``ProcessJob`` reads the ``inventory`` node's
  ``manifest_url`` (null fails the job), keys its lock on ``url2ark``: the URL path's last
  segment, URL-decoded (``MerrittLocks.lockObjectInventory``, an ephemeral
  ``/locks/inventory/<key>``, retried every 10 s for up to 900 s), GETs that manifest
  (storage's ``/manifest/<node>/<ark>``) and saves the object; ``jobFails`` sets Failed
  with the exception's text, ``jobOK`` sets ``success()`` (Notify); both unlock the job and
  release the lock.
- CDLUC3/mrt-ingest ``HandlerTransfer`` / ``ProcessConsumer``: what ingest hands over,
  ``mode`` = ``add|update/<node>/<ARK URL-encoded>``, ``delete`` = ``producer/<name>\\n``
  per name ("" when none), ``inventory.manifest_url`` = storage's state URL with
  ``/state/`` replaced by ``/manifest/``.

The replays fetch over HTTP as storage does. Inventory's GET of storage's object manifest
is answered by the storage replay in the caller's process (``StorageReplay.object_manifest``).
What storage holds is also answered over HTTP, as mrt-store's ``/state/`` does, by a
``harness.merrittstore.MerrittStore`` the replay writes every stored version into (``state``):
that is what our own workers read of a ``merritt-queue`` job in Notify.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import requests

from harness.merrittstore import MerrittStore, StoredEntry
from harness.merrittzk import LOCK_INVENTORY, Item, MerrittZK, lock_name

ADD_PROFILE = "mrt-add-manifest"
STORE_FAILED = "StoreConsumeData [error] Store action failed: null"


class StoreActionFailed(Exception):
    pass


# A stored file: its size, the manifest's hash algorithm and the digest storage checked.
Stored = tuple[int, str, str]


@dataclass
class StoredObject:
    node: int
    versions: list[dict[str, Stored]] = field(default_factory=list)


class StorageReplay:
    """mrt-store's StoreConsumer and the add/update it calls, for storage nodes ``nodes``;
    with ``state``, each version stored is also answered by that node's ``/state/``."""

    def __init__(
        self,
        zk: MerrittZK,
        nodes=(9501,),
        *,
        base_url="http://storage.invalid/store",
        state: MerrittStore | None = None,
    ):
        self.zk, self.nodes, self.state = zk, set(nodes), state
        self.base_url = (state.url if state else base_url).rstrip("/")
        self.objects: dict[str, StoredObject] = {}
        self.fetched: list[str] = []
        self.taken: list[str] = []  # every jid acquireJob returned
        self.lock_wait = 0.05  # Java: 30 s

    def poll(self) -> Item | None:
        """One turn of the daemon: the job it took, or None."""
        if self.zk.check_lock_ingest_queue():
            return None
        job = self.zk.acquire_job("Storing")
        if job is None:
            return None
        self.taken.append(job.id)
        if job.status != "Storing":
            self.zk.unlock(job)
            return job
        ark = None
        try:
            manifest_url, action, node, ark, delete = self._store_data(job)
            self._lock_object(ark)
            try:
                self._store(manifest_url, action, node, ark, delete)
            except Exception:
                self.zk.set_status(job, "Failed", STORE_FAILED)
                raise StoreActionFailed(STORE_FAILED) from None
            self.zk.set_status(job, "Recording", "Success")
            self.zk.unlock(job)
        except Exception as e:
            self.zk.set_status(job, "Failed", str(e))
            self.zk.unlock(job)
        finally:
            self.zk.unlock(job)
            if ark is not None:
                self.zk.unlock_object_storage(ark)
        return job

    def _store_data(self, job: Item):
        js = self.zk._json(f"{job.path}/store")
        try:
            manifest_url = str(js["manifest_url"])
            parts = str(js["mode"]).split("/")
            action, node, ark = parts[0], int(parts[1]), unquote(parts[2])
            delete = js["delete"]
            if not isinstance(delete, str):
                raise TypeError(delete)
        except (KeyError, IndexError, ValueError, TypeError):
            raise ValueError(f" [error] Store Job data could not be processed {job.id}") from None
        return manifest_url, action, node, ark, delete

    def _lock_object(self, ark: str) -> None:
        while not self.zk.lock_object_storage(ark):
            time.sleep(self.lock_wait)

    def _store(self, manifest_url: str, action: str, node: int, ark: str, delete: str) -> None:
        if node not in self.nodes or action not in ("add", "update"):
            raise StoreActionFailed(None)
        files = self._fetch_manifest(manifest_url)
        stored = self.objects.setdefault(ark, StoredObject(node))
        if action == "update" and stored.versions:
            gone = {line for line in delete.splitlines() if line}
            version = {k: v for k, v in stored.versions[-1].items() if k not in gone}
        else:
            version = {}
        stored.versions.append(version | files)
        if self.state is not None and str(node) == self.state.node:
            self.state.objects[ark] = [
                [StoredEntry(name, *entry) for name, entry in v.items()] for v in stored.versions
            ]

    def _get(self, url: str) -> bytes:
        if urlsplit(url).scheme not in ("http", "https"):
            raise StoreActionFailed(None)  # the java.net fetch of a file: URL on its own disk
        self.fetched.append(url)
        response = requests.get(url, timeout=10)
        if response.status_code != 200:
            raise StoreActionFailed(None)
        return response.content

    def _fetch_manifest(self, url: str) -> dict[str, Stored]:
        lines = self._get(url).decode("utf-8").splitlines()
        headers = [line for line in lines if line.startswith("#%")]
        if not lines or not lines[-1].lower().startswith("#%eof"):
            raise StoreActionFailed(None)
        if not any(h.startswith("#%profile") and ADD_PROFILE in h for h in headers):
            raise StoreActionFailed(None)
        if not any(h.startswith("#%columns") for h in headers):
            raise StoreActionFailed(None)
        files = {}
        for line in lines:
            if not line.strip() or line.startswith("#"):
                continue
            cells = [c.strip() for c in line.split("|")]
            file_url, algorithm, digest, size, _, name = cells[:6]
            files[name] = self._fetch_file(file_url, algorithm, digest, int(size))
        return files

    def _fetch_file(self, url: str, algorithm: str, digest: str, size: int) -> Stored:
        for attempt in range(2):
            try:
                data = self._get(url)
            except (StoreActionFailed, requests.RequestException):
                if attempt:
                    raise StoreActionFailed(None) from None
                continue
            if len(data) == size and hashlib.new(algorithm, data).hexdigest() == digest:
                return size, algorithm, digest
        raise StoreActionFailed(None)

    def object_manifest(self, url: str) -> dict[str, Stored] | None:
        """What GET ``<base>/manifest/<node>/<ark>`` answers: the current version's files."""
        prefix = f"{self.base_url}/manifest/"
        if not url.startswith(prefix):
            return None
        node, _, encoded = url[len(prefix) :].partition("/")
        stored = self.objects.get(unquote(encoded))
        if stored is None or str(stored.node) != node or not stored.versions:
            return None
        return stored.versions[-1]


class InventoryReplay:
    """mrt-inventory's ZooHandler/ProcessJob, reading storage through ``storage``."""

    def __init__(self, zk: MerrittZK, storage: StorageReplay):
        self.zk, self.storage = zk, storage
        self.recorded: list[tuple[str, int]] = []  # (ark, version) saved
        self.lock_keys: list[str] = []
        self.taken: list[str] = []
        self.lock_wait = 0.05  # Java: 10 s, up to 900 s

    def poll(self) -> Item | None:
        job = self.zk.acquire_job("Recording")
        if job is None:
            return None
        self.taken.append(job.id)
        key = None
        try:
            url = self.zk._opt_json(f"{job.path}/inventory").get("manifest_url")
            if not url:
                raise ValueError("ProcessJob: manifestURL null")
            key = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
            self.lock_keys.append(key)
            while not self.zk._lock(f"{LOCK_INVENTORY}/{lock_name(key)}", ephemeral=True):
                time.sleep(self.lock_wait)
            files = self.storage.object_manifest(url)
            if files is None:
                raise ValueError(f"HTTP 404 for {url}")
            self.recorded.append((key, len(self.storage.objects[key].versions)))
            self.zk.set_status(job, "Notify")
        except Exception as e:
            self.zk.set_status(job, "Failed", repr(e))
        finally:
            self.zk.unlock(job)
            if key is not None:
                self.zk._delete(f"{LOCK_INVENTORY}/{lock_name(key)}")
        return job
