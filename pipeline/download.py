"""Downloading: a job's files fetched into its ``producer/`` folder, a container unpacked.

A remote host serves at most ``MQ_MAX_DOWNLOADS_PER_HOST`` downloads at once (its jobs wait
with their workers free), and one more for a small or urgent job (``core.lanes``: a host busy
with long downloads still serves a small deposit), each file stops at the size learned for
it (one of undeclared size at what Estimating reserved for it, ``reserve``), and a
container's unpacked size must fit the working disk before it is unpacked. A container that
is a BagIt bag is checked once unpacked, before anything is published (``bagstep``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from contextlib import nullcontext
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from merritt_queue.core import steplog, waiting
from merritt_queue.core.attempt import Attempt, sweep_abandoned
from merritt_queue.core.itemkeys import profile_of
from merritt_queue.core.runner import Decision, Outcome
from merritt_queue.core.store import JobRecord
from merritt_queue.deposit.containers import unpack, unpacked_bound, unpacked_size
from merritt_queue.deposit.digest import file_digests, normalise_algorithm
from merritt_queue.deposit.diskspace import percent_of_disk, percent_used_after
from merritt_queue.deposit.reserve import undeclared_each, undeclared_reserve
from merritt_queue.deposit.safepath import inside, inside_each
from merritt_queue.project.tasks import lane_rule
from merritt_queue.services.breakerguard import content_gate
from merritt_queue.services.errors import PartFileGone, ServiceError
from merritt_queue.services.fetch import DownloadItem
from merritt_queue.services.hostslots import HostFull
from pipeline import bagstep
from pipeline.payload import PayloadFile, head_sizes, job_config, known_sizes, payload_files
from pipeline.services import Services

# Beside a downloaded container kept while its unpacking waits for disk space: what it is
# a copy of, so only a run that would download the same thing again reuses it.
KEPT_ARCHIVE = ".kept-for-disk.json"


def downloading(s: Services, job: JobRecord) -> Outcome:
    """Download under a slot per remote host, each file stopped at the size learned for it.

    A job whose host already has ``MQ_MAX_DOWNLOADS_PER_HOST`` downloads in flight waits,
    its worker free, rather than join them: one depositor's slow server must not occupy
    every worker.
    """
    files = payload_files(s, job)
    try:
        lease = _host_slots(s, job, files)
    except HostFull as full:
        return Outcome.later(
            f"{waiting.HOST_WAIT}: {full.host} already has {full.limit} "
            "download(s) in flight (MQ_MAX_DOWNLOADS_PER_HOST)",
            delay=settings.MQ_HOST_WAIT_SECONDS,
        )
    heads = head_sizes(s, job)
    undeclared = undeclared_each(job.space_needed, known_sizes(files, heads))
    fetcher = s.fetcher.with_declared_sizes(heads, undeclared=undeclared)
    if s.breakers is not None:  # each host's breaker: a host that is down holds its jobs
        fetcher = fetcher.gated(content_gate(s.breakers))
    with lease:
        return _download(dataclasses.replace(s, fetcher=fetcher), job, files)


def undeclared_bytes(s: Services, count: int) -> int:
    """What Estimating reserves for each of ``count`` files of undeclared size (``reserve``);
    Downloading stops each there, taking the figure back from the job's ``space_needed``."""
    s.work_root.mkdir(parents=True, exist_ok=True)
    return undeclared_reserve(
        s.work_root, settings.MQ_MAX_DOWNLOAD_BYTES, settings.MQ_DISK_THRESHOLD, count
    )


def _host_slots(s: Services, job: JobRecord, files: list[PayloadFile]):
    """A held slot on every remote host of ``files`` (nothing to hold without HostSlots),
    renewed only while this worker's ZooKeeper session still holds ``job``'s lock."""
    if s.host_slots is None:
        return nullcontext()
    hosts = {urlsplit(f.url).hostname or "" for f in files} - {""}
    express = lane_rule().express(job.status, job.priority, job.space_needed)
    return s.host_slots.hold(hosts, alive=lambda: _in_lock_session(s, job), extra=int(express))


def _in_lock_session(s: Services, job: JobRecord) -> bool:
    # Local state only (the renewer must not wait on a ZooKeeper that is away): connected,
    # in the session that took the lock (as the commit checks it, ``_check_session``).
    # Another session means the old one expired, and the lock with it: another worker may
    # run this step already.
    session = job.lock_session
    return s.store.client.connected and (session is None or session == s.store.session.session_id)


def _download(s: Services, job: JobRecord, files: list[PayloadFile]) -> Outcome:
    """Download into this attempt's own staging folder, then publish it as ``producer/``.

    Only the staging folder is written while downloading, so an attempt cut off from
    ZooKeeper and a newer attempt of the same job never write or delete each other's files;
    ``producer/`` changes by renames made while the attempt is still current (``publish``).
    On any error, this attempt's staging folder goes, and nothing else. A file of it that
    vanished or was replaced meanwhile makes the step run again later, never fail.
    """
    attempt = s.current_attempt(job)
    work = s.job_dir(job.jid)
    sweep_abandoned(work)  # what crashed attempts left; never a live attempt's
    staging = attempt.staging(work)
    try:
        return _download_staged(s, attempt, job, work, staging, files)
    except PartFileGone as gone:
        return Outcome.later(f"{gone}", delay=settings.MQ_HOST_WAIT_SECONDS)
    except FileNotFoundError as gone:  # this attempt's staging folder, removed by someone
        return Outcome.later(
            f"a file being downloaded vanished ({gone.filename}); downloading again later",
            delay=settings.MQ_HOST_WAIT_SECONDS,
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _download_staged(
    s: Services,
    attempt: Attempt,
    job: JobRecord,
    work: Path,
    staging: Path,
    files: list[PayloadFile],
) -> Outcome:
    producer = staging / "producer"
    bag = None
    if job_config(job).get("payload_type") == "container":
        waiting = _download_container(s, attempt, job, work, staging, files[0])
        if waiting:
            return waiting
        bag = bagstep.unbag(staging, files[0].name)
    else:
        producer.mkdir(parents=True)
        _download_files(s, producer, files)
    sizes = [p.stat().st_size for p in producer.rglob("*") if p.is_file()]
    publish(attempt, producer, work / "producer", staging)
    _publish_bag_tags(attempt, bag, work, staging)
    total = sum(sizes)
    message = f"downloaded {len(sizes)} file(s), {total} bytes"
    data: dict[str, Any] = {"space_needed": total}
    if bag is not None:
        profile = s.profile(profile_of(job_config(job)))
        filled = bagstep.filled(job, bag.info, bool(profile and not profile.local_ids_refusal()))
        data |= filled
        message += f"; a valid bag, its tag files kept in system/{bagstep.TAGS}/"
        if filled:
            message += f"; bag-info.txt filled {', '.join(bagstep.filled_names(job, filled))}"
    return Outcome.success(message, data=data)


def _publish_bag_tags(attempt: Attempt, bag: bagstep.Unbagged | None, work: Path, staging: Path):
    """The bag's tag files as ``system/bag/``; an earlier attempt's, from a container that was
    a bag before an administrator changed the URL, go with this attempt's staging folder."""
    dest = work / "system" / bagstep.TAGS
    if bag is not None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        publish(attempt, bag.tags, dest, staging)
    elif dest.exists():
        attempt.check(f"remove the earlier {dest.name}")
        os.rename(dest, staging / f"replaced-{dest.name}")


def publish(attempt: Attempt, staged: Path, dest: Path, staging: Path) -> None:
    """Put ``staged`` at ``dest`` by renames, only while ``attempt`` is current.

    What an earlier attempt published there is first moved into this attempt's staging
    folder, to go with it: an attempt that lost its lock never gets this far, so it never
    replaces, nor removes, a newer attempt's files.
    """
    attempt.check(f"publish {dest.name}")
    staging.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        os.rename(dest, staging / f"replaced-{dest.name}")
    os.rename(staged, dest)


def _download_files(s: Services, producer: Path, files: list[PayloadFile]) -> None:
    targets = list(zip(files, inside_each(producer, [f.name for f in files]), strict=True))
    remote = []
    for f, target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        if f.url.startswith("file:"):
            s.fetch(f.url, target)
            steplog.note("copy", file=f.name, bytes=target.stat().st_size)
            _check_local(target, f)
        else:
            remote.append(DownloadItem(f.url, target, f.size, f.digest))
    if remote:
        s.fetcher.download_many(remote)


def _note_unpacked(name: str, producer: Path) -> None:
    """What the container held, for the step's log: its count, size and first names."""
    files = sorted(p for p in producer.rglob("*") if p.is_file())
    steplog.note(
        "unpacked",
        file=name,
        count=len(files),
        bytes=sum(p.stat().st_size for p in files),
        names=[p.relative_to(producer).as_posix() for p in files[: steplog.MAX_NAMES]],
    )


def _check_local(path: Path, f: PayloadFile) -> None:
    if f.digest:
        alg = normalise_algorithm(f.digest[0])
        got = file_digests(path, [alg])[alg]
        ok = got.lower() == f.digest[1].lower()
        steplog.note("digest", file=f.name, expected={alg: f.digest[1]}, computed={alg: got}, ok=ok)
        if not ok:
            raise ServiceError(
                f"{alg} mismatch for {f.name}: expected {f.digest[1]}, got {got}", retryable=False
            )


def _download_container(
    s: Services, attempt: Attempt, job: JobRecord, work: Path, staging: Path, f: PayloadFile
) -> Outcome | None:
    """Download and unpack the container into ``staging``; an Outcome when it must wait or
    fail instead. An archive kept by an earlier attempt for the same file is reused, read
    only; one this attempt downloads is published for later attempts only when it waits."""
    kept_archive = inside(work / "container", f.name)
    kept = kept_archive.parent / KEPT_ARCHIVE
    if kept_archive.is_file() and _kept_for(kept) == f.identity():
        archive = kept_archive
    else:
        archive = inside(staging / "container", f.name)
        archive.parent.mkdir(parents=True, exist_ok=True)
        s.fetch(f.url, archive, digest=f.digest, size=f.size)
        if f.url.startswith("file:"):
            _check_local(archive, f)
    refused = _unpack_refused(s, job, archive, f)
    waits = refused is not None and refused.action == Decision.LATER
    if waits and archive != kept_archive:
        _keep_archive(attempt, archive, kept_archive, staging, f)
    elif refused is not None and not waits and archive == kept_archive:
        attempt.check(f"remove the kept {f.name}")
        archive.unlink(missing_ok=True)
    if refused is not None:
        return refused
    unpack(archive, staging / "producer", **_unpack_limits())
    _note_unpacked(f.name, staging / "producer")
    if archive == kept_archive:
        attempt.check(f"forget the kept {f.name}")
        kept.unlink(missing_ok=True)
    return None


def _keep_archive(
    attempt: Attempt, archive: Path, kept_archive: Path, staging: Path, f: PayloadFile
) -> None:
    """Keep ``archive`` for the next attempt, with what it is a copy of beside it; both
    written in ``staging`` and renamed into place while ``attempt`` is current."""
    marker = staging / KEPT_ARCHIVE  # beside the archive downloaded into staging/container/
    marker.write_text(json.dumps(f.identity()))
    attempt.check(f"keep {f.name} for the next attempt")
    kept_archive.parent.mkdir(parents=True, exist_ok=True)
    os.replace(archive, kept_archive)
    os.replace(marker, kept_archive.parent / KEPT_ARCHIVE)


def _unpack_limits() -> dict[str, Any]:
    """The configured limits of a container, the same for its listing and its unpacking."""
    return {
        "max_total_bytes": settings.MQ_MAX_CONTAINER_BYTES,
        "max_depth": settings.MQ_CONTAINER_MAX_DEPTH,
        "max_path_bytes": settings.MQ_CONTAINER_MAX_PATH_BYTES,
    }


def _unpack_refused(s: Services, job: JobRecord, archive: Path, f: PayloadFile) -> Outcome | None:
    """Provisioning reserved the archive; its unpacked size must fit the disk too.

    Waits (keeping the archive) while other work holds the space, fails when the archive and
    its contents would take more than the threshold of the whole disk: they never can fit."""
    limit, threshold = settings.MQ_MAX_CONTAINER_BYTES, settings.MQ_DISK_THRESHOLD
    size = archive.stat().st_size
    # The archive is on the disk already; the most it may unpack to is known without reading
    # it, and when even that fits, reading the listing (a tar.gz decompressed) is not needed.
    if percent_used_after(s.work_root, unpacked_bound(size, limit)) <= threshold:
        return None
    unpacked = unpacked_size(archive, **_unpack_limits())
    projected = percent_used_after(s.work_root, unpacked)
    if projected <= threshold:
        return None
    if job.space_needed != size + unpacked:  # the job page shows what it waits for
        s.store.job_data.set_space_needed(job.jid, size + unpacked)
    share = percent_of_disk(s.work_root, size + unpacked)
    if share > threshold:
        return Outcome.fail(
            f"{f.name} unpacks to {unpacked} bytes: with the archive that is {share:.0f}% of "
            f"the working disk, more than MQ_DISK_THRESHOLD ({threshold}%) allows even with "
            "nothing else on it; give the working disk more space or raise the threshold, "
            "then resume the job"
        )
    return Outcome.later(
        f"{waiting.DISK_WAIT} to unpack {f.name}: its {unpacked} bytes would take the "
        f"working disk to {projected:.0f}% (threshold {threshold}%); the archive is kept",
        delay=settings.MQ_PROVISION_RETRY_SECONDS,
    )


def _kept_for(kept: Path) -> dict | None:
    try:
        return json.loads(kept.read_text())
    except (OSError, ValueError):
        return None
