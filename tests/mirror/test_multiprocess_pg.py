"""The whole queue as separate processes that share only ZooKeeper, Redis and PostgreSQL.

The web app runs under gunicorn with two worker processes (so even one person's
consecutive requests land in different processes), next to ``run_dispatcher``,
``reconcile --watch``, a batch provisioner (an RQ worker on the batch queue only) and two
RQ workers on every queue. The test talks to them only over HTTP: the submission API, the
pages, the login form and the steering forms; at the end it reads PostgreSQL directly.
Besides the three services the processes share what one host of a deployment shares: the
local storage, minter and working directories.

The steering part holds a job of the second batch while its jobs are still Pending (the
full workers are started only afterwards), checks that the workers finish everything else
and leave that job alone, then releases it: the web process and the workers coordinate
only through ZooKeeper, Redis and the mirror.

PostgreSQL: when the test run's ``DATABASE_URL`` is a PostgreSQL URL (``make test`` sets it
from ``MQ_TEST_DATABASE_URL``), a fresh database with a unique name is created on that
server and dropped afterwards, so no existing database is touched. Otherwise
``scripts/services.sh pg-start`` starts a throw-away cluster under the run's temp dir.
"""

from __future__ import annotations

import os
import re

import psycopg
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from harness.procs import Procs, wait_for
from harness.services import free_port
from merritt_queue.core.queues import BATCH_PENDING_QUEUE
from tests.pgdatabase import new_database
from tests.procs import queue_env

pytestmark = pytest.mark.multiprocess
pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

SHOULDER = "ark:/99999/fk4"
ADMIN_PASSWORD = "multi-process-admin-pw"
WAIT = 120  # seconds: generous, only a bound on a hang


@pytest.fixture(scope="module")
def pg_url():
    """The URL of a new, empty PostgreSQL database, dropped afterwards."""
    with new_database("mq_multiprocess") as url:
        yield url


class Queue(Procs):
    """The processes, the web app's address and the depositor's API token."""

    web: str
    token: str

    def pg(self, query: str, *params) -> list[tuple]:
        with psycopg.connect(self.env["DATABASE_URL"]) as conn:
            return conn.execute(query, params).fetchall()


@pytest.fixture
def queue(pg_url, zk_config, store, redis, tmp_path):
    root = tmp_path / "queue"
    root.mkdir()
    env = queue_env(
        root,
        database_url=pg_url,
        zk_hosts=zk_config.hosts,
        chroot=zk_config.chroot,
        redis_url=os.environ["REDIS_URL"],
        MQ_SWEEP_SECONDS="2",
    )
    q = Queue(env, root)
    # One process for both: each Django start-up costs seconds on a busy machine.
    q.token = q.manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.core.management import call_command\n"
        "call_command('migrate', verbosity=0)\n"
        "from django.contrib.auth import get_user_model\n"
        "from batches.models import ApiToken, Profile\n"
        "User = get_user_model()\n"
        f"User.objects.create_superuser('admin', 'admin@example.org', '{ADMIN_PASSWORD}')\n"
        f"Profile.objects.create(name='mp', collection='mp', minter_shoulder='{SHOULDER}')\n"
        "from door.rights import grant_depositor\n"
        "depositor = User.objects.create_user('depositor')\n"
        "grant_depositor(depositor, ['mp'])\n"
        "print(ApiToken.issue(depositor, 'multiprocess')[1])\n",
    ).strip()
    port = free_port()
    q.web = f"http://127.0.0.1:{port}"
    try:
        q.start(
            "web",
            "-m",
            "gunicorn",
            "merritt_queue.project.wsgi:application",
            f"--bind=127.0.0.1:{port}",
            "--workers=2",
            "--timeout=60",
            "--access-logfile=-",
            # Its default control socket is one path per user (~/.gunicorn): two test runs
            # at once would share it.
            "--no-control-socket",
        )
        q.dispatcher()
        q.start("reconciler", "manage.py", "reconcile", "--watch")
        q.worker("provisioner", BATCH_PENDING_QUEUE)
        wait_for("the web app", lambda: _answers(f"{q.web}/healthz"), q, WAIT, all_alive=True)
        yield q
    finally:
        q.stop_all()


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=30).status_code == 200
    except requests.RequestException:  # not listening yet, or a gunicorn worker still booting
        return False


# --- HTTP, as a depositor and as a librarian ------------------------------------------------


def api_submit(q: Queue, **fields: str) -> str:
    response = requests.post(
        f"{q.web}/api/v1/batches",
        json={"profile": "mp", **fields},
        headers={"Authorization": f"Bearer {q.token}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return response.json()["batch_id"]


def _field(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]+)"', html)
    assert found, f"no {name} field in the page:\n{html[:2000]}"
    return found.group(1)


def log_in(q: Queue) -> requests.Session:
    session = requests.Session()
    form = session.get(f"{q.web}/accounts/login/", timeout=30)
    assert form.status_code == 200
    response = session.post(
        f"{q.web}/accounts/login/",
        data={
            "username": "admin",
            "password": ADMIN_PASSWORD,
            "csrfmiddlewaretoken": _field(form.text, "csrfmiddlewaretoken"),
        },
        allow_redirects=False,
        timeout=30,
    )
    assert response.status_code == 302, response.text[:2000]
    return session


def steer(session: requests.Session, q: Queue, action: str, jid: str, reason: str) -> str:
    """Confirm and execute ``action`` on one job through the web forms; the result page."""
    page = session.get(f"{q.web}/actions/{action}/confirm", params={"ids": jid}, timeout=30)
    assert page.status_code == 200, page.text[:2000]
    assert jid in page.text
    done = session.post(
        f"{q.web}/actions/{action}/execute",
        data={
            "csrfmiddlewaretoken": _field(page.text, "csrfmiddlewaretoken"),
            "payload": _field(page.text, "payload"),
            "reason": reason,
        },
        timeout=60,
    )
    assert done.status_code == 200 and "/actions/" in done.url, done.text[:2000]
    return done.text


def page(session: requests.Session, q: Queue, path: str) -> str:
    response = session.get(f"{q.web}{path}", timeout=30)
    assert response.status_code == 200, (path, response.status_code)
    return response.text


def shows_status(html: str, kind: str, item: str, status: str) -> bool:
    return f'{kind} {item} <span class="st st-{status.lower()}">{status}</span>' in html


# --- the mirror, read directly -------------------------------------------------------------


def job_statuses(q: Queue, bid: str) -> dict[str, str]:
    return dict(q.pg("SELECT jid, status FROM jobs_job WHERE bid = %s", bid))


def test_web_dispatcher_and_workers_as_processes_on_postgresql(queue, content, store):
    q = queue
    files = api_submit(
        q,
        type="single-file-batch-manifest",
        payload_url=f"{content.url}/sampleBatchOfFiles.checkm",
        batchID="multiprocess-files",
    )
    manifests = api_submit(
        q,
        type="batch-manifest",
        payload_url=f"{content.url}/sampleBatchOfManifests.checkm",
        batchID="multiprocess-manifests",
    )

    # Only the provisioner runs: both batches get their jobs, which wait in Pending.
    pending = wait_for(
        "the second batch's jobs in the mirror",
        lambda: (j := job_statuses(q, manifests)) and len(j) == 3 and j,
        q,
        WAIT,
        all_alive=True,
    )
    assert set(pending.values()) == {"Pending"}
    held = sorted(pending)[0]
    admin = log_in(q)
    steer(admin, q, "job.hold", held, "multi-process test: hold")
    assert store.jobs.get_job(held).status == "Held"
    wait_for(
        "the hold in the mirror",
        lambda: job_statuses(q, manifests)[held] == "Held",
        q,
        WAIT,
        all_alive=True,
    )
    assert shows_status(page(admin, q, f"/jobs/{held}/"), "Job", held, "Held")

    q.worker("worker1")
    q.worker("worker2")
    wait_for(
        "the first batch to complete, as the web app shows it",
        lambda: shows_status(page(admin, q, f"/batches/{files}/"), "Batch", files, "Completed"),
        q,
        WAIT,
        all_alive=True,
    )
    others = [j for j in pending if j != held]
    wait_for(
        "the second batch's other jobs to complete",
        lambda: all(job_statuses(q, manifests)[j] == "Completed" for j in others),
        q,
        WAIT,
        all_alive=True,
    )
    # Whether or not the dispatcher had queued its Pending step before the hold, no worker
    # ran it: a worker re-reads the status under the job's lock.
    assert store.jobs.get_job(held).status == "Held"
    assert store.batches.get_batch(manifests).status == "Processing"

    steer(admin, q, "job.release", held, "multi-process test: release")
    wait_for(
        "the second batch to complete, as the web app shows it",
        lambda: shows_status(
            page(admin, q, f"/batches/{manifests}/"), "Batch", manifests, "Completed"
        ),
        q,
        WAIT,
        all_alive=True,
    )

    # PostgreSQL, read directly: every job Completed with one ARK of its own, stored once.
    rows = q.pg(
        "SELECT jid, bid, status, ark FROM jobs_job WHERE bid IN (%s, %s) ORDER BY jid",
        files,
        manifests,
    )
    assert len(rows) == 6
    assert {(bid, status) for _, bid, status, _ in rows} == {
        (files, "Completed"),
        (manifests, "Completed"),
    }
    arks = {jid: ark for jid, _, _, ark in rows}
    assert all(a.startswith(f"{SHOULDER}") for a in arks.values()), arks
    assert len(set(arks.values())) == 6
    versions = q.pg(
        "SELECT o.ark, v.number, v.job_id FROM inventory_inventoryversion v "
        "JOIN inventory_inventoryobject o ON o.id = v.obj_id"
    )
    assert sorted(versions) == sorted((ark, 1, jid) for jid, ark in arks.items())
    assert dict(q.pg("SELECT bid, status FROM batches_batch")) == {
        files: "Completed",
        manifests: "Completed",
    }
    # ZooKeeper agrees, and the minter handed out exactly six ARKs.
    for jid, ark in arks.items():
        assert store.jobs.get_job(jid).identifiers["primary_id"] == ark
    assert (q.root / "minter" / "99999-fk4.counter").read_text().strip() == "6"
    # Both actions were recorded by the web app, as the admin, each on one job.
    assert q.pg(
        "SELECT a.action, a.username, a.done, i.item_id FROM steering_adminaction a "
        "JOIN steering_adminactionitem i ON i.admin_action_id = a.id ORDER BY a.id"
    ) == [("job.hold", "admin", 1, held), ("job.release", "admin", 1, held)]

    # The pages show it all.
    rows = re.findall(r"<tr\b.*?</tr>", page(admin, q, "/batches/"), re.S)
    for bid in (files, manifests):
        assert [r for r in rows if bid in r and 'class="st st-completed"' in r], (bid, rows)
    for jid, ark in arks.items():
        detail = page(admin, q, f"/jobs/{jid}/")
        assert shows_status(detail, "Job", jid, "Completed")
        # Recorded in the inventory, so the ARK links to its object page.
        assert f'<dt>ARK</dt><dd><a href="/objects/{ark}/">{ark}</a></dd>' in detail
    # /metrics: the steps each worker process counted in its own files, summed by the web
    # app's gunicorn; and what it reads at the scrape.
    # One file per process that ran a step; which workers ran which steps is the race's, so
    # whether there are one or several files, the scrape must add up to every job's steps
    # (tests/pages/test_metrics.py sums two processes' files on purpose).
    counted = {p.name for p in (q.root / "metrics").glob("counter_*.db")}
    assert counted, "no worker process counted a step"
    scraped = requests.get(f"{q.web}/metrics", timeout=30)
    assert scraped.status_code == 200, scraped.text[:2000]
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(scraped.text)
        for s in f.samples
    }
    completed = sum(
        v
        for (name, labels), v in samples.items()
        if name == "mq_job_transitions_total" and ("to_status", "Completed") in labels
    )
    assert completed == 6
    assert samples[("mq_jobs", (("status", "Completed"),))] == 6
    assert samples[("mq_zookeeper_up", ())] == 1 and samples[("mq_redis_up", ())] == 1
    assert not q.exited(), q.logs()
