"""The ``steps`` node on a real ZooKeeper: kept in the step's own commit, and for an attempt
abandoned while its fence still passes."""

from __future__ import annotations

import uuid

import pytest

from merritt_queue.core import runner, steplog
from merritt_queue.core import steprecord as sr
from merritt_queue.core import tree as t
from merritt_queue.core.attempt import Attempt, AttemptStale, ConnectionWatch
from merritt_queue.core.errors import ChangedUnderYou
from merritt_queue.core.runner import ChainPolicy, Outcome, StepResult, run_job_step, run_job_steps

SUBMISSION = {"type": "file", "payload_url": "http://example.org/a.txt"}
CONFIGURATION = {"payload_url": "http://example.org/a.txt", "payload_type": "file"}


@pytest.fixture
def jid(store) -> str:
    bid = store.new_batches.create_batch(SUBMISSION | {"batchID": str(uuid.uuid4())}).id
    store.batch_locks.unlock_batch(store.batch_locks.acquire_pending_batch())
    return store.new_jobs.create_job(bid, CONFIGURATION)


def _node(zk, jid) -> sr.StepRecord:
    data, _ = zk.get(t.job_node(jid, sr.NODE))
    return sr.decode(data)


def test_a_step_keeps_what_it_did_in_its_own_commit(store, zk, jid):
    def handler(job):
        steplog.note("get", url="https://example.org/a.txt", http=200, bytes=5)
        return Outcome.success("estimated")

    report = run_job_step(store, jid, "Pending", handler)
    assert report.result == StepResult.COMMITTED
    (attempt,) = _node(zk, jid).attempts
    assert attempt["step"] == "Pending" and attempt["to"] == "Estimating"
    assert attempt["outcome"] == "success" and attempt["msg"] == "estimated"
    assert attempt["entries"] == [
        {"k": "get", "url": "https://example.org/a.txt", "http": 200, "bytes": 5}
    ]
    # The record the commit returned carries the node as written: no read again.
    assert report.job.steps.attempts == (attempt,)
    assert store.jobs.get_job(jid).steps.attempts == (attempt,)


def test_steps_chained_under_one_lock_and_a_wait_are_each_kept(store, zk, jid):
    def pending(job):
        steplog.note("ark", ark="ark:/99999/fk4a", how="minted")
        return Outcome.success()

    def estimating(job):
        return Outcome.later("waiting for disk space", delay=0)

    policy = ChainPolicy(max_steps=5, max_seconds=60, may_enter=lambda s: True)
    run_job_steps(
        store, jid, "Pending", {"Pending": pending, "Estimating": estimating}, policy=policy
    )
    attempts = _node(zk, jid).attempts
    assert [(a["step"], a["outcome"], a["to"]) for a in attempts] == [
        ("Pending", "success", "Estimating"),
        ("Estimating", "later", "Estimating"),
    ]
    assert attempts[0]["entries"][0]["ark"] == "ark:/99999/fk4a"


def test_an_abandoned_attempt_is_kept_while_its_fence_passes(store, zk, jid):
    def handler(job):
        steplog.note("get", url="https://example.org/a.txt", http=503, retry="503")
        raise ChangedUnderYou("somebody else wrote the job")

    report = run_job_step(store, jid, "Pending", handler)
    assert report.result == StepResult.ABANDONED
    job = store.jobs.get_job(jid)
    assert job.status == "Pending" and not job.locked
    (attempt,) = _node(zk, jid).attempts
    assert attempt["outcome"] == "abandoned" and "somebody else" in attempt["msg"]
    assert attempt["entries"][0]["http"] == 503


def test_an_abandoned_attempt_of_a_job_that_moved_on_keeps_nothing(store, zk, jid):
    def handler(job):
        store.moves.hold_job(jid, "held meanwhile")  # the status version moves on
        steplog.note("get", url="https://example.org/a.txt")
        return Outcome.success()

    report = run_job_step(store, jid, "Pending", handler)
    assert report.result == StepResult.ABANDONED
    assert not zk.exists(t.job_node(jid, sr.NODE))


def test_the_node_stays_within_its_bound_however_often_a_step_runs(store, zk, jid):
    def handler(job):
        for i in range(steplog.MAX_ENTRIES + 5):
            steplog.note("get", url=f"https://example.org/{'x' * 200}/{i}", http=503)
        return Outcome.later("waiting", delay=0)

    for _ in range(40):
        assert run_job_step(store, jid, "Pending", handler).result == StepResult.DEFERRED
    data, _ = zk.get(t.job_node(jid, sr.NODE))
    record = sr.decode(data)
    assert len(data) <= sr.MAX_BYTES and record.dropped > 0
    assert record.dropped + len(record.attempts) == 40
    assert all(a["more"] >= 5 for a in record.attempts)


def test_a_stale_attempt_keeps_nothing(store, zk, jid):
    job = store.job_locks.lock_job(jid)
    # An attempt begun in a session that is no longer this client's: another worker may run
    # the step now, and its record must not be overwritten.
    stale = Attempt.begin(ConnectionWatch(zk, 0.1), jid, job.status, job.status_version, 1)
    told = runner.summary(store, stale, job, "", 0.0, None, "cut off")
    with pytest.raises(AttemptStale):
        store.steps.save_unfinished(job, stale, told)
    assert not zk.exists(t.job_node(jid, sr.NODE))
