"""Failures end in a documented state with a message a librarian can act on, and resume.

Each test runs the real pipeline (ZooKeeper, Redis, RQ workers in-process, a local HTTP
server), breaks one thing, checks the state and ``job.message`` / ``batch.message`` a
librarian sees, and, where the cause can be fixed, fixes it and resumes the job with
``store.edits.resume_job``; the queue then reports the batch again by itself (Failed ->
UpdateReporting -> Completed).
"""

from __future__ import annotations

import hashlib
import io
import json
import socket
import time
import zipfile

from django.core import mail
from rq import Queue, SimpleWorker

from batches.models import Profile
from inventory.models import InventoryVersion
from merritt_queue.core.dispatcher import Dispatcher, DispatcherConfig
from merritt_queue.core.queues import all_queue_names
from merritt_queue.project.tasks import TASKS
from merritt_queue.services.merrittstorage import MerrittStorageClient
from merritt_queue.services.minter import LocalMinter
from pipeline import batchhandlers as batch_handlers
from pipeline import identify as job_identify
from pipeline import services
from tests.pipeline.test_pipeline_e2e import assert_batch_completed, assert_stored, md5

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

TERMINAL = ("Completed", "Failed", "Deleted")


def closed_port_url() -> str:
    """A loopback URL on which nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def only_job(pipeline, bid):
    (job,) = pipeline.jobs(bid)
    return job


def job_reaches(pipeline, jid, *statuses):
    return lambda batch: pipeline.store.jobs.get_job(jid).status in statuses


def assert_failed_batch(pipeline, bid, job) -> None:
    """The batch reported the failed job: Failed, status report, e-mail with the reason."""
    batch = pipeline.store.batches.get_batch(bid)
    assert batch.status == "Failed"
    assert batch.message.startswith("0 completed, 1 failed, 0 deleted")
    assert batch.status_report["failed_jobs"] == [job.jid]
    assert batch.status_report["successful_jobs"] == []
    (message,) = [m for m in mail.outbox if bid in m.subject]
    assert f"FAILED     {job.jid}  {job.message}" in message.body


def resume_and_report(pipeline, bid, jid):
    """Resume the failed job and run it to its end: the batch is reported again by itself
    (Failed -> UpdateReporting -> Completed, ``store.followups.follow_jobs``); the batch."""
    mail.outbox.clear()
    resumed = pipeline.store.edits.resume_job(jid)
    assert resumed.retry_count == 1
    again = job_reaches(pipeline, jid, "Failed", "Deleted")
    batch = pipeline.run(bid, until=lambda b: b.status == "Completed" or again(b))
    assert batch.status == "Completed", batch.message
    (job,) = assert_batch_completed(pipeline, bid, 1)
    assert job.jid == jid and job.retry_count == 1
    (message,) = mail.outbox
    assert f"Since the last report:\nnow completed  {jid}" in message.body
    return batch


# --- downloads -------------------------------------------------------------------------


def test_a_missing_file_fails_in_downloading_naming_url_and_404_then_resumes(pipeline, content):
    url = f"{content.url}/late.jpg"
    bid = pipeline.submit(type="file", payload_url=url)
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed" and job.last_successful_status == "Provisioning"
    assert job.message == f"1 of 1 downloads failed:\n- {url} returned 404 Not Found"
    assert_failed_batch(pipeline, bid, job)

    (content.root / "late.jpg").write_bytes((content.root / "call911.jpg").read_bytes())
    resume_and_report(pipeline, bid, job.jid)
    assert_stored(pipeline, pipeline.store.jobs.get_job(job.jid), {"late.jpg": md5("call911.jpg")})


def test_a_digest_mismatch_fails_the_job_with_expected_and_actual(pipeline, content):
    url = f"{content.url}/call911.jpg"
    wrong = "0" * 32
    bid = pipeline.submit(type="file", payload_url=url, digest_type="md5", digest_value=wrong)
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed" and job.last_successful_status == "Provisioning"
    assert job.message == (
        f"1 of 1 downloads failed:\n- md5 mismatch for {url}: "
        f"expected {wrong}, got {md5('call911.jpg')}"
    )
    assert_failed_batch(pipeline, bid, job)
    assert not (pipeline.root / "storage").exists() or not any(
        (pipeline.root / "storage").iterdir()
    )


def test_a_file_changed_after_processing_fails_storing_then_resumes_from_processing(
    pipeline, content, settings
):
    """Storing copies the files Processing described without digesting them again, and
    storage checks every byte it copies against that description."""
    settings.MQ_CHAIN_STEPS = 1  # one step per round, to stop before Storing
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    pipeline.run(bid, until=lambda _batch: pipeline.jobs(bid))
    job = only_job(pipeline, bid)
    pipeline.run(bid, until=job_reaches(pipeline, job.jid, "Storing", *TERMINAL))
    payload = pipeline.root / "work" / "jobs" / job.jid / "producer" / "call911.jpg"
    payload.write_bytes(b"changed by hand after Processing")
    pipeline.run(bid)
    job = pipeline.store.jobs.get_job(job.jid)
    assert job.status == "Failed" and job.last_successful_status == "Processing"
    assert job.message.startswith("the files do not match the manifest; nothing was stored:")
    assert "producer/call911.jpg: size mismatch" in job.message
    assert job.message.endswith(
        "resume the job from Processing to describe and store the files as they are now."
    )
    assert_failed_batch(pipeline, bid, job)

    mail.outbox.clear()
    pipeline.store.edits.resume_job(job.jid, to="Processing")
    pipeline.run(bid, until=job_reaches(pipeline, job.jid, *TERMINAL))
    job = pipeline.store.jobs.get_job(job.jid)
    assert job.status == "Completed", job.message
    changed = hashlib.md5(b"changed by hand after Processing").hexdigest()
    assert_stored(pipeline, job, {"call911.jpg": changed})


# --- manifests -------------------------------------------------------------------------


def test_a_bad_batch_manifest_fails_the_batch_listing_every_problem_and_creates_no_job(
    pipeline, content
):
    (content.root / "bad.checkm").write_text(
        "#%checkm_0.7\n"
        "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-single-file-batch-manifest\n"
        "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize"
        " | nfo:fileLastModified | nfo:fileName\n"
        "ftp://example.org/a.jpg | md5 | aa59e145dfb2237ecd8cb5ce4f4953ea |  |  | a.jpg\n"
        f"{content.url}/b.jpg | md5 | nothex |  |  | b.jpg\n"
        f"{content.url}/c.jpg |  |  | many |  | ../c.jpg\n"
        "#%eof\n"
    )
    bid = pipeline.submit(
        type="single-file-batch-manifest", payload_url=f"{content.url}/bad.checkm"
    )
    batch = pipeline.run(bid)
    assert batch.status == "Failed"
    assert batch.message == (
        "no jobs were created: "
        "line 4: URL scheme 'ftp' is not allowed (allowed: http, https)\n"
        "line 5: md5 value 'nothex' is not hexadecimal\n"
        "line 6: nfo:fileSize 'many' is not a whole number of bytes (0 or more)\n"
        "line 6: file name '../c.jpg' contains a '..' segment"
    )
    assert pipeline.store.jobs.list_job_ids() == []
    assert all(not jids for jids in pipeline.store.batches.batch_jobs(bid).values())
    (message,) = [m for m in mail.outbox if bid in m.subject]
    assert message.subject == f"Batch {bid} failed" and message.body == batch.message


def object_manifest(content, rows: list[tuple[str, str]]) -> str:
    lines = "".join(f"{content.url}/{src} |  |  |  |  | {name}\n" for src, name in rows)
    return (
        "#%checkm_0.7\n"
        "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-ingest-manifest\n"
        "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize"
        " | nfo:fileLastModified | nfo:fileName\n" + lines + "#%eof\n"
    )


TWICE = [("call911.jpg", "images/same.jpg"), ("4blocks.jpg", "images/same.jpg")]
DUPLICATE = "line 5: duplicate file name 'images/same.jpg' (first on line 4)"


def test_duplicate_file_names_in_an_object_manifest_refuse_the_submission(pipeline, content):
    (content.root / "twice.checkm").write_text(object_manifest(content, TWICE))
    bid = pipeline.submit(type="object-manifest", payload_url=f"{content.url}/twice.checkm")
    batch = pipeline.run(bid)
    assert batch.status == "Failed"
    assert batch.message == f"no jobs were created: {DUPLICATE}"
    assert pipeline.store.jobs.list_job_ids() == []


def test_duplicate_file_names_in_a_batch_object_manifest_fail_its_job_then_resume(
    pipeline, content
):
    url = f"{content.url}/twice.checkm"
    (content.root / "twice.checkm").write_text(object_manifest(content, TWICE))
    (content.root / "batch.checkm").write_text(
        "#%checkm_0.7\n"
        "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-batch-manifest\n"
        "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize"
        " | nfo:fileLastModified | nfo:fileName | mrt:title\n"
        f"{url} |  |  |  |  | twice.checkm | Twice\n"
        "#%eof\n"
    )
    bid = pipeline.submit(type="batch-manifest", payload_url=f"{content.url}/batch.checkm")
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed" and job.last_successful_status == "Pending"
    assert job.message == f"the object manifest {url} is refused:\n{DUPLICATE}"
    assert_failed_batch(pipeline, bid, job)

    # The depositor renames one file; the resumed job fetches the corrected manifest.
    fixed = [("call911.jpg", "images/same.jpg"), ("4blocks.jpg", "images/other.jpg")]
    (content.root / "twice.checkm").write_text(object_manifest(content, fixed))
    resume_and_report(pipeline, bid, job.jid)
    expected = {"images/same.jpg": md5("call911.jpg"), "images/other.jpg": md5("4blocks.jpg")}
    assert_stored(pipeline, pipeline.store.jobs.get_job(job.jid), expected)


# --- containers ------------------------------------------------------------------------


def test_an_archive_entry_escaping_the_working_dir_fails_and_writes_nothing_outside(
    pipeline, content, tmp_path
):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("ok.txt", "harmless\n")
        z.writestr("../../escaped.txt", "I should never be written\n")
    (content.root / "evil.zip").write_bytes(buf.getvalue())
    bid = pipeline.submit(type="container", payload_url=f"{content.url}/evil.zip")
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed" and job.last_successful_status == "Provisioning"
    assert job.message == "evil.zip: entry '../../escaped.txt' would escape the working directory"
    written = [p for p in tmp_path.rglob("*") if p.name in ("escaped.txt", "ok.txt")]
    assert written == []
    assert_failed_batch(pipeline, bid, job)


# --- provisioning ----------------------------------------------------------------------


def wait_in_provisioning(pipeline, bid, rounds: int = 5) -> str:
    """Several dispatcher/worker rounds in which the job must stay in Provisioning; its id."""
    pipeline.run(bid, until=lambda b: any(j.status == "Provisioning" for j in pipeline.jobs(bid)))
    jid = only_job(pipeline, bid).jid
    runs = 0
    for _ in range(rounds):
        runs += pipeline.step()
        job = pipeline.store.jobs.get_job(jid)
        assert job.status == "Provisioning" and not job.locked
        # MQ_PROVISION_RETRY_SECONDS (0.2 s here) lets the dispatcher enqueue it again.
        time.sleep(0.25)
    assert runs >= rounds - 1, f"the step ran only {runs} times in {rounds} rounds"
    return jid


def test_a_job_short_of_disk_space_waits_in_provisioning_then_proceeds(pipeline, content, settings):
    settings.MQ_DISK_THRESHOLD = 1
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    wait_in_provisioning(pipeline, bid)
    assert pipeline.store.batches.get_batch(bid).status == "Processing"
    settings.MQ_DISK_THRESHOLD = 99
    batch = pipeline.run(bid)
    assert batch.status == "Completed", batch.message
    (job,) = assert_batch_completed(pipeline, bid, 1)
    assert_stored(pipeline, job, ["call911.jpg"])


def test_a_job_waiting_for_disk_space_tells_the_librarian_why(pipeline, content, settings):
    settings.MQ_DISK_THRESHOLD = 1
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    jid = wait_in_provisioning(pipeline, bid, rounds=2)
    message = pipeline.store.jobs.get_job(jid).message
    assert message.startswith("waiting for disk space: the working disk would be "), message
    assert message.endswith("(threshold 1%)"), message


# --- minting ---------------------------------------------------------------------------


def first_local_ark(tmp_path) -> str:
    """The ARK a fresh local minter hands out first (the one a single mint gives)."""
    return LocalMinter(tmp_path / "fresh-minter").mint("ark:/99999/fk4")


def test_ezid_down_fails_processing_naming_ezid_then_resumes_minting_one_ark(
    pipeline, content, settings, tmp_path
):
    ezid = closed_port_url()
    settings.MQ_MINTER, settings.EZID_URL = "ezid", ezid
    services.reset()
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed" and job.last_successful_status == "Downloading"
    assert job.message == f"EZID at {ezid} could not be reached: connection refused"
    assert job.identifiers is None
    assert_failed_batch(pipeline, bid, job)

    settings.MQ_MINTER = "local"
    services.reset()
    resume_and_report(pipeline, bid, job.jid)
    job = pipeline.store.jobs.get_job(job.jid)
    assert job.identifiers == {"primary_id": first_local_ark(tmp_path), "local_id": []}
    assert (pipeline.root / "minter" / "99999-fk4.counter").read_text().strip() == "1"
    assert_stored(pipeline, job, ["call911.jpg"])


def test_a_minted_ark_is_kept_when_processing_fails_after_minting(
    pipeline, content, settings, ezid_server, monkeypatch
):
    settings.MQ_MINTER, settings.EZID_URL = "ezid", ezid_server.url
    settings.EZID_USER, settings.EZID_PASSWORD = ezid_server.username, ezid_server.password
    services.reset()
    real = job_identify._write_object_files

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(job_identify, "_write_object_files", broken)
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg", erc_what="Bell")
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed" and job.last_successful_status == "Downloading"
    assert (
        job.message == "internal error in Processing: OSError: [Errno 28] No space left on device"
    )
    ((ark, sent),) = ezid_server.minted
    assert sent["erc"] == "what: Bell\n"
    assert job.identifiers == {"primary_id": ark, "local_id": []}

    monkeypatch.setattr(job_identify, "_write_object_files", real)
    resume_and_report(pipeline, bid, job.jid)
    assert len(ezid_server.minted) == 1, "the resumed step minted a second ARK"
    job = pipeline.store.jobs.get_job(job.jid)
    assert job.identifiers["primary_id"] == ark
    assert_stored(pipeline, job, ["call911.jpg"])


# --- storage ---------------------------------------------------------------------------


def test_storage_down_fails_storing_then_resumes_into_exactly_one_version(
    pipeline, content, settings, merritt_storage_server
):
    # Merritt storage pulls the files itself: the working directory is served over HTTP.
    settings.MQ_WORK_DIR = str(content.root / "work")
    settings.MQ_STORAGE, settings.MERRITT_STORAGE_NODE = "merritt", merritt_storage_server.node
    settings.MERRITT_STORAGE_URL = closed_port_url()
    settings.MERRITT_STORAGE_FILE_URL = f"{content.url}/work/"
    services.reset()
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    ark = job.identifiers["primary_id"]
    assert job.status == "Failed" and job.last_successful_status == "Processing"
    assert job.message == (
        f"storage at {settings.MERRITT_STORAGE_URL} could not be reached for {ark}: "
        "connection refused"
    )
    assert [p for p, _ in pipeline.store.locks.nodes()] == [], "the storage lock was left behind"
    assert_failed_batch(pipeline, bid, job)

    settings.MERRITT_STORAGE_URL = merritt_storage_server.url
    services.reset()
    resume_and_report(pipeline, bid, job.jid)
    job = pipeline.store.jobs.get_job(job.jid)
    assert job.identifiers["primary_id"] == ark and job.store["version"] == 1
    client = MerrittStorageClient(merritt_storage_server.url, merritt_storage_server.node)
    assert client.versions(ark) == [1]
    assert len(merritt_storage_server.objects[ark]) == 1
    names = set(merritt_storage_server.names(ark, 1))
    assert {"producer/call911.jpg", "system/mrt-erc.txt"} <= names
    assert not any(n.startswith(("producer/producer/", "producer/system/")) for n in names)
    version = client.get_version(ark, 1)
    assert version.token == job.jid
    assert InventoryVersion.objects.filter(obj__ark=ark).count() == 1
    assert [p for p, _ in pipeline.store.locks.nodes()] == []


# --- callback --------------------------------------------------------------------------


def test_a_failing_callback_fails_notify_with_its_status_then_resumes_and_calls_back(
    pipeline, content
):
    url = content.behave("/callback", status=500)
    pipeline.profile.callback_url = url
    pipeline.profile.save()
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed" and job.last_successful_status == "Recording"
    failure = f"callback {url} failed after 2 attempts: 500 Internal Server Error"
    assert job.message == failure
    batch = pipeline.store.batches.get_batch(bid)
    assert batch.message == f"0 completed, 1 failed, 0 deleted; {failure}"
    assert_failed_batch(pipeline, bid, job)

    content.behave("/callback", body=b"thanks\n")
    before = len(content.requests_for("/callback", "POST"))
    resume_and_report(pipeline, bid, job.jid)
    job = pipeline.store.jobs.get_job(job.jid)
    received = content.requests_for("/callback", "POST")[before:]
    job_calls = [json.loads(r.body) for r in received if b'"job_id"' in r.body]
    batch_calls = [json.loads(r.body) for r in received if b'"completed_jobs"' in r.body]
    assert job_calls == [
        {
            "job_id": job.jid,
            "batch_id": bid,
            "batchID": None,
            "status": "Completed",
            "ark": job.identifiers["primary_id"],
            "local_id": [],
            "version": 1,
            "outcome": "stored",
            "title": None,
        }
    ]
    assert batch_calls == [
        {
            "batch_id": bid,
            "batchID": None,
            "completed_jobs": [job.jid],
            "failed_jobs": [],
            "deleted_jobs": [],
        }
    ]
    # Every delivery of this job's notification carries the same key, so repeats are dropped.
    keys = {
        r.headers["idempotency-key"]
        for r in content.requests_for("/callback")
        if b'"job_id"' in r.body
    }
    assert keys == {f"{job.jid}:notify"}
    # A batch report's key names the batch, its reporting state and that state's version.
    batch_keys = [r.headers["idempotency-key"] for r in received if b'"completed_jobs"' in r.body]
    assert len(batch_keys) == 1 and batch_keys[0].startswith(f"{bid}:UpdateReporting:")
    assert_stored(pipeline, job, ["call911.jpg"])


# --- reporting -------------------------------------------------------------------------


def test_a_report_email_that_cannot_be_sent_fails_the_batch_saying_so_then_reports_again(
    pipeline, content, settings
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", int(closed_port_url().rsplit(":")[-1])
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    batch = pipeline.run(bid, timeout=20)
    assert batch.status == "Failed" and not batch.locked
    assert batch.message == (
        "1 completed, 0 failed, 0 deleted; the e-mail to depositor@example.org could not be "
        "sent: ConnectionRefusedError: [Errno 111] Connection refused"
    )
    assert only_job(pipeline, bid).status == "Completed"

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    pipeline.store.batch_moves.update_reporting(bid)
    assert pipeline.run(bid).status == "Completed"
    assert_batch_completed(pipeline, bid, 1)


def test_an_unexpected_error_while_reporting_leaves_the_batch_unlocked_and_is_retried(
    pipeline, content, monkeypatch
):
    real, calls = batch_handlers.report, []

    def flaky(s, batch):
        calls.append(batch.bid)
        if len(calls) == 1:
            raise RuntimeError("the database went away")
        return real(s, batch)

    monkeypatch.setattr(batch_handlers, "report", flaky)
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    pipeline.run(bid, until=lambda b: len(calls) == 1)
    batch = pipeline.store.batches.get_batch(bid)
    assert batch.status == "Reporting" and not batch.locked
    assert pipeline.run(bid, timeout=20).status == "Completed"
    assert calls == [bid, bid]
    assert_batch_completed(pipeline, bid, 1)


# --- holds and priority ----------------------------------------------------------------


def test_a_batch_of_a_held_collection_waits_held_and_completes_once_released(pipeline, content):
    store = pipeline.store
    assert store.holds.hold_collection("demo")
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    batch = pipeline.run(bid, until=lambda b: b.status == "Held")
    assert batch.message == "collection demo is on hold"
    for _ in range(3):
        pipeline.step()
    assert store.batches.get_batch(bid).status == "Held"
    assert store.jobs.list_job_ids() == []

    assert store.holds.release_collection("demo")
    assert store.held.release_collection_items("demo").released == [bid]
    pipeline.run(bid)
    (job,) = assert_batch_completed(pipeline, bid, 1)
    assert_stored(pipeline, job, ["call911.jpg"])


def test_holding_a_collection_mid_batch_holds_its_pending_jobs_until_released(
    pipeline, content, settings
):
    # The test steps in between the jobs' creation and their first step, which a worker's
    # hand-over would otherwise enqueue in the same burst.
    settings.MQ_HANDOVER = False
    store = pipeline.store
    bid = pipeline.submit(
        type="single-file-batch-manifest", payload_url=f"{content.url}/sampleBatchOfFiles.checkm"
    )
    pipeline.run(bid, until=lambda b: b.status == "Processing")
    jobs = pipeline.jobs(bid)
    assert [j.status for j in jobs] == ["Pending"] * 3
    assert store.holds.hold_collection("demo")
    for _ in range(3):
        pipeline.step()
    for job in pipeline.jobs(bid):
        assert job.status == "Held" and job.message == "collection demo is on hold"
        assert job.last_successful_status == "Pending"
    assert store.batches.get_batch(bid).status == "Processing"

    assert store.holds.release_collection("demo")
    assert sorted(store.held.release_collection_items("demo").released) == sorted(
        j.jid for j in jobs
    )
    pipeline.run(bid)
    for job in assert_batch_completed(pipeline, bid, 3):
        assert_stored(pipeline, job, [job.configuration["filename"]])


def test_jobs_of_a_higher_priority_profile_leave_pending_first(pipeline, content):
    store, redis = pipeline.store, pipeline.redis
    Profile.objects.create(
        name="urgent",
        collection="urgent",
        minter_shoulder="ark:/99999/fk4",
        default_priority=1,
        notification_emails="depositor@example.org",
    )
    # The low-priority batch is submitted first, so its jobs have the lower (older) ids.
    low = pipeline.submit(
        type="single-file-batch-manifest", payload_url=f"{content.url}/sampleBatchOfFiles.checkm"
    )
    high = pipeline.submit(profile="urgent", type="file", payload_url=f"{content.url}/call911.jpg")
    for bid in (low, high):
        assert batch_handlers.run_pending(services.get_services(), bid) == "processing"
    low_jids = sorted(j.jid for j in pipeline.jobs(low))
    (high_jid,) = [j.jid for j in pipeline.jobs(high)]
    assert store.jobs.jobs_in_state("Pending") == [(1, high_jid), *((5, j) for j in low_jids)]

    # One job per state per round (ahead=1), so the order of leaving Pending is observable.
    queues = [Queue(n, connection=redis) for n in all_queue_names()]
    left: list[str] = []
    for _ in range(10):
        Dispatcher(store, redis, TASKS, DispatcherConfig(ahead=1)).sweep()
        SimpleWorker(queues, connection=redis).work(burst=True, logging_level="WARNING")
        now = [jid for _, jid in store.jobs.jobs_in_state("Pending")]
        gone = [j for j in [high_jid, *low_jids] if j not in now and j not in left]
        assert len(gone) <= 1
        left += gone
        if len(left) == 4:
            break
    assert left == [high_jid, *low_jids]
    for bid, count in ((high, 1), (low, 3)):
        pipeline.run(bid)
        assert_batch_completed(pipeline, bid, count)


def test_creating_a_batch_s_jobs_again_after_a_crash_adds_only_the_missing_rows(pipeline, content):
    bid = pipeline.submit(
        type="single-file-batch-manifest", payload_url=f"{content.url}/sampleBatchOfFiles.checkm"
    )
    batch = pipeline.store.batch_locks.begin_batch(bid)
    s = services.get_services()
    batch_handlers.create_jobs(s, batch)
    first = sorted(job.jid for job in pipeline.jobs(bid))
    # A worker that died after creating the jobs leaves the batch Pending: the re-run's.
    batch_handlers.create_jobs(s, batch)
    jobs = pipeline.jobs(bid)
    assert sorted(job.jid for job in jobs) == first and len(first) == 3
    assert sorted(job.configuration["batch_row"] for job in jobs) == [0, 1, 2]
