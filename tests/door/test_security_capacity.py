"""Issue 11: the queue's capacity, poison-pill fields and outages.

One depositor must not be able to fill ZooKeeper's heap (batch, collection and tree limits,
at the door and again in the batch handler), write a job ZooKeeper cannot take (field and
job-size caps; such a batch fails once instead of being retried for ever), starve other
collections' batches, or make submissions hang while ZooKeeper is away.

Real ZooKeeper (``make test``'s, or one of the test's own that it stops), real Redis, a real
HTTP server on 127.0.0.1 and the real dispatcher and RQ workers.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.management import CommandError, call_command
from kazoo.exceptions import ConnectionLoss
from rq import Queue, SimpleWorker

from batches.models import ApiToken, Batch, Profile
from bench.common import CAPACITY_DEFAULTS
from door.rights import grant_depositor
from door.submission import submit
from harness.procs import wait_for
from harness.services import free_port
from jobs.models import Job
from merritt_queue.core.dispatcher import Dispatcher, DispatcherConfig
from merritt_queue.core.errors import InvalidData
from merritt_queue.core.fairness import Turns
from merritt_queue.core.planning import batch_priority
from merritt_queue.core.queues import all_queue_names
from merritt_queue.core.states import BatchStatus
from merritt_queue.core.store import NewJob
from merritt_queue.core.store.newjobs import MAX_JOB_DATA_BYTES
from merritt_queue.deposit.manifest import ManifestError, parse_manifest
from merritt_queue.project import checks, runtime
from merritt_queue.project.tasks import TASKS
from pipeline import batchhandlers as batch_handlers
from pipeline import services
from tests.roles import viewer

pytest_plugins = ["tests.httpserver", "tests.pipelinerun", "tests.cluster"]

API = "/api/v1/batches"
HEAD = (
    "#%checkm_0.7\n"
    "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-single-file-batch-manifest\n"
    "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | "
    "nfo:fileName | mrt:title\n"
)


def files_manifest(base: str, n: int, title: str = "t") -> bytes:
    rows = "".join(f"{base}/f{i}.txt | | | | f{i}.txt | {title}\n" for i in range(n))
    return (HEAD + rows + "#%eof\n").encode()


@pytest.fixture
def queue(process_store, settings):
    settings.MQ_ALLOW_LOOPBACK = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    services.reset()
    Profile.objects.create(
        name="demo",
        collection="demo",
        minter_shoulder="ark:/99999/fk4",
        notification_emails="depositor@example.org",
    )
    Profile.objects.create(name="other", collection="other", minter_shoulder="ark:/99999/fk4")
    yield process_store
    services.reset()


@pytest.fixture
def token(db):
    user = get_user_model().objects.create_user("depositor", password="pw")
    grant_depositor(user, ["demo", "other"])
    return ApiToken.issue(user, "tests")[1]


def post_json(client, token, body):
    return client.post(
        API, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def post_upload(client, token, fields, name, data):
    upload = io.BytesIO(data)
    upload.name = name
    return client.post(API, fields | {"file": upload}, HTTP_AUTHORIZATION=f"Bearer {token}")


def fill(store, n: int, profile: str = "demo") -> str:
    """A batch of ``profile`` with ``n`` jobs, written through the store (mirror included)."""
    bid = submit(
        {
            "profile": profile,
            "submitter": "t",
            "type": "file",
            "payload_url": "https://example.org/a",
        }
    ).bid
    batch = store.batch_locks.begin_batch(bid)
    store.new_jobs.create_jobs(
        bid, [NewJob({"collection": profile, "batch_row": i}) for i in range(n)]
    )
    store.batch_moves.start_processing(batch, "filled")
    return bid


def submit_manifest(http_server) -> str:
    """A batch of the files listed in the server's ``m.checkm``, submitted by URL."""
    data = {
        "profile": "demo",
        "submitter": "t",
        "type": "single-file-batch-manifest",
        "payload_url": http_server.url_for("/m.checkm"),
    }
    return submit(data).bid


def run_pending(bid: str) -> str:
    return batch_handlers.run_pending(services.get_services(), bid)


# --- limits at the door ----------------------------------------------------------------


def test_an_uploaded_manifest_over_the_row_limit_is_refused_with_413(
    client, queue, token, settings
):
    settings.MQ_MAX_BATCH_JOBS = 5
    fields = {"profile": "demo", "type": "single-file-batch-manifest"}
    response = post_upload(
        client, token, fields, "m.checkm", files_manifest("https://example.org", 6)
    )
    assert response.status_code == 413
    assert response.json()["errors"] == [
        "the batch has 6 rows (jobs); a batch may have at most 5 (MQ_MAX_BATCH_JOBS): "
        "split it into smaller batches"
    ]
    assert queue.batches.list_batch_ids() == [] and Batch.objects.count() == 0
    ok = post_upload(client, token, fields, "m.checkm", files_manifest("https://example.org", 5))
    assert ok.status_code == 201


def test_a_full_tree_refuses_submissions_with_429_until_cleanup(client, queue, token, settings):
    settings.MQ_MAX_QUEUE_JOBS = 3
    filled = fill(queue, 3, profile="other")
    body = {"profile": "demo", "type": "file", "payload_url": "https://example.org/x"}
    response = post_json(client, token, body)
    assert response.status_code == 429
    assert response.json()["errors"] == [
        "the queue holds 3 jobs and this batch would add 1; it may hold at most 3 "
        "(MQ_MAX_QUEUE_JOBS) until finished jobs are cleaned up: submit again later"
    ]
    assert queue.batches.list_batch_ids() == [filled]
    for jid in queue.jobs.list_job_ids():  # what `cleanup` does to finished jobs
        queue.moves.force_fail(jid, "given up")
        queue.moves.delete_job(jid)
        queue.removal.purge_job(jid)
    assert post_json(client, token, body).status_code == 201


def test_a_collection_over_its_share_is_refused_with_429_and_others_are_not(
    client, queue, token, settings
):
    settings.MQ_MAX_COLLECTION_JOBS = 2
    fill(queue, 2)
    assert Job.objects.filter(collection="demo").count() == 2
    body = {"profile": "demo", "type": "file", "payload_url": "https://example.org/x"}
    response = post_json(client, token, body)
    assert response.status_code == 429
    assert response.json()["errors"] == [
        "collection demo has 2 jobs in the queue and this batch would add 1; a collection "
        "may have at most 2 (MQ_MAX_COLLECTION_JOBS) until finished jobs are cleaned up: "
        "submit again later"
    ]
    assert post_json(client, token, body | {"profile": "other"}).status_code == 201


def test_the_form_and_the_cli_name_the_limit_too(client, queue, settings, tmp_path):
    settings.MQ_MAX_BATCH_JOBS = 2
    manifest = tmp_path / "m.checkm"
    manifest.write_bytes(files_manifest("https://example.org", 3))
    with pytest.raises(CommandError, match=r"at most 2 \(MQ_MAX_BATCH_JOBS\)"):
        call_command(
            "submit",
            "--profile=demo",
            "--submitter=t",
            "--type=single-file-batch-manifest",
            f"--file={manifest}",
        )
    grant_depositor(get_user_model().objects.create_user("librarian", password="pw"), ["demo"])
    client.login(username="librarian", password="pw")
    upload = io.BytesIO(manifest.read_bytes())
    upload.name = "m.checkm"
    page = client.post(
        "/submit/",
        {
            "profile": "demo",
            "type": "single-file-batch-manifest",
            "submission_mode": "add",
            "file": upload,
        },
    )
    assert "a batch may have at most 2 (MQ_MAX_BATCH_JOBS)" in page.content.decode()
    assert queue.batches.list_batch_ids() == []


# --- limits in the batch handler (manifest by URL) ----------------------------------------


def test_a_url_manifest_over_the_row_limit_fails_its_batch_before_any_job(
    queue, http_server, settings
):
    settings.MQ_MAX_BATCH_JOBS = 4
    (http_server.root / "m.checkm").write_bytes(files_manifest(http_server.url, 5))
    bid = submit_manifest(http_server)
    assert run_pending(bid) == "failed"
    batch = queue.batches.get_batch(bid)
    assert batch.status == BatchStatus.FAILED
    assert batch.message == (
        "no jobs were created: the batch has 5 rows (jobs); a batch may have at most 4 "
        "(MQ_MAX_BATCH_JOBS): split it into smaller batches"
    )
    assert queue.jobs.list_job_ids() == []
    assert mail.outbox[-1].body == batch.message


def test_the_handler_rechecks_the_tree_with_the_exact_row_count(queue, http_server, settings):
    settings.MQ_MAX_QUEUE_JOBS = 6
    (http_server.root / "m.checkm").write_bytes(files_manifest(http_server.url, 4))
    bid = submit_manifest(http_server)  # accepted: the row count is not known at the door
    fill(queue, 3, profile="other")
    assert run_pending(bid) == "failed"
    assert queue.batches.get_batch(bid).message == (
        "no jobs were created: the queue holds 3 jobs and this batch would add 4; it may hold "
        "at most 6 (MQ_MAX_QUEUE_JOBS) until finished jobs are cleaned up: submit again later"
    )
    assert len(queue.jobs.list_job_ids()) == 3


# --- poison-pill fields ------------------------------------------------------------------


def test_zookeeper_drops_the_connection_of_a_request_over_its_limit(zk):
    """What the caps below keep away: not an error answer, a dropped connection."""
    with pytest.raises(ConnectionLoss):
        zk.create("/too-big", b"x" * (1100 * 1024))
    wait_for("the client to reconnect", lambda: zk.connected)
    assert zk.exists("/too-big") is None


def test_a_manifest_field_over_its_limit_is_refused_naming_line_and_field():
    data = files_manifest("https://example.org", 3).decode()
    data = data.replace("f1.txt | t", "f1.txt | " + "x" * 600_000)
    data = data.replace("https://example.org/f2.txt", "https://example.org/" + "a" * 2100)
    with pytest.raises(ManifestError) as caught:
        parse_manifest(data)
    assert caught.value.problems == [
        "line 5: mrt:title is longer than 10000 characters",
        "line 6: nfo:fileUrl is longer than 2048 characters",
    ]


def test_a_batch_with_a_600_kb_field_fails_once_and_writes_no_job(queue, http_server, settings):
    data = files_manifest(http_server.url, 2, title="x" * 600_000)
    (http_server.root / "m.checkm").write_bytes(data)
    bid = submit_manifest(http_server)
    assert run_pending(bid) == "failed"
    batch = queue.batches.get_batch(bid)
    assert batch.status == BatchStatus.FAILED and not batch.locked
    assert batch.message == (
        "no jobs were created: line 4: mrt:title is longer than 10000 characters\n"
        "line 5: mrt:title is longer than 10000 characters"
    )
    assert queue.jobs.list_job_ids() == []
    assert queue.batches.pending_batches() == []  # never tried again


def test_the_store_refuses_a_job_over_the_data_limit_before_writing(queue):
    bid = fill(queue, 0)
    big = NewJob({"collection": "demo", "manifest_line": 7, "title": "x" * MAX_JOB_DATA_BYTES})
    small = NewJob({"collection": "demo"})
    with pytest.raises(InvalidData) as caught:
        queue.new_jobs.create_jobs(bid, [small, big])
    message = str(caught.value)
    assert message.startswith("the job of manifest line 7 would hold ")
    assert message.endswith(
        f"over the limit of {MAX_JOB_DATA_BYTES} bytes per job; shorten its fields"
    )
    assert queue.jobs.list_job_ids() == []
    assert queue.client.connected


def test_many_jobs_at_the_data_limit_never_make_one_request_too_large(queue):
    """More than a round of jobs, each near the limit: megabytes in all, in many multis."""
    bid = fill(queue, 0)
    near = "x" * (MAX_JOB_DATA_BYTES - 1024)
    jids = queue.new_jobs.create_jobs(
        bid, [NewJob({"title": near, "batch_row": i}) for i in range(210)]
    )
    assert len(jids) == 210 and queue.client.connected
    assert queue.jobs.get_job(jids[-1]).configuration["title"] == near


def test_a_batch_whose_jobs_cannot_be_written_fails_once_with_the_reason(
    queue, http_server, settings, monkeypatch
):
    """Defence in depth: a job that passes the manifest's field caps but not the store's."""
    monkeypatch.setattr("merritt_queue.core.store.newjobs.MAX_JOB_DATA_BYTES", 1000)
    (http_server.root / "m.checkm").write_bytes(
        files_manifest(http_server.url, 2, title="y" * 2000)
    )
    bid = submit_manifest(http_server)
    assert run_pending(bid) == "failed"
    message = queue.batches.get_batch(bid).message
    assert message.startswith("no jobs were created: the job of manifest line 4 would hold ")
    assert message.endswith("over the limit of 1000 bytes per job; shorten its fields")
    assert queue.jobs.list_job_ids() == [] and queue.batches.pending_batches() == []


# --- /healthz and the dashboard ----------------------------------------------------------


def test_healthz_reports_zookeeper_redis_and_the_trees_capacity(
    client, queue, redis, settings, monkeypatch
):
    settings.MQ_MAX_QUEUE_JOBS = 10
    monkeypatch.setattr("pipeline.capacity._znodes_seen", ("", 0.0, None))
    fill(queue, 7)
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] and body["zookeeper"] == {"ok": True} and body["redis"] == {"ok": True}
    capacity = body["capacity"]
    assert capacity["jobs"] == 7 and capacity["max_jobs"] == 10 and not capacity["warning"]
    # make test's ZooKeeper allows mntr: its whole tree, other tests' chroots included
    assert capacity["znodes"] > 7 * 8
    fill(queue, 1)
    assert client.get("/healthz").json()["capacity"]["warning"] is True


def test_the_dashboard_shows_capacity_and_warns_near_the_limit(client, queue, settings):
    settings.MQ_MAX_QUEUE_JOBS = 10
    viewer(get_user_model().objects.create_user("viewer", password="pw"))
    client.login(username="viewer", password="pw")
    fill(queue, 5)
    page = client.get("/").content.decode()
    assert "5 of 10 jobs" in page and "near the limit" not in page
    fill(queue, 3)
    page = client.get("/").content.decode()
    assert "8 of 10 jobs" in page and "near the limit (MQ_MAX_QUEUE_JOBS)" in page


def test_healthz_says_redis_is_down_with_503(client, queue, settings):
    settings.RQ_QUEUES = {"default": {"URL": f"redis://127.0.0.1:{free_port()}/0"}}
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["ok"] is False and body["zookeeper"] == {"ok": True}
    assert body["redis"]["ok"] is False and body["redis"]["error"].startswith("Redis is down")


def _within(seconds: float, call):
    """``call()``'s result, or an assertion error if it has not returned within ``seconds``."""
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(result=call()), daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert "result" in out, f"no answer within {seconds} s: it hangs"
    return out["result"], time.monotonic() - started


def test_with_zookeeper_down_submissions_and_healthz_answer_503_within_zk_timeout(
    client, own_zookeeper, settings, transactional_db, redis
):
    settings.ZK_HOSTS, settings.ZK_CHROOT, settings.ZK_TIMEOUT = own_zookeeper.hosts, "/mq", 3
    runtime.close()
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    user = get_user_model().objects.create_user("depositor", password="pw")
    grant_depositor(user, ["demo"])
    key = ApiToken.issue(user, "tests")[1]
    body = {"profile": "demo", "type": "file", "payload_url": "https://example.org/x"}
    try:
        assert post_json(client, key, body).status_code == 201  # the client is connected
        own_zookeeper.stop()
        response, took = _within(30, lambda: post_json(client, key, body))
        assert response.status_code == 503 and took < 3 + 10
        assert response.json()["errors"][0].startswith("the queue is unavailable")
        health, took = _within(30, lambda: client.get("/healthz"))
        assert health.status_code == 503 and took < 3 + 10
        assert health.json()["zookeeper"]["ok"] is False
        assert health.json()["zookeeper"]["error"].startswith("ZooKeeper is down")
        assert health.json()["redis"] == {"ok": True}
    finally:
        runtime.close()


# --- one collection's big batch does not starve another's --------------------------------


def _race(pipeline, http_server, n: int, b_rows: int | None):
    """Collection A's ``n``-job batch in flight with the workers kept busy (each round runs
    a few RQ jobs, fewer than are queued), then collection B's batch (one file, or a manifest
    of ``b_rows``) submitted; run until B is final. How many of A's jobs were completed."""
    for i in range(max(n, b_rows or 0)):
        (http_server.root / f"f{i}.txt").write_bytes(b"a%d" % i)
    (http_server.root / "a.checkm").write_bytes(files_manifest(http_server.url, n))
    Profile.objects.create(name="b", collection="b", minter_shoulder="ark:/99999/fk4")
    queues = [Queue(name, connection=pipeline.redis) for name in all_queue_names()]
    dispatcher = Dispatcher(pipeline.store, pipeline.redis, TASKS, DispatcherConfig(ahead=4))

    def busy_round():
        dispatcher.sweep()
        SimpleWorker(queues, connection=pipeline.redis).work(
            burst=True, max_jobs=3, logging_level="WARNING"
        )

    a = pipeline.submit(
        type="single-file-batch-manifest", payload_url=http_server.url_for("/a.checkm")
    )
    while pipeline.store.batches.get_batch(a).status == BatchStatus.PENDING:
        busy_round()
    busy_round()
    if b_rows is None:
        (http_server.root / "b.txt").write_bytes(b"b")
        b = pipeline.submit(profile="b", type="file", payload_url=http_server.url_for("/b.txt"))
    else:
        (http_server.root / "b.checkm").write_bytes(files_manifest(http_server.url, b_rows))
        b = pipeline.submit(
            profile="b",
            type="single-file-batch-manifest",
            payload_url=http_server.url_for("/b.checkm"),
        )
    for _ in range(300):
        if pipeline.store.batches.get_batch(b).status in (
            BatchStatus.COMPLETED,
            BatchStatus.FAILED,
        ):
            break
        busy_round()
    assert pipeline.store.batches.get_batch(b).status == BatchStatus.COMPLETED
    return len(pipeline.store.batches.batch_jobs(a)["batch-completed"])


def test_a_big_batch_does_not_starve_another_collections_small_one(pipeline, http_server):
    """B's one job (a higher priority than A's 40) completes long before A's batch ends."""
    assert _race(pipeline, http_server, 40, None) <= 20, "B waited for most of A"


def test_batches_of_the_same_priority_take_turns(pipeline, http_server):
    """A's 40 jobs and B's 12 share a priority: B, submitted later, does not wait for A."""
    assert batch_priority(5, 40) == batch_priority(5, 12)
    assert _race(pipeline, http_server, 40, 12) <= 24, "B waited for most of A"


def test_turns_go_to_the_least_served_batch_within_a_priority_only():
    turns = Turns()
    listed = [(5, "j1"), (6, "j2"), (6, "j3"), (6, "j4"), (6, "j5"), (6, "j6"), (7, "j7")]
    batch_of = {"j1": "b1", "j2": "b1", "j3": "b1", "j4": "b2", "j5": "b1", "j6": "b3"}
    batch_of["j7"] = "b1"
    assert turns.order(listed, batch_of) == [
        (5, "j1"),
        (6, "j2"),
        (6, "j4"),
        (6, "j6"),
        (6, "j3"),
        (6, "j5"),
        (7, "j7"),
    ]
    for _ in range(3):
        turns.handed("b1")  # b1 was handed three jobs: b2 and b3 go first next time
    listed = [(6, "j3"), (6, "j4"), (6, "j5"), (6, "j6"), (6, "j8")]
    batch_of["j8"] = "b3"
    assert turns.order(listed, batch_of, queued={"j4"}) == [
        (6, "j6"),
        (6, "j8"),
        (6, "j3"),
        (6, "j5"),
    ]


def test_a_lone_batch_is_served_in_index_order_and_a_newcomer_starts_level():
    turns = Turns()
    listed = [(6, f"a{i}") for i in range(5)]
    batch_of = {f"a{i}": "A" for i in range(5)} | {"b0": "B", "b1": "B"}
    assert turns.order(listed, batch_of) == listed
    for _ in range(100):
        turns.handed("A")
    listed += [(6, "b0"), (6, "b1")]
    # B starts level with A (100 handed), not at 0: the two alternate.
    assert [jid for _, jid in turns.order(listed, batch_of)][:4] == ["a0", "b0", "a1", "b1"]


# --- settings ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"MQ_MAX_BATCH_JOBS": 0}, ["mq.E040"]),
        ({"MQ_MAX_QUEUE_JOBS": -1}, ["mq.E040"]),
        ({"MQ_MAX_COLLECTION_JOBS": 30_000}, ["mq.E041"]),
        ({"MQ_MAX_BATCH_JOBS": 20_000}, ["mq.E041"]),
        ({}, []),
    ],
)
def test_capacity_settings_are_checked(settings, overrides, expected):
    for name, value in overrides.items():
        setattr(settings, name, value)
    messages = checks.check_capacity()
    assert [m.id for m in messages] == expected
    for m, name in zip(messages, overrides, strict=False):
        assert name in m.msg


def test_the_bench_lets_its_batch_in_with_the_default_limits():
    for name, default in CAPACITY_DEFAULTS.items():
        if name not in os.environ:
            assert getattr(django_settings, name) == default
