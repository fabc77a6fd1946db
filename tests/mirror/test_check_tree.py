"""The consistency check against a real ZooKeeper: each damage found, not written, then mended."""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient

from merritt_queue.core import tree as t
from merritt_queue.core.store import QueueStore
from merritt_queue.core.treecheck import consistency
from merritt_queue.core.treecheck.consistency import Finding, check_tree

ARK = "ark:/13030/m5abc"
FUTURE = time.time() + 3600  # ages measured an hour from now: every lock is old


def listing(client: KazooClient, path: str = "/") -> dict[str, tuple]:
    """Every node under ``path`` with its data and whole stat (versions, owner, zxids)."""
    out = {}

    def walk(p: str) -> None:
        data, stat = client.get(p)
        out[p] = (data, tuple(stat))
        for child in client.get_children(p):
            walk(f"{p.rstrip('/')}/{child}")

    walk(path)
    return out


def path_to(status: str) -> list[str]:
    routes = {
        "Pending": [],
        "Held": ["Held"],
        "Failed": ["Failed"],
        "Deleted": ["Held", "Deleted"],
    }
    steps = ["Estimating", "Provisioning", "Downloading", "Processing", "Storing", "Recording"]
    steps += ["Notify", "Completed"]
    return routes[status] if status in routes else steps[: steps.index(status) + 1]


def new_batch(store: QueueStore, uuid: str = "uuid-1") -> str:
    """A Processing batch ready for the test's jobs.

    Its empty ``batch-processing`` stands for the jobs the batch handler creates before
    Processing: without any, the check takes it for a batch no one will ever report.
    """
    bid = store.new_batches.create_batch({"batchID": uuid, "collection": "demo"}).id
    store.batch_locks.unlock_batch(store.batch_locks.acquire_pending_batch())
    store.client.ensure_path(t.batch_job_dir(bid, "batch-processing"))
    return bid


def job_in(store: QueueStore, bid: str, status: str = "Pending", **kw) -> str:
    jid = store.new_jobs.create_job(bid, {"collection": "demo"}, **kw)
    for step in path_to(status):
        store.moves.transition_job(jid, step, "failed on purpose" if step == "Failed" else "")
    return jid


@pytest.fixture
def bid(store: QueueStore) -> str:
    return new_batch(store)


def check(store: QueueStore, **kw) -> list[Finding]:
    """A check without repair, proving it wrote nothing."""
    before = listing(store.client)
    found = check_tree(store, **kw)
    assert listing(store.client) == before, "a check without repair wrote to the tree"
    return found


def one(findings: list[Finding], kind: str, path: str) -> Finding:
    matches = [f for f in findings if f.kind == kind and f.path == path]
    assert len(matches) == 1, f"no single {kind} at {path} in {findings}"
    return matches[0]


def found_then_repaired(store, kind: str, path: str, mentions: str, **kw) -> Finding:
    """Find ``kind`` at ``path`` (writing nothing), repair it, and see a clean tree after."""
    finding = one(check(store, **kw), kind, path)
    assert mentions in finding.reason
    assert finding.repair and not finding.repaired
    repaired = one(check_tree(store, repair=True, **kw), kind, path)
    assert repaired.repaired, repaired.reason
    assert check(store, **kw) == []
    return finding


def reported_only(store, kind: str, path: str, mentions: str, **kw) -> Finding:
    """Find ``kind`` at ``path`` with no repair; a repairing run leaves it untouched."""
    finding = one(check(store, **kw), kind, path)
    assert mentions in finding.reason
    assert finding.repair is None
    before = listing(store.client)
    again = one(check_tree(store, repair=True, **kw), kind, path)
    assert not again.repaired
    assert listing(store.client) == before
    return finding


# --- a clean tree ------------------------------------------------------------


def test_check_finds_nothing_in_a_tree_built_through_the_store(store, make_store):
    bid = new_batch(store)
    jobs = {s: job_in(store, bid, s) for s in ("Pending", "Held", "Storing", "Completed", "Failed")}
    resumed = job_in(store, bid, "Downloading")
    store.moves.fail_job(resumed, "network down")
    store.edits.resume_job(resumed)
    deleted = job_in(store, bid, "Deleted")
    purged = job_in(store, bid, "Deleted")
    store.removal.purge_job(purged)
    store.job_data.set_priority(jobs["Pending"], 2)
    store.job_data.save_job_data(
        jobs["Storing"], "identifiers", {"primary_id": ARK, "local_id": []}
    )
    store.locks.lock_storage(ARK, owner=jobs["Storing"])
    done = new_batch(store, "uuid-done")
    job_in(store, done, "Completed")
    store.batch_moves.transition_batch(done, "Reporting")
    store.batch_moves.transition_batch(done, "Completed")
    removed = new_batch(store, "uuid-removed")
    job_in(store, removed, "Completed")
    store.batch_moves.transition_batch(removed, "Reporting")
    store.batch_moves.transition_batch(removed, "Completed")
    store.removal.purge_batch(removed)
    pending = store.new_batches.create_batch({"batchID": "uuid-pending"}).id
    job_in(store, pending)  # jobs may be created before the batch is acquired
    store.batch_moves.hold_batch(store.new_batches.create_batch({"batchID": "uuid-held"}).id)
    gone = store.new_batches.create_batch({"batchID": "uuid-gone"}).id
    store.batch_moves.hold_batch(gone)
    store.batch_moves.delete_batch(gone)
    worker = make_store()
    assert worker.job_locks.lock_job(jobs["Pending"]) is not None
    assert worker.locks.lock_inventory(ARK)

    assert check(store) == []
    assert check(store, grace=0) == []
    assert deleted in store.jobs.list_job_ids()


def test_check_of_a_tree_without_containers_finds_nothing(zk):
    assert check(QueueStore(zk)) == []


# --- index entries -------------------------------------------------------------


def test_check_finds_and_repairs_a_missing_index_entry(store, bid):
    jid = job_in(store, bid)
    store.client.delete(t.job_index("Pending", 5, jid))

    found_then_repaired(store, "missing-index", t.job_index("Pending", 5, jid), jid)

    assert store.job_locks.acquire_job("Pending").jid == jid


def test_check_finds_and_repairs_an_index_entry_of_a_job_that_does_not_exist(store, bid):
    ghost = t.job_index("Pending", 5, "jid0000009999")
    store.client.create(ghost)

    found_then_repaired(store, "stale-index", ghost, "jid0000009999")

    assert store.job_locks.acquire_job("Pending") is None


def test_check_moves_an_index_entry_left_in_the_old_status(store, bid):
    jid = job_in(store, bid, "Estimating")
    store.client.delete(t.job_index("Estimating", 5, jid))
    store.client.create(t.job_index("Pending", 5, jid))

    findings = check(store)
    assert {(f.kind, f.path) for f in findings} == {
        ("missing-index", t.job_index("Estimating", 5, jid)),
        ("stale-index", t.job_index("Pending", 5, jid)),
    }
    found_then_repaired(store, "stale-index", t.job_index("Pending", 5, jid), "Estimating")

    assert store.job_locks.acquire_job("Pending") is None
    assert store.job_locks.acquire_job("Estimating").jid == jid


def test_check_repairs_an_index_entry_under_the_wrong_priority(store, bid):
    jid = job_in(store, bid, priority=7)
    store.client.delete(t.job_index("Pending", 7, jid))
    store.client.create(t.job_index("Pending", 3, jid))

    found_then_repaired(store, "stale-index", t.job_index("Pending", 3, jid), jid)

    assert store.jobs.jobs_in_state("Pending") == [(7, jid)]


def test_check_finds_and_repairs_a_job_indexed_twice(store, bid):
    jid = job_in(store, bid)
    extra = t.job_index("Downloading", 5, jid)
    store.client.create(extra)

    found_then_repaired(store, "duplicate-index", extra, jid)

    assert store.job_locks.acquire_job("Downloading") is None
    assert store.job_locks.acquire_job("Pending").jid == jid


def test_check_reports_a_foreign_name_in_a_state_directory_and_leaves_it(store, bid):
    job_in(store, bid)
    store.client.create(f"{t.JOB_STATES}/pending/not-a-job")

    reported_only(store, "foreign-index", f"{t.JOB_STATES}/pending/not-a-job", "not-a-job")


# --- batch references ------------------------------------------------------------


def test_check_finds_and_repairs_a_missing_batch_reference(store, bid):
    jid = job_in(store, bid, "Downloading")
    ref = t.batch_job_ref(bid, "Downloading", jid)
    store.client.delete(ref)

    found_then_repaired(store, "missing-batch-ref", ref, jid)

    assert store.batches.batch_jobs(bid)["batch-processing"] == [jid]
    assert not store.batches.batch_is_finished(bid)


def test_check_moves_a_completed_job_out_of_batch_processing(store, bid):
    jid = job_in(store, bid, "Completed")
    store.client.delete(t.batch_job_ref(bid, "Completed", jid))
    wrong = t.batch_job_ref(bid, "Pending", jid)
    store.client.create(wrong)

    findings = check(store)
    assert {f.kind for f in findings} == {"missing-batch-ref", "wrong-batch-dir"}
    finding = found_then_repaired(store, "wrong-batch-dir", wrong, jid)

    assert "batch-completed" in finding.reason
    assert store.batches.batch_jobs(bid)["batch-completed"] == [jid]
    assert store.batches.batch_is_finished(bid)


def test_check_drops_the_extra_reference_of_a_job_referenced_twice(store, bid):
    jid = job_in(store, bid, "Failed")
    wrong = t.batch_job_ref(bid, "Deleted", jid)
    store.client.create(wrong, makepath=True)

    found_then_repaired(store, "wrong-batch-dir", wrong, jid)

    assert store.batches.batch_jobs(bid)["batch-failed"] == [jid]
    assert store.batches.batch_jobs(bid)["batch-deleted"] == []


def test_check_recreates_a_lost_states_subtree_of_a_processing_batch(store, bid):
    jid = job_in(store, bid, "Estimating")
    store.client.delete(t.batch_states(bid), recursive=True)

    findings = check(store)
    assert {(f.kind, f.path) for f in findings} == {
        ("batch-not-acquired", t.batch_path(bid)),
        ("missing-batch-ref", t.batch_job_ref(bid, "Estimating", jid)),
    }
    found_then_repaired(store, "batch-not-acquired", t.batch_path(bid), bid)

    assert store.batches.get_batch(bid).acquired
    assert store.batches.batch_jobs(bid)["batch-processing"] == [jid]


def test_check_finds_and_repairs_a_reference_to_a_job_that_does_not_exist(store, bid):
    ghost = t.batch_job_ref(bid, "Pending", "jid0000009999")
    store.client.create(ghost, makepath=True)

    found_then_repaired(store, "stale-batch-ref", ghost, "jid0000009999")

    assert store.batches.batch_is_finished(bid)


def test_check_drops_a_reference_held_by_a_batch_the_job_does_not_belong_to(store, bid):
    jid = job_in(store, bid)
    other = new_batch(store, "uuid-2")
    stray = t.batch_job_ref(other, "Pending", jid)
    store.client.create(stray, makepath=True)

    finding = found_then_repaired(store, "stale-batch-ref", stray, jid)

    assert bid in finding.reason
    assert store.batches.batch_jobs(other)["batch-processing"] == []
    assert store.batches.batch_jobs(bid)["batch-processing"] == [jid]


# --- orphans -------------------------------------------------------------------


def drop_batch(store: QueueStore, bid: str, uuid: str = "uuid-1") -> None:
    store.client.delete(t.batch_path(bid), recursive=True)
    store.client.delete(t.batch_uuid_path(uuid))


def test_check_reports_a_working_job_whose_batch_is_gone_and_leaves_it(store, bid):
    jid = job_in(store, bid, "Processing")
    drop_batch(store, bid)

    finding = reported_only(store, "orphan-job", t.job_path(jid), jid)

    assert bid in finding.reason
    assert store.jobs.get_job(jid).status == "Processing"


def test_check_removes_a_completed_job_whose_batch_is_gone(store, bid):
    jid = job_in(store, bid, "Completed")
    keep = job_in(store, new_batch(store, "uuid-2"), "Completed")
    drop_batch(store, bid)

    found_then_repaired(store, "orphan-job", t.job_path(jid), jid)

    assert store.jobs.list_job_ids() == [keep]
    assert store.jobs.jobs_in_state("Completed") == [(5, keep)]


# --- batch uuids -------------------------------------------------------------------


def test_check_finds_and_repairs_a_uuid_entry_naming_a_missing_batch(store, bid):
    store.client.create(f"{t.BATCH_UUIDS}/ghost", b"bid0000009999")

    found_then_repaired(store, "dangling-uuid", f"{t.BATCH_UUIDS}/ghost", "bid0000009999")

    assert store.batches.find_batch_by_uuid("ghost") is None
    assert not store.new_batches.create_batch({"batchID": "ghost"}).duplicate


def test_check_finds_and_repairs_a_uuid_entry_naming_the_wrong_batch(store, bid):
    store.client.create(f"{t.BATCH_UUIDS}/uuid-other", bid.encode())

    found_then_repaired(store, "dangling-uuid", f"{t.BATCH_UUIDS}/uuid-other", bid)

    assert store.batches.find_batch_by_uuid("uuid-1") == bid


def test_check_drops_the_uuid_entry_of_a_batch_whose_submission_is_gone(store, bid):
    store.client.delete(t.batch_node(bid, "submission"))

    found_then_repaired(store, "dangling-uuid", t.batch_uuid_path("uuid-1"), bid)

    assert store.batches.get_batch(bid).uuid is None


def test_check_finds_and_repairs_a_missing_uuid_entry(store, bid):
    store.client.delete(t.batch_uuid_path("uuid-1"))

    found_then_repaired(store, "missing-uuid", t.batch_path(bid), "uuid-1")

    again = store.new_batches.create_batch({"batchID": "uuid-1"})
    assert again.duplicate and again.id == bid


def test_check_points_a_uuid_entry_back_at_the_batch_that_owns_it(store, bid):
    store.client.set(t.batch_uuid_path("uuid-1"), b"bid0000009999")

    findings = check(store)
    assert {f.kind for f in findings} == {"dangling-uuid", "missing-uuid"}
    found_then_repaired(store, "missing-uuid", t.batch_path(bid), "uuid-1")

    assert store.batches.find_batch_by_uuid("uuid-1") == bid


# --- bad data ------------------------------------------------------------------------


def test_check_reports_a_job_status_that_is_not_json_and_leaves_it(store, bid):
    jid = job_in(store, bid)
    store.client.set(t.job_node(jid, "status"), b"{not json")

    reported_only(store, "bad-status", t.job_path(jid), jid)


def test_check_reports_a_batch_status_naming_an_unknown_status(store, bid):
    store.client.set(t.batch_node(bid, "status"), b'{"status":"Bogus"}')

    reported_only(store, "bad-status", t.batch_path(bid), "Bogus")


def test_check_reports_a_priority_that_is_not_a_number(store, bid):
    jid = job_in(store, bid)
    store.client.set(t.job_node(jid, "priority"), b"high")

    reported_only(store, "bad-data", t.job_path(jid), jid)


# --- locks -------------------------------------------------------------------------


def test_check_reports_an_old_lock_of_a_live_worker_with_its_session(store, bid, make_store):
    jid = job_in(store, bid)
    worker = make_store()
    assert worker.job_locks.lock_job(jid) is not None

    finding = reported_only(
        store, "stale-lock", t.job_node(jid, "lock"), jid, lock_max_age=0, now=FUTURE
    )

    assert f"{worker.session.session_id:#x}" in finding.reason
    assert check(store) == []  # younger than the default limit


def test_check_reports_an_old_inventory_lock_and_leaves_it(store, make_store):
    worker = make_store()
    assert worker.locks.lock_inventory(ARK)

    finding = reported_only(
        store, "stale-lock", t.inventory_lock(ARK), "ark_13030_m5abc", lock_max_age=0, now=FUTURE
    )

    assert f"{worker.session.session_id:#x}" in finding.reason


def test_check_removes_an_old_storage_lock_no_job_is_storing(store, bid):
    jid = job_in(store, bid, "Failed", identifiers={"primary_id": ARK})
    assert store.locks.lock_storage(ARK, owner=jid)

    found_then_repaired(store, "stale-lock", t.storage_lock(ARK), jid, lock_max_age=0, now=FUTURE)

    assert store.locks.lock_storage(ARK, owner="jid0000000999")


def test_check_keeps_an_old_storage_lock_of_a_job_still_storing(store, bid):
    jid = job_in(store, bid, "Storing", identifiers={"primary_id": ARK})
    assert store.locks.lock_storage(ARK, owner=jid)

    reported_only(store, "stale-lock", t.storage_lock(ARK), jid, lock_max_age=0, now=FUTURE)


def test_check_reports_a_lock_held_on_a_completed_job(store, bid, make_store):
    jid = job_in(store, bid, "Completed")
    assert make_store().job_locks.lock_job(jid) is not None

    finding = reported_only(store, "lock-on-finished", t.job_node(jid, "lock"), jid)

    assert "Completed" in finding.reason


# --- half-created items --------------------------------------------------------------


def test_check_removes_an_empty_half_created_job_after_the_grace_period(store, bid):
    jid = store.client.create(f"{t.JOBS}/{t.JOB_PREFIX}", sequence=True).rsplit("/", 1)[1]

    young = one(check(store), "half-created-job", t.job_path(jid))
    assert young.repair is None and "grace" in young.reason
    found_then_repaired(store, "half-created-job", t.job_path(jid), jid, grace=0)

    assert jid not in store.jobs.list_job_ids()
    assert store.new_jobs.create_job(bid, {}) != jid


def test_check_removes_a_half_created_job_left_by_a_non_atomic_create(store, bid):
    jid = store.client.create(f"{t.JOBS}/{t.JOB_PREFIX}", sequence=True).rsplit("/", 1)[1]
    store.client.create(t.job_node(jid, "bid"), bid.encode())
    store.client.create(t.job_node(jid, "priority"), b"5")
    store.client.create(t.job_index("Pending", 5, jid))

    findings = check(store, grace=0)
    assert {f.kind for f in findings} == {"half-created-job", "stale-index"}
    found_then_repaired(store, "half-created-job", t.job_path(jid), jid, grace=0)

    assert store.job_locks.acquire_job("Pending") is None


def test_check_keeps_a_half_created_job_that_holds_a_configuration(store, bid):
    jid = store.client.create(f"{t.JOBS}/{t.JOB_PREFIX}", sequence=True).rsplit("/", 1)[1]
    store.client.create(t.job_node(jid, "configuration"), b'{"payload_url":"https://x"}')

    reported_only(store, "half-created-job", t.job_path(jid), "configuration", grace=0)


def test_check_removes_an_empty_half_created_batch_after_the_grace_period(store):
    bid = store.client.create(f"{t.BATCHES}/{t.BATCH_PREFIX}", sequence=True).rsplit("/", 1)[1]

    young = one(check(store), "half-created-batch", t.batch_path(bid))
    assert young.repair is None
    found_then_repaired(store, "half-created-batch", t.batch_path(bid), bid, grace=0)

    assert store.batches.list_batch_ids() == []


def test_check_keeps_a_half_created_batch_that_holds_a_submission(store):
    bid = store.client.create(f"{t.BATCHES}/{t.BATCH_PREFIX}", sequence=True).rsplit("/", 1)[1]
    store.client.create(t.batch_node(bid, "submission"), b'{"batchID":"u"}')

    reported_only(store, "half-created-batch", t.batch_path(bid), "submission", grace=0)


# --- repairing as a whole ---------------------------------------------------------------


def test_check_without_repair_writes_nothing_to_a_badly_damaged_tree(store, bid, make_store):
    jobs = [job_in(store, bid, s) for s in ("Pending", "Completed", "Failed", "Storing")]
    store.client.delete(t.job_index("Pending", 5, jobs[0]))
    store.client.create(t.job_index("Notify", 5, jobs[1]))
    store.client.delete(t.batch_job_ref(bid, "Failed", jobs[2]))
    store.client.create(f"{t.BATCH_UUIDS}/ghost", b"bid0000009999")
    store.client.create(f"{t.JOBS}/{t.JOB_PREFIX}", sequence=True)
    store.locks.lock_storage(ARK, owner=jobs[3])
    make_store().job_locks.lock_job(jobs[1])

    findings = check(store, lock_max_age=0, grace=0, now=FUTURE)

    assert len(findings) >= 7
    assert findings == sorted(findings, key=lambda f: (f.kind, f.path))


def test_a_repair_that_races_a_worker_fails_safely_and_the_others_go_on(store, bid, monkeypatch):
    jid = job_in(store, bid)
    store.client.delete(t.job_index("Pending", 5, jid))
    store.client.create(f"{t.BATCH_UUIDS}/ghost", b"bid0000009999")
    run = consistency._Checker.run

    def run_then_move(self):
        run(self)
        store.moves.transition_job(jid, "Estimating")  # a worker moves the job after the read

    monkeypatch.setattr(consistency._Checker, "run", run_then_move)
    findings = check_tree(store, repair=True)
    monkeypatch.undo()

    raced = one(findings, "missing-index", t.job_index("Pending", 5, jid))
    assert not raced.repaired and "changed since the check read it" in raced.reason
    assert one(findings, "dangling-uuid", f"{t.BATCH_UUIDS}/ghost").repaired
    assert not store.client.exists(t.job_index("Pending", 5, jid))
    assert check(store) == []


def test_check_reads_only_with_pipelined_async_calls(store, bid, monkeypatch):
    for _ in range(30):
        job_in(store, bid)
    blocking = []
    for name in ("get", "get_children", "exists"):
        real = getattr(store.client, name)
        monkeypatch.setattr(
            store.client, name, lambda *a, _real=real, **k: blocking.append(a) or _real(*a, **k)
        )

    assert check_tree(store) == []

    assert blocking == []
