"""The service adapters a worker uses, chosen by settings, built once per process."""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit
from urllib.request import url2pathname

import django_rq
from django.conf import settings
from django.db import connection

from batches.models import Profile
from inventory.recorder import LocalInventory
from merritt_queue.core import stepowners
from merritt_queue.core.attempt import Attempt
from merritt_queue.core.history import WORKER_PREFIX, process_actor
from merritt_queue.core.itemkeys import profile_of
from merritt_queue.core.store import JobRecord, QueueStore
from merritt_queue.deposit.uploads import uploads_root
from merritt_queue.project.breakerboard import breakers as site_breakers
from merritt_queue.project.runtime import get_store
from merritt_queue.services import breakerguard
from merritt_queue.services.breakers import Breakers
from merritt_queue.services.errors import (
    InventoryError,
    MinterError,
    NotifyError,
    ServiceError,
    StorageError,
)
from merritt_queue.services.ezid import EzidMinter
from merritt_queue.services.fetch import Fetcher
from merritt_queue.services.hostslots import HostSlots
from merritt_queue.services.merrittinventory import MerrittInventoryClient, storage_manifest_url
from merritt_queue.services.merrittlocalids import MerrittLocalIds
from merritt_queue.services.merrittstorage import MerrittStorageClient
from merritt_queue.services.minter import LocalMinter, Minter
from merritt_queue.services.minttokens import MintTokens
from merritt_queue.services.notifier import CallbackNotifier
from merritt_queue.services.storage import LocalStorage, Storage
from mirror.sql import select_in
from pipeline import contentlinks

_PROFILE_FIELDS = tuple(f.attname for f in Profile._meta.concrete_fields)


@dataclass
class Services:
    store: QueueStore
    fetcher: Fetcher
    minter: Minter
    storage: Storage
    inventory: LocalInventory
    notifier: CallbackNotifier
    work_root: Path
    host_slots: HostSlots | None = None
    # merritt-api jobs: Merritt's storage and inventory, None when their settings are not set.
    merritt_storage: MerrittStorageClient | None = None
    merritt_inventory: MerrittInventoryClient | None = None
    # Merritt modes: inventory's local-id service (MERRITT_INVENTORY_URL), None when not set.
    merritt_localids: MerrittLocalIds | None = None
    # What one chain of a job's steps has read (``chain``), per thread.
    _chain: threading.local = field(default_factory=threading.local, repr=False)
    # The attempt at a step these services work for (``for_attempt``); None outside one.
    attempt: Attempt | None = None
    # The dependencies' circuit breakers the adapters above call through (None: not guarded).
    breakers: Breakers | None = None

    def for_attempt(self, attempt: Attempt) -> Services:
        """These services for one attempt at a job's step: its downloads and copies pass
        the attempt's fence (``attempt.check``), and ``current_attempt`` names it."""
        return dataclasses.replace(
            self, attempt=attempt, fetcher=self.fetcher.fenced(attempt.check)
        )

    def current_attempt(self, job: JobRecord) -> Attempt:
        """The attempt at ``job``'s step these services work for; an unfenced one of its
        own when they were not given one (a handler called outside the runner)."""
        if self.attempt is not None and self.attempt.jid == job.jid:
            return self.attempt
        return Attempt.unfenced(job.jid)

    @contextmanager
    def chain(self) -> Iterator[None]:
        """One run of a job's steps under its lock: within it the job's profile is read
        once, by the first step that asks. The next run reads it afresh, so an admin's
        edit reaches the job's later steps and every other job."""
        self._chain.profiles = {}
        try:
            yield
        finally:
            del self._chain.profiles

    def profile(self, name: str) -> Profile | None:
        """The profile ``name``, None when it no longer exists."""
        read = getattr(self._chain, "profiles", None)
        if read is None:
            return _read_profile(name)
        if name not in read:
            read[name] = _read_profile(name)
        return read[name]

    def storage_for(self, configuration: dict | None) -> Storage:
        """Where a job's versions are stored and read back: for a ``merritt-api`` job, Merritt
        storage on its profile's numeric node (else ``MERRITT_STORAGE_NODE``), whatever
        MQ_STORAGE says; the site's storage otherwise."""
        if stepowners.of_job(configuration) != stepowners.MERRITT_API:
            return self.storage
        return self._merritt_node_storage(configuration)

    def merritt_inventory_for(
        self, configuration: dict | None, ark: str
    ) -> tuple[MerrittInventoryClient, str]:
        """Merritt's inventory, and storage's manifest of ``ark`` that it is given."""
        if self.merritt_inventory is None:
            raise ServiceError(
                "this job was submitted in merritt-api mode, but MERRITT_INVENTORY_URL is not "
                "set on this worker: set it and resume the job",
                retryable=False,
            )
        storage = self._merritt_node_storage(configuration)
        return self.merritt_inventory, storage_manifest_url(storage.base_url, storage.node_id, ark)

    def merritt_localids_for(self, configuration: dict | None) -> MerrittLocalIds | None:
        """Merritt's local-id service for a job whose object lives in Merritt (either Merritt
        mode), where Merritt's own ingest looks its local ids up; None for a ``local`` job."""
        if stepowners.of_job(configuration) not in stepowners.MERRITT_MODES:
            return None
        return self.merritt_localids

    def _merritt_node_storage(self, configuration: dict | None) -> MerrittStorageClient:
        if self.merritt_storage is None:
            raise ServiceError(
                "this job was submitted in merritt-api mode, but MERRITT_STORAGE_URL is not "
                "set on this worker: set it and resume the job",
                retryable=False,
            )
        profile = self.profile(profile_of(configuration or {}))
        node = profile.storage_node if profile else ""
        if stepowners.storage_node_problem(node) is None:
            return self.merritt_storage.on_node(node)
        if not self.merritt_storage.node_id:
            raise ServiceError(
                f"this job's profile names no numeric storage node ({node!r}) and "
                "MERRITT_STORAGE_NODE is not set: set the profile's storage node and resume "
                "the job",
                retryable=False,
            )
        return self.merritt_storage  # MERRITT_STORAGE_NODE: the profile names none

    @property
    def uploads_root(self) -> Path:
        return uploads_root(self.work_root)

    def job_dir(self, jid: str) -> Path:
        return self.work_root / "jobs" / jid

    def batch_dir(self, bid: str) -> Path:
        return self.work_root / "batches" / bid

    def fetch(self, url: str, dest: Path, *, digest=None, size=None, max_bytes=None) -> None:
        """Fetch a payload: over HTTP, or copied from this queue's own uploads."""
        if url.startswith("file:"):
            self._copy_upload(url, dest)
        else:
            self.fetcher.download(url, dest, expected_size=size, digest=digest, max_bytes=max_bytes)

    def _copy_upload(self, url: str, dest: Path) -> None:
        src = Path(url2pathname(urlsplit(url).path)).resolve()
        # A file: URL is accepted only inside our upload area, never elsewhere on disk.
        if not src.is_relative_to(self.uploads_root.resolve()):
            raise ServiceError(f"{url} is not an uploaded file of this queue", retryable=False)
        if not src.is_file():
            raise ServiceError(f"the uploaded file {src.name} is gone", retryable=False)
        if self.attempt is not None:
            self.attempt.check(f"copy {src.name}")
        shutil.copyfile(src, dest)


def _read_profile(name: str) -> Profile | None:
    """``Profile.objects.filter(name=name).first()`` (names are unique), by the ORM's own
    statement compiled once: every job's chain asks, and building the query anew each time
    cost several times running it."""
    rows = select_in(Profile, "name", [name], _PROFILE_FIELDS)
    if not rows:
        return None
    return Profile.from_db(connection.alias, _PROFILE_FIELDS, [rows[0][f] for f in _PROFILE_FIELDS])


_cache: dict[int, Services] = {}


def get_services() -> Services:
    """This process's services (a forked worker builds its own)."""
    pid = os.getpid()
    if pid not in _cache:
        _cache.clear()
        _cache[pid] = build_services()
    services = _cache[pid]
    services.store = get_store()
    services.store.changes.default_actor = process_actor(WORKER_PREFIX)
    return services


def reset() -> None:
    _cache.clear()


def _network() -> dict[str, bool]:
    return {
        "allow_loopback": settings.MQ_ALLOW_LOOPBACK,
        "allow_private": settings.MQ_ALLOW_PRIVATE,
    }


def build_fetcher() -> Fetcher:
    """The site's fetcher: its timeouts, size limit and network policy (the SSRF guard)."""
    return Fetcher(
        timeout=settings.MQ_FETCH_TIMEOUT,
        retries=settings.MQ_FETCH_RETRIES,
        deadline=settings.MQ_FETCH_DEADLINE or None,
        max_download_bytes=settings.MQ_MAX_DOWNLOAD_BYTES or None,
        **_network(),
    )


def door_fetcher(seconds: float) -> Fetcher:
    """The site's fetcher for a person waiting at the door: the same network policy, one
    attempt, at most ``seconds`` from connect to last byte."""
    return Fetcher(
        timeout=min(settings.MQ_FETCH_TIMEOUT, seconds),
        retries=1,
        deadline=seconds,
        max_download_bytes=settings.MQ_MAX_DOWNLOAD_BYTES or None,
        **_network(),
    )


def build_services() -> Services:
    merritt_storage = _merritt_storage()
    services = Services(
        store=get_store(),
        fetcher=build_fetcher(),
        minter=_minter(),
        # With MQ_STORAGE=merritt, _merritt_storage answers a client, never None.
        storage=merritt_storage if settings.MQ_STORAGE == "merritt" else _local_storage(),  # type: ignore[arg-type]
        merritt_storage=merritt_storage,
        merritt_inventory=_merritt_inventory(),
        merritt_localids=_merritt_localids(),
        inventory=LocalInventory(),
        notifier=CallbackNotifier(retries=settings.MQ_CALLBACK_RETRIES, **_network()),
        work_root=Path(settings.MQ_WORK_DIR),
        host_slots=HostSlots(
            django_rq.get_connection("default"), settings.MQ_MAX_DOWNLOADS_PER_HOST
        ),
    )
    return guard(services, site_breakers())


STORAGE_CALLS = ("store_version", "get_version", "versions", "find_by_token")


def guard(services: Services, breakers: Breakers) -> Services:
    """The services with each outside dependency called through its breaker: EZID, storage,
    Merritt's inventory (its local ids too) and each callback's host. The local minter and
    inventory are this site's own disk and database, and are not."""
    g = breakerguard.guarded
    minter = services.minter
    if isinstance(minter, EzidMinter):
        minter = g(minter, breakers, "ezid", ("mint", "describe"), MinterError)
    optional = {
        "merritt_storage": ("storage", STORAGE_CALLS, StorageError),
        "merritt_inventory": ("inventory", ("add",), InventoryError),
        "merritt_localids": ("inventory", ("ark_for", "bind"), InventoryError),
    }
    guarded_optional = {
        attr: g(adapter, breakers, name, calls, error)
        for attr, (name, calls, error) in optional.items()
        if (adapter := getattr(services, attr)) is not None
    }
    storage = g(services.storage, breakers, "storage", STORAGE_CALLS, StorageError)
    notifier = g(services.notifier, breakers, breakerguard.webhook_name, ("notify",), NotifyError)
    return dataclasses.replace(
        services,
        minter=minter,
        storage=storage,
        notifier=notifier,
        breakers=breakers,
        **guarded_optional,
    )


def _minter():
    if settings.MQ_MINTER == "ezid":
        return EzidMinter(
            settings.EZID_URL,
            settings.EZID_USER,
            settings.EZID_PASSWORD,
            target_pattern=settings.MQ_EZID_TARGET_PATTERN,
            tokens=MintTokens(Path(settings.MQ_MINTER_DIR)),
        )
    return LocalMinter(Path(settings.MQ_MINTER_DIR))


def _local_storage() -> LocalStorage:
    return LocalStorage(Path(settings.MQ_STORAGE_ROOT))


def _merritt_storage() -> MerrittStorageClient | None:
    """The one Merritt storage client of the process: MQ_STORAGE=merritt's, and every
    merritt-api job's; None when neither can use it."""
    if not settings.MERRITT_STORAGE_URL and settings.MQ_STORAGE != "merritt":
        return None
    return MerrittStorageClient(
        settings.MERRITT_STORAGE_URL,
        settings.MERRITT_STORAGE_NODE,
        file_url=_work_file_url(Path(settings.MQ_WORK_DIR), settings.MERRITT_STORAGE_FILE_URL),
    )


def _merritt_inventory() -> MerrittInventoryClient | None:
    if not settings.MERRITT_INVENTORY_URL:
        return None
    return MerrittInventoryClient(
        settings.MERRITT_INVENTORY_URL, timeout=settings.MERRITT_INVENTORY_TIMEOUT
    )


def _merritt_localids() -> MerrittLocalIds | None:
    if not settings.MERRITT_INVENTORY_URL:
        return None
    return MerrittLocalIds(
        settings.MERRITT_INVENTORY_URL, timeout=settings.MERRITT_INVENTORY_TIMEOUT
    )


def _work_file_url(work_root: Path, base_url: str):
    """Where Merritt storage fetches a file of the working directory (it pulls files itself):
    the job's signed content URL (``contentlinks``) when ``MQ_CONTENT_BASE_URL`` is set, else
    the older unsigned ``MERRITT_STORAGE_FILE_URL`` mapping of the whole folder."""

    def file_url(path: Path) -> str:
        if settings.MQ_CONTENT_BASE_URL:
            relative = Path(path).resolve().relative_to((work_root / "jobs").resolve())
            jid, _, name = relative.as_posix().partition("/")
            return contentlinks.signed_url(jid, name)
        if not base_url:
            raise ServiceError(
                "MQ_STORAGE is merritt but MERRITT_STORAGE_FILE_URL is not set, so storage "
                "cannot fetch the files: set it to the URL that serves MQ_WORK_DIR"
            )
        relative = Path(path).resolve().relative_to(work_root.resolve())
        return f"{base_url.rstrip('/')}/{quote(relative.as_posix())}"

    return file_url
