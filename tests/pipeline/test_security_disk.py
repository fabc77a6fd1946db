"""Issue 11, the workers' own defences: the job's folder and the working disk.

The submission door refuses hostile input, but the workers read what ZooKeeper holds, which
another system may have written: these tests write jobs straight into the tree (bypassing the
door) and run the real pipeline (ZooKeeper, Redis, RQ workers, a local content server).
Disk tests run on a small tmpfs of their own, so their percentages do not depend on what
else the machine's disk holds.
"""

from __future__ import annotations

import io
import os
import subprocess
import time
import zipfile
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import pytest

from merritt_queue.core.store import NewJob
from merritt_queue.deposit.containers import ContainerError, unpack, unpacked_size
from merritt_queue.deposit.safepath import UnsafePath, inside, inside_each
from pipeline.payload import HEAD_SIZES
from tests.pipeline.test_pipeline_e2e import assert_batch_completed

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

MB = 1024 * 1024
TERMINAL = ("Completed", "Failed", "Deleted")


def only_job(pipeline, bid):
    (job,) = pipeline.jobs(bid)
    return job


def job_in(pipeline, bid, *statuses):
    return lambda _batch: any(j.status in statuses for j in pipeline.jobs(bid))


def tree_batch(pipeline, configuration: dict) -> str:
    """A batch and its one job written straight into ZooKeeper, as another system might."""
    store = pipeline.store
    submission = {"profile": "demo", "submitter": "other-system", "type": "file"}
    bid = store.new_batches.create_batch(submission | {"type": configuration["payload_type"]}).id
    batch = store.batch_locks.begin_batch(bid)
    config = {"profile": "demo", "batch_row": 0} | configuration
    store.new_jobs.create_jobs(bid, [NewJob(config, 5)])
    store.batch_moves.start_processing(batch, "1 job(s) written by another system")
    return bid


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


# --- 1. the job's folder -----------------------------------------------------------------


@pytest.mark.parametrize("payload_type", ["file", "container"])
@pytest.mark.parametrize("where", ["absolute", "relative"])
def test_a_hostile_filename_in_the_tree_fails_the_job_and_writes_nothing_outside(
    pipeline, content, payload_type, where
):
    outside = pipeline.root / "outside" / "pwned.txt"
    # producer/ and container/ are both three levels under <root>/work: jobs/<jid>/<folder>.
    name = str(outside) if where == "absolute" else "../../../../outside/pwned.txt"
    payload = "call911.jpg" if payload_type == "file" else "brain_v1.zip"
    bid = tree_batch(
        pipeline,
        {"payload_type": payload_type, "payload_url": f"{content.url}/{payload}", "filename": name},
    )
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed", job.message
    rule = "is absolute" if where == "absolute" else "contains a '..' segment"
    assert job.message == (
        f"file name {name!r} {rule}; refused: a job's files must stay inside its folder"
    )
    assert job.last_successful_status == "Pending"  # refused in Estimating, before any fetch
    assert not outside.parent.exists()
    assert [r.path for r in content.requests if r.path.endswith(payload)] == []


def test_object_manifest_rows_that_leave_the_folder_are_refused_in_the_worker(pipeline, content):
    """The worker parses the object manifest itself; its file names get the manifest's rule."""
    manifest = (
        "#%checkm_0.7\n"
        "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-ingest-manifest\n"
        "#%prefix | mrt: | http://merritt.cdlib.org/terms#\n"
        "#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#\n"
        "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | "
        "nfo:fileLastModified | nfo:fileName | mrt:mimeType\n"
        f"{content.url}/call911.jpg | | | | | ../../../../outside/pwned.txt | image/jpeg\n"
        "#%eof\n"
    )
    (content.root / "hostile.checkm").write_text(manifest)
    bid = tree_batch(
        pipeline,
        {"payload_type": "object-manifest", "payload_url": f"{content.url}/hostile.checkm"},
    )
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed"
    assert "file name '../../../../outside/pwned.txt' contains a '..' segment" in job.message
    assert not (pipeline.root / "outside").exists()


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("/etc/passwd", "is absolute"),
        ("a/../../b", "contains a '..' segment"),
        ("a\x00b", "contains control characters"),
        ("line\nbreak", "contains control characters"),
        ("x" * 256, "has a segment over 255 bytes"),
        ("", "empty file name"),
        (None, "is not text"),
    ],
)
def test_inside_refuses_names_by_their_rule(tmp_path, name, rule):
    with pytest.raises(UnsafePath) as caught:
        inside(tmp_path, name)
    assert rule in str(caught.value)


def test_inside_refuses_a_name_that_leaves_through_a_symbolic_link(tmp_path):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePath, match="leads outside the job's folder through a symbolic"):
        inside(tmp_path / "job", "link/pwned.txt")
    assert inside(tmp_path / "job", "./a//b.txt") == tmp_path / "job" / "a" / "b.txt"


def test_inside_refuses_a_path_over_path_max(tmp_path):
    deep = "/".join(["d" * 200] * 21)
    with pytest.raises(UnsafePath, match="makes a path over 4096 bytes"):
        inside(tmp_path, deep)


def _judged(check, root, name):
    try:
        return check(root, name)
    except (UnsafePath, RuntimeError) as e:
        return type(e), str(e)


def test_inside_each_judges_every_name_as_inside_does(tmp_path):
    """The names Storing checks in one go: the same paths, the same refusals, whatever links
    the folder holds (to itself, out of it, round in a loop, to nothing)."""
    job, out = tmp_path / "job", tmp_path / "elsewhere"
    (job / "producer" / "sub").mkdir(parents=True)
    (job / "system").mkdir()
    out.mkdir()
    (job / "producer" / "a.txt").write_text("a")
    (job / "producer" / "sub" / "b.txt").write_text("b")
    (out / "secret.txt").write_text("s")
    links = {
        "producer/out": out,
        "producer/out.txt": out / "secret.txt",
        "producer/here": job / "system",
        "producer/here.txt": job / "producer" / "a.txt",
        "producer/top": job,
        "producer/dot": Path("."),
        "producer/up": Path(".."),
        "producer/dangling": tmp_path / "nothing",
        "producer/loop": job / "producer" / "loop",
        "system": job / "producer" / "sub",
    }
    (job / "system").rmdir()
    for name, target in links.items():
        (job / name).symlink_to(target)
    names = [
        "producer/a.txt",
        "./producer//sub/b.txt",
        "producer/sub/new/c.txt",
        "producer/missing.txt",
        "producer/a.txt/below",
        *links,
        *(f"{name}/x.txt" for name in links),
        "producer/top/producer/a.txt",
        "producer/up/elsewhere/secret.txt",
        "/".join(["d" * 200] * 21),
        "a/../../b",
    ]
    for name in names:
        assert _judged(lambda r, n: inside_each(r, [n])[0], job, name) == _judged(
            inside, job, name
        ), name
    allowed = [n for n in names if not isinstance(_judged(inside, job, n), tuple)]
    assert len(allowed) > 8 and len(allowed) < len(names) - 8
    assert inside_each(job, allowed) == [inside(job, n) for n in allowed]
    assert inside_each(job, []) == []


def test_inside_each_of_a_folder_behind_a_link(tmp_path):
    (tmp_path / "real" / "producer").mkdir(parents=True)
    (tmp_path / "job").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "producer" / "out").symlink_to(tmp_path)
    assert inside_each(tmp_path / "job", ["producer/a.txt"]) == [
        tmp_path / "job" / "producer" / "a.txt"
    ]
    with pytest.raises(UnsafePath, match="through a symbolic link"):
        inside_each(tmp_path / "job", ["producer/a.txt", "producer/out/x"])


# --- deep archives -----------------------------------------------------------------------


def zip_of(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return path


@pytest.mark.parametrize(
    ("entry", "limits", "rule"),
    [
        ("/".join(["d"] * 40) + "/f.txt", {}, "levels deep (the limit is 32, MQ_CONTAINER_MAX"),
        ("/".join(["d" * 100] * 12), {}, "has a path over 1024 bytes (the limit, MQ_CONTAINER"),
        ("a/" + "n" * 300, {}, "has a name segment over 255 bytes (the file system's limit)"),
        ("a/b/c/d.txt", {"max_depth": 3}, "is 4 levels deep (the limit is 3"),
    ],
)
def test_a_deep_archive_is_refused_by_its_rule_before_anything_is_written(
    tmp_path, entry, limits, rule
):
    archive = zip_of(tmp_path / "deep.zip", {"ok.txt": b"fine\n", entry: b"deep\n"})
    dest = tmp_path / "out" / "producer"
    with pytest.raises(ContainerError) as caught:
        unpack(archive, dest, **limits)
    assert str(caught.value).startswith("deep.zip: entry ")
    assert rule in str(caught.value)
    assert files_under(tmp_path / "out") == []


def test_a_deep_container_fails_its_job_with_the_rule_not_an_internal_error(pipeline, content):
    zip_of(content.root / "deep.zip", {"a/" + "n" * 300: b"deep\n"})
    bid = pipeline.submit(type="container", payload_url=f"{content.url}/deep.zip")
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed"
    assert "internal error" not in job.message
    assert "has a name segment over 255 bytes (the file system's limit)" in job.message


# --- 5. a container's unpacked size ------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 64 MiB tmpfs of the test's own (needs root, as the workers have here)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def compressible(size: int) -> bytes:
    """``size`` bytes that deflate about 60 times: well under the container bomb ratio."""
    block = os.urandom(1024) + bytes(63 * 1024)
    return (block * (size // len(block) + 1))[:size]


def container_of(path: Path, size: int) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big.bin", compressible(size))
        zf.writestr("small.txt", b"small\n")
    return path


def on_small_disk(pipeline, settings, small_disk, threshold: int) -> Path:
    settings.MQ_WORK_DIR = str(small_disk / "work")
    settings.MQ_DISK_THRESHOLD = threshold
    from pipeline import services

    services.reset()
    return small_disk / "work"


def test_unpacked_size_reads_the_listing_without_writing(tmp_path):
    archive = container_of(tmp_path / "c.zip", 3 * MB)
    assert unpacked_size(archive) == 3 * MB + len(b"small\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.zip"]


def test_the_listing_is_read_under_the_same_path_limits_as_the_unpacking(tmp_path):
    """With MQ_CONTAINER_MAX_DEPTH raised, the disk check once refused (by the default depth)
    an archive that unpacking would accept."""
    entry = "/".join(["d"] * 40) + "/f.txt"
    archive = zip_of(tmp_path / "deep.zip", {entry: b"deep\n"})
    assert unpacked_size(archive, max_depth=64) == len(b"deep\n")
    assert [f.name for f in unpack(archive, tmp_path / "out", max_depth=64)] == [entry]


def test_a_container_waits_in_downloading_until_its_unpacked_size_fits_then_completes(
    pipeline, content, settings, small_disk
):
    work = on_small_disk(pipeline, settings, small_disk, threshold=60)
    ballast = small_disk / "ballast"
    ballast.write_bytes(bytes(30 * MB))  # other work: 47% of the disk with the archive
    archive = container_of(content.root / "big.zip", 20 * MB)
    bid = pipeline.submit(type="container", payload_url=f"{content.url}/big.zip")
    pipeline.run(bid, until=job_in(pipeline, bid, "Downloading", *TERMINAL))
    job = only_job(pipeline, bid)
    for _ in range(3):  # it waits, round after round, and keeps the downloaded archive
        pipeline.step()
        job = pipeline.store.jobs.get_job(job.jid)
        assert job.status == "Downloading", job.message
    unpacked = 20 * MB + len(b"small\n")
    size = archive.stat().st_size
    assert job.message.startswith(
        f"waiting for disk space to unpack big.zip: its {unpacked} bytes would take the "
        "working disk to "
    ), job.message
    assert job.message.endswith("% (threshold 60%); the archive is kept")
    assert job.space_needed == size + unpacked
    assert files_under(work / "jobs" / job.jid / "producer") == []
    assert (work / "jobs" / job.jid / "container" / "big.zip").stat().st_size == size

    ballast.unlink()
    batch = pipeline.run(bid)
    assert batch.status == "Completed", batch.message
    assert_batch_completed(pipeline, bid, 1)
    gets = [r for r in content.requests if r.method == "GET" and r.path == "/big.zip"]
    assert len(gets) == 1  # the kept archive was unpacked, not downloaded again


def test_a_kept_archive_still_waits_when_the_new_attempt_has_no_staging_folder(
    pipeline, content, settings, small_disk
):
    """The attempt that reused a kept archive wrote its marker into its own staging folder,
    which nothing had made (the archive is not downloaded again): "a file being downloaded
    vanished", and the wait's words lost. The test above met it only when the machine was
    slow enough for the wait to be over before its next step."""
    work = on_small_disk(pipeline, settings, small_disk, threshold=60)
    (small_disk / "ballast").write_bytes(bytes(30 * MB))
    container_of(content.root / "big.zip", 20 * MB)
    bid = pipeline.submit(type="container", payload_url=f"{content.url}/big.zip")
    pipeline.run(bid, until=job_in(pipeline, bid, "Downloading", *TERMINAL))
    job = only_job(pipeline, bid)
    for _ in range(2):
        time.sleep(settings.MQ_PROVISION_RETRY_SECONDS * 2)  # its wait over: the step runs
        pipeline.step()
        job = pipeline.store.jobs.get_job(job.jid)
        assert job.message.startswith("waiting for disk space to unpack big.zip"), job.message
    assert (work / "jobs" / job.jid / "container" / "big.zip").is_file()


def test_a_container_that_can_never_fit_fails_without_unpacking(
    pipeline, content, settings, small_disk
):
    work = on_small_disk(pipeline, settings, small_disk, threshold=50)
    container_of(content.root / "huge.zip", 40 * MB)
    bid = pipeline.submit(type="container", payload_url=f"{content.url}/huge.zip")
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed" and job.last_successful_status == "Provisioning"
    assert job.message.startswith(f"huge.zip unpacks to {40 * MB + 6} bytes: with the archive ")
    assert "more than MQ_DISK_THRESHOLD (50%) allows even with nothing else on it" in job.message
    left = files_under(work / "jobs" / job.jid)
    assert [p.name for p in left] == [HEAD_SIZES]  # not unpacked; the archive removed


# --- the disk threshold: what is available to us ----------------------------------------


def test_the_threshold_counts_blocks_reserved_for_root_as_used(pipeline, content, settings):
    """``used/total`` ignores the blocks only root may write (and quotas); a worker that
    should not run as root cannot use them, so they count as used."""
    work = Path(settings.MQ_WORK_DIR)
    work.mkdir(parents=True, exist_ok=True)
    st = os.statvfs(work)
    free_based = 100 * (st.f_blocks - st.f_bfree) / st.f_blocks
    available_based = 100 * (st.f_blocks - st.f_bavail) / st.f_blocks
    if available_based - free_based < 10:
        pytest.skip("this disk reserves (almost) nothing: both measures agree")
    settings.MQ_DISK_THRESHOLD = int((free_based + available_based) / 2)
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    pipeline.run(bid, until=job_in(pipeline, bid, "Provisioning", *TERMINAL))
    pipeline.step()
    job = only_job(pipeline, bid)
    assert job.status == "Provisioning", job.message
    assert job.message.startswith("waiting for disk space: the working disk would be ")


# --- uploaded payloads -------------------------------------------------------------------


def upload_batch(pipeline, name: str, data: bytes, type_: str) -> tuple[str, Path]:
    """A batch submitted with an uploaded payload; its id and its upload folder."""
    from door.submission import Upload, submit

    upload = Upload(name, io.BytesIO(data), len(data))
    bid = submit({"profile": "demo", "submitter": "tester", "type": type_}, upload).bid
    url = pipeline.store.batches.get_batch(bid).submission["payload_url"]
    folder = Path(url2pathname(urlsplit(url).path)).parent
    assert folder.parent == Path(settings_work_dir()) / "uploads" and folder.is_dir()
    return bid, folder


def settings_work_dir() -> str:
    from django.conf import settings

    return settings.MQ_WORK_DIR


def test_an_upload_is_removed_when_its_batch_completes(pipeline, content):
    data = (content.root / "call911.jpg").read_bytes()
    bid, folder = upload_batch(pipeline, "call911.jpg", data, "file")
    batch = pipeline.run(bid)
    assert batch.status == "Completed", batch.message
    assert not folder.exists()


def test_an_upload_stays_while_a_job_may_be_resumed_and_goes_with_the_deleted_batch(
    pipeline, django_user_model
):
    from steering.actions.catalog import ACTIONS
    from steering.actions.execution import execute

    bid, folder = upload_batch(pipeline, "broken.zip", b"not a zip archive at all", "container")
    batch = pipeline.run(bid)
    assert batch.status == "Failed" and only_job(pipeline, bid).status == "Failed"
    assert folder.is_dir()  # the failed job may be resumed from Downloading: it needs it

    admin = django_user_model.objects.create_superuser("root-admin", password="pw")
    version = pipeline.store.batches.get_batch(bid).status_version
    record = execute(admin, ACTIONS["batch.delete"], [(bid, version)], "gone", token="u1")
    assert record.items.get(part_of="").result == "done"
    assert only_job(pipeline, bid).status == "Deleted"
    assert not folder.exists()


def test_cleanup_removes_uploads_of_purged_batches_and_old_orphans_only(pipeline, monkeypatch):
    from datetime import timedelta
    from types import SimpleNamespace

    from django.core.management import call_command
    from django.utils import timezone

    from steering.management.commands import cleanup

    uploads = Path(settings_work_dir()) / "uploads"

    def folder(name: str) -> Path:
        (uploads / name).mkdir(parents=True)
        (uploads / name / "payload.bin").write_bytes(b"payload")
        return uploads / name

    store = pipeline.store
    purged, referenced = folder("a" * 32), folder("b" * 32)
    orphan_old, orphan_new = folder("c" * 32), folder("d" * 32)
    gone = store.new_batches.create_batch(
        {"type": "file", "payload_url": (purged / "payload.bin").as_uri()}
    )
    store.batch_moves.transition_batch(gone.id, "Held")
    store.batch_moves.transition_batch(gone.id, "Deleted")
    store.new_batches.create_batch(
        {"type": "file", "payload_url": (referenced / "payload.bin").as_uri()}
    )
    later = timezone.now() + timedelta(days=8)
    future = (later + timedelta(days=1)).timestamp()
    os.utime(orphan_new, (future, future))  # newer than the cutoff: maybe being submitted
    monkeypatch.setattr(cleanup, "timezone", SimpleNamespace(now=lambda: later))

    out = io.StringIO()
    call_command("cleanup", "--older-than", "7d", stdout=out)
    text = out.getvalue()
    assert f"upload:{purged.name} (directory): removed upload" in text, text
    assert "(its batch was purged)" in text and "(no batch refers to it)" in text
    assert not purged.exists() and not orphan_old.exists()
    assert referenced.is_dir() and orphan_new.is_dir()


@pytest.mark.parametrize(("depth", "length"), [(0, 1024), (32, 254), (32, 3073), (-1, 100)])
def test_container_path_limits_out_of_range_fail_check_e050(settings, depth, length):
    from merritt_queue.project import checks

    settings.MQ_CONTAINER_MAX_DEPTH, settings.MQ_CONTAINER_MAX_PATH_BYTES = depth, length
    (message,) = checks.check_container_paths()
    assert message.id == "mq.E050"
    assert "MQ_CONTAINER_MAX_DEPTH" in message.msg and "MQ_CONTAINER_MAX_PATH_BYTES" in message.msg


def test_container_path_limits_by_default_pass_check_e050():
    from merritt_queue.project import checks

    assert checks.check_container_paths() == []
