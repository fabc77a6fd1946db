"""/metrics against a real ZooKeeper and Redis: jobs in several states moved by real steps,
the tree's and the mirror's figures agreeing, the queues and workers, and Redis away."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rq import Queue, Worker

from jobs.models import Job
from merritt_queue.core.runner import Outcome, StepResult, run_job_step
from merritt_queue.core.states import JobStatus


@pytest.fixture(autouse=True)
def loopback_allowed(settings):
    """The test client's requests come from loopback, which the operator lets in here."""
    settings.MQ_METRICS_ALLOW = "127.0.0.0/8,::1/128"


def scrape(client) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, as prometheus_client's parser reads them."""
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(response.content.decode())
        for s in f.samples
    }


def get(samples, name: str, **labels) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


@pytest.mark.django_db
def test_a_scrape_shows_the_tree_the_mirror_and_the_steps(client, process_store, redis, settings):
    settings.MQ_METRICS_TIMEOUT = 5.0
    before = scrape(client)
    store = process_store
    bid = store.new_batches.create_batch({"profile": "p"}).id
    moved, failed, _waiting = (
        store.new_jobs.create_job(bid, {"collection": "c"}) for _ in range(3)
    )
    assert run_job_step(store, moved, "Pending", lambda job: Outcome.success("ok")).result == (
        StepResult.COMMITTED
    )
    assert run_job_step(store, failed, "Pending", lambda job: Outcome.fail("bad")).result == (
        StepResult.COMMITTED
    )
    Queue("mq-job-pending", connection=redis).enqueue("os.getcwd")
    Queue("mq-job-pending", connection=redis).enqueue("os.getcwd")
    worker = Worker([Queue("mq-job-pending", connection=redis)], connection=redis)
    worker.register_birth()

    after = scrape(client)

    def delta(name, **labels) -> float:
        return (get(after, name, **labels) or 0) - (get(before, name, **labels) or 0)

    assert get(after, "mq_zookeeper_up") == 1 and get(after, "mq_redis_up") == 1
    assert get(after, "mq_zookeeper_session_state", state="CONNECTED") == 1
    assert get(after, "mq_tree_jobs") == 3 and get(after, "mq_tree_batches") == 1
    assert get(after, "mq_tree_jobs_limit") == settings.MQ_MAX_QUEUE_JOBS
    # The mirror, written through, agrees with the tree status by status.
    assert Job.objects.count() == 3
    for status, n in [("Pending", 1), ("Estimating", 1), ("Failed", 1), ("Completed", 0)]:
        assert get(after, "mq_jobs", status=status) == n
        assert get(after, "mq_mirror_drift_jobs", status=status) == 0
    assert get(after, "mq_mirror_lag_jobs") == 0
    assert get(after, "mq_batches", status="Pending") == 1
    assert get(after, "mq_job_oldest_age_seconds", status="Failed") >= 0
    # The steps, counted where they committed.
    assert delta("mq_job_steps_total", step="Pending", outcome="success") == 1
    assert delta("mq_job_steps_total", step="Pending", outcome="fail") == 1
    assert delta("mq_job_failures_total", step="Pending") == 1
    assert delta("mq_job_transitions_total", from_status="Pending", to_status="Estimating") == 1
    assert delta("mq_job_transitions_total", from_status="Pending", to_status="Failed") == 1
    assert delta("mq_job_step_duration_seconds_count", step="Pending") == 2
    # Redis: the queue's depth and the live worker.
    assert get(after, "mq_rq_queue_jobs", queue="mq-job-pending") == 2
    assert get(after, "mq_rq_queue_jobs", queue="mq-job-storing") == 0
    assert get(after, "mq_rq_workers") == 1
    worker.register_death()


@pytest.mark.django_db
def test_the_mirror_behind_the_tree_shows_as_lag(client, process_store, redis, settings):
    store = process_store
    bid = store.new_batches.create_batch({"profile": "p"}).id
    jid = store.new_jobs.create_job(bid, {"collection": "c"})
    Job.objects.filter(jid=jid).update(status=JobStatus.COMPLETED)  # a mirror left behind
    samples = scrape(client)
    assert get(samples, "mq_mirror_drift_jobs", status="Pending") == -1
    assert get(samples, "mq_mirror_drift_jobs", status="Completed") == 1
    assert get(samples, "mq_mirror_lag_jobs") == 2


@pytest.mark.django_db
def test_redis_away_is_a_gauge_not_an_error(client, process_store, settings):
    closed = {**settings.RQ_QUEUES["default"], "URL": "redis://127.0.0.1:1/0"}
    settings.RQ_QUEUES = {**settings.RQ_QUEUES, "default": closed}
    settings.MQ_METRICS_TIMEOUT = 1.0
    samples = scrape(client)
    assert get(samples, "mq_redis_up") == 0 and get(samples, "mq_zookeeper_up") == 1
    assert not any(name == "mq_rq_workers" for name, _ in samples)
    assert get(samples, "mq_mirror_up") == 1
