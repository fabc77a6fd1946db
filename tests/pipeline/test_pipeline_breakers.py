"""A dependency that is down holds only the steps that need it (issue 34, part 4).

The real pipeline (ZooKeeper, Redis, RQ workers in the test process) against real HTTP
stand-ins that fail until the test lets them recover: the breaker opens, the jobs that need
the dependency wait in their state (never Failed), the others go on, and once the stand-in
answers again a probe closes the breaker and the waiting jobs complete by themselves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from batches.models import Profile
from harness.httpserver import HttpServer
from merritt_queue.core.queues import is_deferred, rq_job_id
from merritt_queue.project.breakerboard import breakers, snapshot
from pipeline import services

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

MINT_PATH = "/shoulder/ark:/99999/fk4"


@pytest.fixture
def quick_breakers(settings):
    settings.MQ_BREAKER_THRESHOLD = 1
    settings.MQ_BREAKER_COOL_OFF_SECONDS = 0.5


def statuses(pipeline, bids):
    return [j.status for bid in bids for j in pipeline.jobs(bid)]


def run_all(pipeline, bids, until, timeout=60):
    """Run the queue until ``until()`` holds (every batch shares the one dispatcher)."""
    pipeline.run(bids[0], timeout=timeout, until=lambda _b: until())


def test_ezid_down_holds_jobs_in_processing_then_a_probe_lets_them_all_complete(
    pipeline, content, ezid_server, settings, quick_breakers
):
    settings.MQ_MINTER, settings.EZID_URL = "ezid", ezid_server.url
    settings.EZID_USER, settings.EZID_PASSWORD = ezid_server.username, ezid_server.password
    services.reset()
    content.behave(MINT_PATH, status=503)
    bids = [
        pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg") for _ in range(3)
    ]

    def all_waiting():
        jobs = [j for bid in bids for j in pipeline.jobs(bid)]
        return len(jobs) == 3 and all(
            j.status == "Processing" and "EZID unreachable since" in j.message for j in jobs
        )

    run_all(pipeline, bids, all_waiting)
    assert "Failed" not in statuses(pipeline, bids)
    (ezid,) = [s for s in snapshot() if s.name == "ezid"]
    assert ezid.is_open and ezid.next_probe and "503" in ezid.last_error
    (job, *_) = pipeline.jobs(bids[0])
    assert "next probe" in job.message and job.retry_count == 0, "waiting burnt a retry"
    assert len(content.requests_for(MINT_PATH)) <= 2, "EZID was called while its breaker was open"

    content.behave(MINT_PATH, handler=ezid_server._handle)  # EZID answers again
    run_all(pipeline, bids, lambda: statuses(pipeline, bids) == ["Completed"] * 3)
    assert not breakers().read("ezid").is_open
    assert len(ezid_server.minted) == 3
    for bid in bids:
        assert pipeline.store.batches.get_batch(bid).status == "Completed"


@pytest.fixture
def other_host(tmp_path: Path):
    root = tmp_path / "other"
    root.mkdir()
    server = HttpServer(root).start()
    yield server
    server.stop()


def test_one_callback_host_down_holds_only_its_jobs_in_notify(
    pipeline, content, other_host, quick_breakers
):
    down = content.behave("/callback", status=503)
    pipeline.profile.callback_url = down
    pipeline.profile.save()
    fine = Profile.objects.create(
        name="other",
        collection="other",
        minter_shoulder="ark:/99999/fk4",
        owner_ark=pipeline.profile.owner_ark,
        notification_emails="depositor@example.org",
        callback_url=other_host.behave("/hook", body=b"thanks\n"),
    )
    held = [
        pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg") for _ in range(2)
    ]
    going = pipeline.submit(
        type="file", payload_url=f"{content.url}/call911.jpg", profile=fine.name
    )

    def settled():
        return statuses(pipeline, [going]) == ["Completed"] and all(
            j.status == "Notify" and "webhook host" in j.message
            for bid in held
            for j in pipeline.jobs(bid)
        )

    run_all(pipeline, [going, *held], settled)
    name = f"webhook:{content.url.split('://')[1]}"
    assert breakers().read(name).is_open
    assert not breakers().read(f"webhook:{other_host.url.split('://')[1]}").is_open

    content.behave("/callback", body=b"thanks\n")
    run_all(pipeline, held, lambda: statuses(pipeline, held) == ["Completed"] * 2)
    assert not breakers().read(name).is_open


def test_a_404_from_a_callback_host_fails_its_job_and_never_opens_a_breaker(
    pipeline, content, quick_breakers
):
    pipeline.profile.callback_url = content.behave("/callback", status=404)
    pipeline.profile.save()
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert job.status == "Failed" and "404" in job.message
    assert not any(s.is_open for s in snapshot())


def test_a_content_host_down_holds_only_the_jobs_fetching_from_it(
    pipeline, content, other_host, quick_breakers
):
    (other_host.root / "other.jpg").write_bytes((content.root / "call911.jpg").read_bytes())
    content.behave("/call911.jpg", status=503)
    held = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    going = pipeline.submit(type="file", payload_url=f"{other_host.url}/other.jpg")
    host = content.url.split("://")[1]

    def settled():
        jobs = pipeline.jobs(held)
        return statuses(pipeline, [going]) == ["Completed"] and any(
            j.status == "Downloading" and f"content host {host} unreachable" in j.message
            for j in jobs
        )

    run_all(pipeline, [going, held], settled)
    assert breakers().read(f"content:{host}").is_open

    content.behave("/call911.jpg")  # the host serves the file again
    run_all(pipeline, [held], lambda: statuses(pipeline, [held]) == ["Completed"])
    assert not breakers().read(f"content:{host}").is_open


def test_a_404_or_a_digest_mismatch_from_a_depositors_host_never_opens_its_breaker(
    pipeline, content, quick_breakers
):
    missing = pipeline.submit(type="file", payload_url=f"{content.url}/no-such-file.jpg")
    wrong = pipeline.submit(
        type="file",
        payload_url=f"{content.url}/call911.jpg",
        digest_type="md5",
        digest_value="0" * 32,
    )
    pipeline.run(missing)
    pipeline.run(wrong)
    (gone,) = pipeline.jobs(missing)
    (bad,) = pipeline.jobs(wrong)
    assert gone.status == "Failed" and "404" in gone.message
    assert bad.status == "Failed" and "mismatch" in bad.message
    assert not any(s.is_open for s in snapshot())
    assert breakers().read(f"content:{content.url.split('://')[1]}").failures == 0


def test_opened_by_hand_the_jobs_wait_unenqueued_until_it_is_closed_by_hand(
    pipeline, content, ezid_server, settings
):
    settings.MQ_MINTER, settings.EZID_URL = "ezid", ezid_server.url
    settings.EZID_USER, settings.EZID_PASSWORD = ezid_server.username, ezid_server.password
    services.reset()
    breakers().open_by_hand("ezid", "ada", "EZID's weekly maintenance")
    bids = [
        pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg") for _ in range(2)
    ]

    def all_waiting():
        jobs = [j for bid in bids for j in pipeline.jobs(bid)]
        return len(jobs) == 2 and all(j.status == "Processing" and j.message for j in jobs)

    run_all(pipeline, bids, all_waiting)
    jobs = [j for bid in bids for j in pipeline.jobs(bid)]
    assert all("EZID closed off by hand" in j.message for j in jobs)
    assert all("weekly maintenance" in j.message for j in jobs)
    for job in jobs:  # the sweep leaves them alone: no RQ job until the wait is over
        assert is_deferred(pipeline.redis, rq_job_id("job", job.jid, "Processing"))
    for _ in range(3):
        assert pipeline.step() == 0, "a sweep enqueued a job waiting for an open breaker"
    assert ezid_server.server.requests_for(MINT_PATH) == []

    breakers().close_by_hand("ezid", "ada", "maintenance over")
    for job in jobs:  # what the deferral would end by itself a little later
        pipeline.redis.delete(f"mq:later:{rq_job_id('job', job.jid, 'Processing')}")
    run_all(pipeline, bids, lambda: statuses(pipeline, bids) == ["Completed"] * 2)
    assert len(ezid_server.minted) == 2


def closed_port_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_merritt_storage_down_holds_jobs_in_storing_parked_then_they_store_once(
    pipeline, content, settings, merritt_storage_server, quick_breakers
):
    settings.MQ_WORK_DIR = str(content.root / "work")
    settings.MQ_STORAGE, settings.MERRITT_STORAGE_NODE = "merritt", merritt_storage_server.node
    settings.MERRITT_STORAGE_URL = closed_port_url()
    settings.MERRITT_STORAGE_FILE_URL = f"{content.url}/work/"
    services.reset()
    bids = [
        pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg") for _ in range(2)
    ]

    def all_waiting():
        jobs = [j for bid in bids for j in pipeline.jobs(bid)]
        return len(jobs) == 2 and all(
            j.status == "Storing" and "storage unreachable since" in j.message for j in jobs
        )

    run_all(pipeline, bids, all_waiting)
    assert breakers().read("storage").is_open
    store = pipeline.store
    for bid in bids:
        (job,) = pipeline.jobs(bid)
        assert job.retry_count == 0
        data, _ = store.client.get(f"/jobs/{job.jid}/lock")
        assert data == b"merritt-queue:parked", "a waiting job was left for Merritt's consumers"
    assert [p for p, _ in store.locks.nodes()] == [], "a storage lock was left behind"

    settings.MERRITT_STORAGE_URL = merritt_storage_server.url  # storage is back
    services.reset()
    run_all(pipeline, bids, lambda: statuses(pipeline, bids) == ["Completed"] * 2)
    assert not breakers().read("storage").is_open
    for bid in bids:
        (job,) = pipeline.jobs(bid)
        assert len(merritt_storage_server.objects[job.identifiers["primary_id"]]) == 1
