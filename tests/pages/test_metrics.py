"""/metrics without services: who may read it, a scrape parsed by prometheus_client's own
parser with ZooKeeper and Redis away, counts summed over processes, the mirror's queries, and
the deploy/ dashboard and alert rules naming only metrics /metrics exposes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.checks import run_checks
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from batches.models import Batch
from jobs.models import Job, MirrorState
from merritt_queue.core import metrics as core_metrics
from merritt_queue.core.forecast import DiskForecast
from merritt_queue.core.indexdirs import DirSize
from merritt_queue.core.states import JobStatus
from merritt_queue.core.steptimes import StepModel
from merritt_queue.project import runtime
from merritt_queue.services.breakers import BreakerState
from metrics import collector as c
from metrics import foresight
from metrics.breakers import breaker_metrics
from ui.ahead import Ahead, LastHour

REPO = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-metrics-token"

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def services_away(settings):
    """ZooKeeper and Redis on closed ports, as in the fast tier, also under `make test`; the
    scrape gives up on them quickly, and the web process's client goes afterwards."""
    settings.ZK_HOSTS, settings.ZK_TIMEOUT = "127.0.0.1:1", 0.5
    closed = {**settings.RQ_QUEUES["default"], "URL": "redis://127.0.0.1:1/0"}
    settings.RQ_QUEUES = {**settings.RQ_QUEUES, "default": closed}
    settings.MQ_METRICS_TIMEOUT = 0.3
    settings.MQ_METRICS_TOKEN = ""
    settings.MQ_METRICS_ALLOW = "127.0.0.0/8,::1/128"
    yield
    if c._pending is not None:
        c._pending.exception(timeout=10)  # the read still trying to connect ends first
    runtime.close()


def scrape(client, **headers) -> dict[str, dict]:
    """name -> {"type", "samples": [(sample name, labels, value)]}, as the parser reads them."""
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return families(response.content.decode())


def families(text: str) -> dict[str, dict]:
    return {
        f.name: {"type": f.type, "samples": [(s.name, s.labels, s.value) for s in f.samples]}
        for f in text_string_to_metric_families(text)
    }


def value(fams: dict, name: str, **labels) -> float:
    suffixes = ("", "_total", "_bucket", "_sum", "_count")
    family = next(f for n, f in fams.items() if any(name == n + x for x in suffixes))
    found = [v for n, lb, v in family["samples"] if n == name and lb == labels]
    assert len(found) == 1, (name, labels, family["samples"])
    return found[0]


def make_job(jid: str, status: str, age_s: float = 0) -> Job:
    at = timezone.now() - timedelta(seconds=age_s)
    return Job.objects.create(jid=jid, status=status, last_modified=at, read_at=at)


# --- who may read it ----------------------------------------------------------------


def test_loopback_may_read_without_a_token(client):
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200


def test_an_address_outside_the_allow_list_is_refused_with_a_clear_text(client):
    response = client.get("/metrics", REMOTE_ADDR="192.0.2.7")
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/plain")
    assert b"192.0.2.7 is not in MQ_METRICS_ALLOW" in response.content


def test_a_proxied_request_from_loopback_is_refused(client):
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="192.0.2.7")
    assert response.status_code == 403 and b"through a proxy" in response.content
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_FORWARDED="for=192.0.2.7")
    assert response.status_code == 403


def test_the_token_lets_any_address_in_and_a_wrong_one_none(client, settings):
    settings.MQ_METRICS_TOKEN = TOKEN
    far = {"REMOTE_ADDR": "192.0.2.7", "HTTP_X_FORWARDED_FOR": "198.51.100.1"}
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **far).status_code == 200
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope", REMOTE_ADDR="127.0.0.1")
    assert wrong.status_code == 403 and b"not this site's MQ_METRICS_TOKEN" in wrong.content
    assert client.get("/metrics", **far).status_code == 403


def test_a_token_given_where_none_is_configured_is_refused(client):
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer ", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 403


def test_an_allow_list_network_admits_its_addresses(client, settings):
    settings.MQ_METRICS_ALLOW = "10.20.0.0/16, 2001:db8::/32"
    assert client.get("/metrics", REMOTE_ADDR="10.20.3.4").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="2001:db8::5").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403


def test_a_bad_allow_list_admits_nobody_by_address_and_the_check_names_it(client, settings):
    settings.MQ_METRICS_ALLOW = "127.0.0.0/8,not-a-network"
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403
    errors = [m for m in run_checks(tags=["merritt_queue"]) if m.id == "mq.E070"]
    assert len(errors) == 1 and "not-a-network" in errors[0].msg
    settings.MQ_METRICS_TOKEN = TOKEN
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


def test_only_get_is_answered(client):
    assert client.post("/metrics").status_code == 405


# --- a scrape with ZooKeeper and Redis away ------------------------------------------------


def test_a_scrape_parses_and_says_zookeeper_and_redis_are_down(client):
    make_job("jid0000000001", "Pending", age_s=600)
    make_job("jid0000000002", "Pending", age_s=60)
    make_job("jid0000000003", "Downloading", age_s=30)
    make_job("jid0000000004", "Completed", age_s=9000)
    make_job("jid0000000005", "Failed", age_s=120)
    Batch.objects.create(
        bid="bid0000000001",
        status="Processing",
        read_at=timezone.now(),
        last_modified=timezone.now() - timedelta(seconds=300),
    )
    MirrorState.objects.create(name="full", at=timezone.now() - timedelta(seconds=42))

    fams = scrape(client)
    assert value(fams, "mq_zookeeper_up") == 0 and value(fams, "mq_redis_up") == 0
    assert value(fams, "mq_mirror_up") == 1
    assert value(fams, "mq_zookeeper_session_state", state="CONNECTED") == 0
    assert value(fams, "mq_jobs", status="Pending") == 2
    assert value(fams, "mq_jobs", status="Downloading") == 1
    assert value(fams, "mq_jobs", status="Storing") == 0
    assert value(fams, "mq_batches", status="Processing") == 1
    assert 595 < value(fams, "mq_job_oldest_age_seconds", status="Pending") < 700
    assert 115 < value(fams, "mq_job_oldest_age_seconds", status="Failed") < 200
    oldest = {lb["status"] for _, lb, _ in fams["mq_job_oldest_age_seconds"]["samples"]}
    assert oldest == {"Pending", "Downloading", "Failed"}  # no Completed, no empty status
    assert 295 < value(fams, "mq_batch_oldest_age_seconds", status="Processing") < 400
    assert 41 < value(fams, "mq_mirror_update_age_seconds", how="full") < 100
    # What needs the tree is left out rather than guessed.
    assert "mq_tree_jobs" not in fams and "mq_mirror_drift_jobs" not in fams
    assert "mq_rq_queue_jobs" not in fams


def test_a_scrape_with_the_database_away_still_answers(client, monkeypatch):
    from django.db import OperationalError

    def away():
        raise OperationalError("no such table")

    monkeypatch.setattr(c, "read_mirror", away)
    fams = scrape(client)
    assert value(fams, "mq_mirror_up") == 0 and "mq_jobs" not in fams


def test_the_mirror_is_read_with_a_fixed_number_of_queries_that_use_the_status_index():
    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            c.read_mirror()
        return len(ctx.captured_queries)

    make_job("jid0000000001", "Pending")
    small = count()
    Job.objects.bulk_create(
        Job(
            jid=f"jid{i:010d}",
            status=list(JobStatus)[i % 12],
            read_at=timezone.now(),
            last_modified=timezone.now(),
        )
        for i in range(2, 400)
    )
    # Four for the counts and ages; four for why jobs wait (windows, locks, holds, the
    # GROUP BY of jobs.waitquery).
    assert count() == small == 8
    oldest = (
        Job.objects.filter(status__in=["Pending", "Failed"])
        .order_by()
        .values_list("status")
        .annotate(at=c.Min("last_modified"))
    )
    if connection.vendor != "sqlite":
        return  # the plan's words below are SQLite's
    sql, params = oldest.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    # A search of the status index, never a scan of the table.
    assert plan.startswith("SEARCH jobs_job USING INDEX") and "SCAN" not in plan, plan


# --- counts of every process --------------------------------------------------------------

CHILD = """
import sys
from merritt_queue.core import metrics
for _ in range(int(sys.argv[1])):
    metrics.step_committed("Downloading", "success", "Processing", 0.2)
metrics.step_committed("Storing", "fail", "Failed", 3.0)
metrics.step_abandoned("Storing")
"""


def run_child(directory: Path, steps: int) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    subprocess.run([sys.executable, "-c", CHILD, str(steps)], env=env, check=True, cwd=REPO)


def test_counts_of_two_processes_are_summed(tmp_path, client, monkeypatch):
    run_child(tmp_path, 2)
    run_child(tmp_path, 5)
    assert len(list(tmp_path.glob("counter_*.db"))) == 2

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(tmp_path))
    steps = registry.get_sample_value
    assert steps("mq_job_steps_total", {"step": "Downloading", "outcome": "success"}) == 7
    assert steps("mq_job_steps_total", {"step": "Storing", "outcome": "abandoned"}) == 2
    assert steps("mq_job_failures_total", {"step": "Storing"}) == 2
    assert steps("mq_job_transitions_total", {"from_status": "Storing", "to_status": "Failed"}) == 2
    assert steps("mq_job_step_duration_seconds_count", {"step": "Downloading"}) == 7
    assert steps("mq_job_step_duration_seconds_bucket", {"step": "Storing", "le": "2.5"}) == 0
    assert steps("mq_job_step_duration_seconds_bucket", {"step": "Storing", "le": "5.0"}) == 2

    # /metrics reads the same directory.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    fams = scrape(client)
    assert value(fams, "mq_job_steps_total", step="Downloading", outcome="success") == 7
    assert fams["mq_job_step_duration_seconds"]["type"] == "histogram"


def test_a_metrics_directory_that_cannot_be_written_costs_the_counts_not_the_step(tmp_path):
    """The counts come after a step's commit, which may keep the job's lock for the next
    step: an exception there would leave the job locked by a live worker."""
    gone = tmp_path / "removed"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(gone)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "1"], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "step counts are not kept" in done.stderr and not gone.exists()


# --- deploy/ and the docs name what /metrics exposes --------------------------------------


def every_exposed_name() -> set[str]:
    """Every sample name /metrics can give: each part's metrics made from made-up figures."""
    mirror = c.MirrorFacts(
        {"Pending": 1}, {"Pending": 1}, {"Pending": 1.0}, {"Pending": 1.0}, {"full": 1.0}
    )
    zk = c.ZkFacts(1, 1, {"Pending": 1}, 10)
    zk.listings = [DirSize("/jobs", 1, 37, True, 1048575)]
    made = [
        *c.mirror_metrics(mirror),
        *c.redis_metrics(c.RedisFacts({"q": 1}, 1)),
        *c.zookeeper_metrics(zk, "CONNECTED"),
        *c.lag_metrics(mirror, zk),
        *c.notification_metrics(c.NotificationFacts({("webhook", "failed"): 1}, {"webhook": 1.0})),
        *foresight.stall_metrics(
            {"Downloading": 1}, {"Downloading": StepModel("Downloading", 1, 1)}
        ),
        *foresight.ahead_metrics(Ahead(5, LastHour(1, 10, 0), DiskForecast(1, 10, 80, 10, 0))),
        *breaker_metrics([BreakerState("ezid")]),
    ]
    names = {s.name for m in made for s in m.samples}
    registry = CollectorRegistry()
    core_metrics.register_in(registry)
    core_metrics.step_committed("Pending", "success", "Estimating", 0.1)
    core_metrics.step_committed("Storing", "fail", "Failed", 0.1)
    # The multiprocess files that /metrics reads keep no _created time.
    names |= {
        s.name for m in registry.collect() for s in m.samples if not s.name.endswith("_created")
    }
    return names


def used_names(text: str) -> set[str]:
    return set(re.findall(r"\b(mq_[a-z_]+)\b", text))


def test_the_grafana_dashboard_uses_only_exposed_metrics():
    board = json.loads((REPO / "deploy/grafana/merritt-queue.json").read_text())
    exprs = [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])]
    assert len(exprs) >= 8
    used = set().union(*(used_names(e) for e in exprs))
    assert used and used <= every_exposed_name(), used - every_exposed_name()


def test_the_alert_rules_use_only_exposed_metrics_and_cover_the_four_cases():
    text = (REPO / "deploy/prometheus/merritt-queue-alerts.yml").read_text()
    exprs = re.findall(r"^\s+expr: *(.+(?:\n\s{8,}.+)*)", text, re.M)
    alerts = re.findall(r"^\s+- alert: *(\S+)", text, re.M)
    assert {"MqJobStuck", "MqFailuresRising", "MqMirrorBehind", "MqTreeNearCapacity"} <= set(alerts)
    assert len(exprs) == len(alerts)
    used = set().union(*(used_names(e) for e in exprs))
    assert used <= every_exposed_name(), used - every_exposed_name()


def test_the_docs_list_every_metric():
    doc = (REPO / "docs/metrics.md").read_text()
    families = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in every_exposed_name()}
    missing = {f for f in families if f"`{f}" not in doc}
    assert not missing
