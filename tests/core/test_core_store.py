"""The queue store against a real ZooKeeper, each test in its own chroot."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.serialization import Create, Delete, SetData, Transaction

from merritt_queue.core import tree as t
from merritt_queue.core.errors import (
    ChangedUnderYou,
    InvalidData,
    InvalidTransition,
    Locked,
    LockLost,
    NotFound,
    NotRemovable,
)
from merritt_queue.core.states import JOB, JOB_STEPS
from merritt_queue.core.store import ItemLock, NewJob, QueueStore
from merritt_queue.core.store.batchmoves import STATUS_REPORT_MAX_JIDS
from merritt_queue.core.store.newjobs import CREATE_CHUNK, MAX_JOB_DATA_BYTES, MAX_MULTI_BYTES
from merritt_queue.core.zk import ZkConfig, connect

WRITE_REQUESTS = (Transaction, Create, Delete, SetData)


def listing(client: KazooClient, path: str = "/") -> dict[str, tuple]:
    """Every node under ``path`` with data, version and child version."""
    out = {}

    def walk(p: str) -> None:
        data, stat = client.get(p)
        out[p] = (data, stat.version, stat.cversion)
        for child in client.get_children(p):
            walk(f"{p.rstrip('/')}/{child}")

    walk(path)
    return out


def path_to(status: str) -> list[str]:
    """Moves from Pending to ``status`` the way a real job gets there."""
    if status in ("Held", "Failed"):
        return [status]
    if status == "Deleted":
        return ["Held", "Deleted"]
    route = ["Pending"]
    while route[-1] != status:
        route.append(JOB.success_of(route[-1]))
    return route[1:]


@pytest.fixture
def batch(store: QueueStore) -> str:
    bid = store.new_batches.create_batch({"batchID": "uuid-1", "collection": "demo"}).id
    acquired = store.batch_locks.acquire_pending_batch()
    store.batch_locks.unlock_batch(acquired)
    return bid


def job_in(store: QueueStore, bid: str, status: str, **kw) -> str:
    jid = store.new_jobs.create_job(bid, {"collection": "demo"}, **kw)
    for step in path_to(status):
        store.moves.transition_job(jid, step, "failed on purpose" if step == "Failed" else "")
    return jid


def index_entries(client: KazooClient, jid: str) -> list[str]:
    found = []
    for status_dir in client.get_children(t.JOB_STATES):
        found += [
            f"{status_dir}/{n}"
            for n in client.get_children(f"{t.JOB_STATES}/{status_dir}")
            if jid in n
        ]
    return found


def batch_refs(client: KazooClient, bid: str, jid: str) -> list[str]:
    states = t.batch_states(bid)
    return [d for d in client.get_children(states) if jid in client.get_children(f"{states}/{d}")]


# --- creation ----------------------------------------------------------------


def test_create_batch_writes_submission_status_and_uuid(store, zk):
    created = store.new_batches.create_batch({"batchID": "u-1", "title": "Café"})
    assert created.id == "bid" + created.id[3:] and len(created.id) == 13 and not created.duplicate
    batch = store.batches.get_batch(created.id)
    assert batch.status == "Pending" and batch.message == "" and not batch.acquired
    assert zk.get("/batch-uuids/u-1")[0] == created.id.encode()
    assert (
        zk.get(f"/batches/{created.id}/submission")[0]
        == '{"batchID":"u-1","title":"Café"}'.encode()
    )


def test_the_same_batch_uuid_twice_returns_the_first_batch_as_duplicate(store, zk):
    first = store.new_batches.create_batch({"batchID": "u-1"})
    second = store.new_batches.create_batch({"batchID": "u-1", "other": "field"})
    assert second == type(second)(first.id, duplicate=True)
    assert store.batches.list_batch_ids() == [first.id]
    assert store.batches.find_batch_by_uuid("u-1") == first.id
    assert store.batches.find_batch_by_uuid("nope") is None


def test_racing_submitters_of_one_uuid_create_one_batch(zk_config, make_store, store):
    stores = [make_store() for _ in range(6)]
    results, barrier = [], threading.Barrier(len(stores))

    def submit(s):
        barrier.wait()
        results.append(s.new_batches.create_batch({"batchID": "same-uuid"}))

    threads = [threading.Thread(target=submit, args=(s,)) for s in stores]
    [th.start() for th in threads]
    [th.join() for th in threads]
    assert len({r.id for r in results}) == 1
    assert sum(not r.duplicate for r in results) == 1
    assert store.batches.list_batch_ids() == [results[0].id]


def test_create_job_writes_every_node_and_both_index_entries(store, zk, batch):
    jid = store.new_jobs.create_job(
        batch,
        {"profile": "p", "collection": "demo"},
        priority=3,
        identifiers={"primary_id": "ark:/1/a", "local_id": ["x"]},
        metadata={"erc_who": "w"},
    )
    assert zk.get(t.job_node(jid, "bid"))[0] == batch.encode()
    assert zk.get(t.job_node(jid, "priority"))[0] == b"3"
    assert zk.get(t.job_node(jid, "space_needed"))[0] == b"0"
    assert zk.exists(f"/jobs/states/pending/03-{jid}")
    assert zk.exists(f"/batches/{batch}/states/batch-processing/{jid}")
    job = store.jobs.get_job(jid)
    assert (job.status, job.retry_count, job.last_successful_status, job.message) == (
        "Pending",
        0,
        None,
        "",
    )
    assert job.identifiers == {"primary_id": "ark:/1/a", "local_id": ["x"]}
    assert job.metadata == {"erc_who": "w"} and job.inventory is None


def test_create_job_in_a_missing_batch_is_refused_and_writes_nothing(store, zk):
    before = listing(zk)
    with pytest.raises(NotFound, match="batch bid0000000099 does not exist"):
        store.new_jobs.create_job("bid0000000099", {})
    assert listing(zk) == before


def test_create_jobs_writes_what_create_job_does_in_order_in_pipelined_rounds(
    store, zk, batch, monkeypatch
):
    monkeypatch.setattr("merritt_queue.core.store.newjobs.CREATE_CHUNK", 2)
    heard = []
    store.changes.listeners.append(lambda change: heard.append(change.record))
    new = [NewJob({"row": i}, priority=4, metadata={"erc_what": f"t{i}"}) for i in range(5)]
    jids = store.new_jobs.create_jobs(batch, new)
    assert jids == sorted(jids) and len(set(jids)) == 5
    for i, jid in enumerate(jids):
        job = store.jobs.get_job(jid)
        assert (job.status, job.priority, job.configuration) == ("Pending", 4, {"row": i})
        assert job.metadata == {"erc_what": f"t{i}"} and job.identifiers is None
        assert zk.exists(f"/jobs/states/pending/04-{jid}")
        assert zk.exists(f"/batches/{batch}/states/batch-processing/{jid}")
    assert [r.jid for r in heard] == jids and all(r.status_version == 0 for r in heard)


def test_create_jobs_in_a_missing_batch_is_refused_and_writes_nothing(store, zk):
    before = listing(zk)
    with pytest.raises(NotFound, match="batch bid0000000099 does not exist"):
        store.new_jobs.create_jobs("bid0000000099", [NewJob({})])
    with pytest.raises(InvalidData):
        store.new_jobs.create_jobs("bid0000000099", [NewJob({}), NewJob({}, priority=100)])
    assert listing(zk) == before


def sent_writes(monkeypatch, client: KazooClient) -> list:
    """The write requests (each one ZooKeeper transaction) the client sends from now on."""
    sent: list = []
    real = client._call

    def call(request, result):
        if isinstance(request, WRITE_REQUESTS):
            sent.append(request)
        return real(request, result)

    monkeypatch.setattr(client, "_call", call)
    return sent


def jobs_under(client: KazooClient) -> list[str]:
    return sorted(n for n in client.get_children(t.JOBS) if n.startswith(t.JOB_PREFIX))


def test_create_jobs_costs_a_few_write_transactions_not_two_per_job(store, zk, batch, monkeypatch):
    """Each ZooKeeper transaction costs its request pipeline and log however small it is:
    a round's ids are one multi, its jobs' nodes one more while they fit in a request."""
    store.new_jobs.create_jobs(batch, [NewJob({"warm": 1}, priority=3)])  # index directories made
    writes, mended = store.stats["writes"], store.stats["mended"]
    sent = sent_writes(monkeypatch, zk)
    n = 2 * CREATE_CHUNK + 50
    jids = store.new_jobs.create_jobs(batch, [NewJob({"row": i}, priority=3) for i in range(n)])
    rounds = 3
    assert len(sent) == 2 * rounds and all(isinstance(r, Transaction) for r in sent)
    assert store.stats["writes"] - writes == len(sent) and store.stats["mended"] == mended
    assert len(jids) == n and jids == sorted(jids)
    assert [store.jobs.get_job(jid).configuration["row"] for jid in jids[::97]] == list(range(n))[
        ::97
    ]
    assert len(zk.get_children(t.job_state_dir("Pending"))) == n + 1


def test_a_batch_deleted_after_the_ids_are_taken_gets_no_job_and_keeps_no_id(
    store, make_store, zk, monkeypatch
):
    bid = store.new_batches.create_batch({}).id
    admin = make_store()
    heard = []
    store.changes.listeners.append(lambda change: heard.append(change))
    monkeypatch.setattr("merritt_queue.core.store.newjobs.MAX_MULTI_BYTES", 4000)
    real = store.engine.create_sequential_many

    def then_delete(*args):
        jids = real(*args)
        assert jobs_under(zk) == sorted(jids)  # the ids, empty nodes until their multi
        admin.batch_moves.transition_batch(bid, "Held")
        admin.batch_moves.transition_batch(bid, "Deleted")
        return jids

    monkeypatch.setattr(store.engine, "create_sequential_many", then_delete)
    multis = sent_writes(monkeypatch, zk)
    with pytest.raises(ChangedUnderYou, match=r"create job jid\d+ and \d+ more in batch "):
        store.new_jobs.create_jobs(bid, [NewJob({"row": i, "pad": "p" * 500}) for i in range(20)])
    assert sum(isinstance(r, Transaction) for r in multis) > 2  # ids, then several multis
    assert jobs_under(zk) == [] and heard == []
    assert all(jids == [] for jids in store.batches.batch_jobs(bid).values())
    assert zk.get_children(t.batch_job_dir(bid, "batch-processing")) == []
    assert not zk.exists(t.job_state_dir("Pending")) or not zk.get_children(
        t.job_state_dir("Pending")
    )


def test_a_refused_multi_of_jobs_leaves_none_of_its_jobs_and_keeps_the_others(
    store, zk, batch, monkeypatch
):
    """All or nothing per multi: the multis before and after a refused one stay written;
    the error names the refused multi's first job."""
    monkeypatch.setattr("merritt_queue.core.store.newjobs.MAX_MULTI_BYTES", 4000)
    heard = []
    store.changes.listeners.append(lambda change: heard.append(change.record.jid))
    real = store.engine.create_sequential_many
    taken = []

    def then_lose_one(*args):
        jids = real(*args)
        taken.extend(jids)
        zk.delete(t.job_path(jids[8]))  # its nodes cannot be created: its multi is refused
        return jids

    monkeypatch.setattr(store.engine, "create_sequential_many", then_lose_one)
    with pytest.raises(NotFound) as caught:
        store.new_jobs.create_jobs(batch, [NewJob({"row": i, "pad": "p" * 500}) for i in range(20)])
    kept = jobs_under(zk)
    lost = [jid for jid in taken if jid not in kept]
    assert taken[8] in lost and taken[0] in kept and taken[-1] in kept
    assert lost == taken[taken.index(lost[0]) : taken.index(lost[-1]) + 1]  # one multi's
    assert str(caught.value).startswith(f"create job {lost[0]} and {len(lost) - 1} more in ")
    assert heard == kept
    for jid in kept:
        assert store.jobs.get_job(jid).configuration["row"] == taken.index(jid)
    assert sorted(zk.get_children(t.job_state_dir("Pending"))) == [f"05-{jid}" for jid in kept]


def test_jobs_too_big_for_one_request_are_split_into_several_multis_in_order(
    store, zk, batch, monkeypatch
):
    """More data than one request may carry: several multis, each under the bound the
    store promises, every job written as ``create_job`` writes it, in order."""
    pad = "x" * (MAX_JOB_DATA_BYTES - 1024)
    new = [NewJob({"row": i, "pad": pad}, priority=i % 3 + 1) for i in range(24)]
    assert sum(len(n.configuration["pad"]) for n in new) > 1024 * 1024
    sent = sent_writes(monkeypatch, zk)
    jids = store.new_jobs.create_jobs(batch, new)
    multis = [r for r in sent if isinstance(r, Transaction)]
    assert len(multis) >= 1 + 3 and len(multis) == len(sent)
    assert all(len(r.serialize()) <= MAX_MULTI_BYTES for r in multis)
    assert jids == sorted(jids) and jobs_under(zk) == jids
    for i, jid in enumerate(jids):
        job = store.jobs.get_job(jid)
        assert job.configuration == {"row": i, "pad": pad} and job.priority == i % 3 + 1
        assert zk.exists(t.job_index("Pending", i % 3 + 1, jid))
        assert zk.exists(t.batch_job_ref(batch, "Pending", jid))


@pytest.mark.parametrize("bad", [{"priority": 100}, {"priority": -1}, {"space_needed": -5}])
def test_create_job_refuses_bad_numbers(store, batch, bad):
    with pytest.raises(InvalidData):
        store.new_jobs.create_job(batch, {}, **bad)


def test_missing_items_raise_not_found(store):
    with pytest.raises(NotFound, match="job jid0000000042 does not exist"):
        store.jobs.get_job("jid0000000042")
    with pytest.raises(NotFound, match="batch bid0000000042 does not exist"):
        store.batches.get_batch("bid0000000042")


# --- transitions -------------------------------------------------------------

ALL_MOVES = [(a, b) for a in JOB.statuses for b in JOB.statuses]


@pytest.mark.parametrize("old,new", [m for m in ALL_MOVES if JOB.can_move(*m)])
def test_every_allowed_job_move_moves_status_index_and_batch_reference(store, zk, batch, old, new):
    jid = job_in(store, batch, old)
    moved = store.moves.transition_job(jid, new, "why")
    assert store.jobs.get_job(jid).status == new == moved.status
    assert store.jobs.get_job(jid).message == "why"
    assert index_entries(zk, jid) == [f"{new.lower()}/05-{jid}"]
    from merritt_queue.core.states import batch_dir_for

    assert batch_refs(zk, batch, jid) == [batch_dir_for(new)]


@pytest.mark.parametrize("old,new", [m for m in ALL_MOVES if not JOB.can_move(*m) and m[0] != m[1]])
def test_every_forbidden_job_move_is_refused_and_writes_nothing(store, zk, batch, old, new):
    jid = job_in(store, batch, old)
    before = listing(zk)
    with pytest.raises(InvalidTransition, match=f"cannot move from {old} to {new}"):
        store.moves.transition_job(jid, new)
    assert listing(zk) == before


def test_last_successful_status_and_retry_count_through_a_failure_and_resume(store, batch):
    jid = job_in(store, batch, "Downloading")
    job = store.moves.fail_job(jid, "404 at http://x/y")
    assert (job.status, job.last_successful_status, job.message) == (
        "Failed",
        "Provisioning",
        "404 at http://x/y",
    )
    job = store.edits.resume_job(jid)
    assert (job.status, job.retry_count, job.last_successful_status) == (
        "Downloading",
        1,
        "Provisioning",
    )
    job = store.moves.transition_job(job, "Processing")
    assert (job.last_successful_status, job.retry_count) == ("Downloading", 1)
    assert store.jobs.get_job(jid) == job.__class__(**{**job.__dict__})


@pytest.mark.parametrize("step", JOB_STEPS)
def test_resume_restarts_the_failed_step(store, zk, batch, step):
    jid = job_in(store, batch, step)
    store.moves.fail_job(jid, f"broke in {step}")
    job = store.edits.resume_job(jid)
    assert job.status == step and job.retry_count == 1
    assert index_entries(zk, jid) == [f"{step.lower()}/05-{jid}"]
    assert batch_refs(zk, batch, jid) == ["batch-processing"]


def test_resume_from_an_earlier_step_is_allowed_but_not_a_later_one(store, batch):
    jid = job_in(store, batch, "Storing")
    store.moves.fail_job(jid, "storage down")
    with pytest.raises(InvalidTransition, match="may resume at Pending, Estimating, .*Storing"):
        store.edits.resume_job(jid, to="Recording")
    assert store.edits.resume_job(jid, to="Downloading").status == "Downloading"


def test_only_a_failed_job_can_be_resumed(store, batch):
    jid = job_in(store, batch, "Estimating")
    with pytest.raises(InvalidTransition, match="only a Failed job can be resumed"):
        store.edits.resume_job(jid)


def test_a_job_that_failed_in_pending_resumes_in_pending(store, batch):
    jid = job_in(store, batch, "Pending")
    store.moves.fail_job(jid, "digest mismatch")
    assert store.edits.resume_job(jid).status == "Pending"


def test_two_writers_from_the_same_version_exactly_one_wins(store, make_store, batch, zk):
    jid = job_in(store, batch, "Estimating")
    other = make_store()
    mine, theirs = store.jobs.get_job(jid), other.jobs.get_job(jid)
    store.moves.transition_job(mine, "Provisioning")
    before = listing(zk)
    with pytest.raises(ChangedUnderYou, match="changed under you"):
        other.moves.transition_job(theirs, "Failed", "too slow")
    assert listing(zk) == before
    assert store.jobs.get_job(jid).status == "Provisioning"


def test_priority_change_moves_the_index_entry_within_its_directory(store, zk, batch):
    jid = job_in(store, batch, "Provisioning")
    store.job_data.set_priority(jid, 9)
    assert index_entries(zk, jid) == [f"provisioning/09-{jid}"]
    assert store.jobs.get_job(jid).priority == 9
    store.moves.transition_job(jid, "Downloading")
    assert index_entries(zk, jid) == [f"downloading/09-{jid}"]


def test_job_data_is_saved_at_once_and_read_back(store, batch):
    jid = job_in(store, batch, "Processing")
    store.job_data.save_job_data(
        jid, "identifiers", {"primary_id": "ark:/99999/fk4x", "local_id": []}
    )
    store.job_data.save_job_data(
        jid, "store", {"manifest_url": "file:///m", "mode": "add", "delete": ""}
    )
    store.job_data.set_space_needed(jid, 4096)
    job = store.jobs.get_job(jid)
    assert job.identifiers["primary_id"] == "ark:/99999/fk4x"
    assert job.store["mode"] == "add" and job.space_needed == 4096
    with pytest.raises(InvalidData):
        store.job_data.save_job_data(jid, "status", {})


# --- acquisition and locks ----------------------------------------------------


def test_acquire_job_serves_priority_then_fifo_and_skips_locked(store, make_store, batch):
    a = store.new_jobs.create_job(batch, {}, priority=5)
    b = store.new_jobs.create_job(batch, {}, priority=2)
    c = store.new_jobs.create_job(batch, {}, priority=5)
    assert store.job_locks.acquire_job("Pending").jid == b
    other = make_store()
    assert other.job_locks.acquire_job("Pending").jid == a
    assert store.job_locks.acquire_job("Pending").jid == c
    assert other.job_locks.acquire_job("Pending") is None


def test_acquire_job_skips_an_index_entry_that_disagrees_with_the_job(store, zk, batch):
    jid = store.new_jobs.create_job(batch, {})
    zk.create(f"/jobs/states/estimating/05-{jid}")
    data_and_versions = lambda: {p: v[:2] for p, v in listing(zk).items()}  # noqa: E731
    before = data_and_versions()
    assert store.job_locks.acquire_job("Estimating") is None
    assert data_and_versions() == before
    assert not store.jobs.get_job(jid).locked


def test_a_worker_step_commits_and_releases_its_lock_in_one_multi(store, zk, batch):
    store.new_jobs.create_job(batch, {})
    job = store.job_locks.acquire_job("Pending")
    assert zk.exists(t.job_node(job.jid, "lock"))
    rounds = store.stats["round_trips"]
    store.moves.succeed_job(job)
    assert store.stats["round_trips"] - rounds == 1
    assert not zk.exists(t.job_node(job.jid, "lock"))


def test_a_finished_batch_status_is_read_in_one_round(store, batch):
    jid = job_in(store, batch, "Estimating")
    rounds = store.stats["round_trips"]
    assert store.batches.finished_batch_status(batch) is None
    assert store.stats["round_trips"] - rounds == 1
    store.moves.transition_job(jid, "Failed", "failed on purpose")
    assert store.batches.finished_batch_status(batch) == "Processing"
    assert store.batches.finished_batch_status("bid9999999999") is None


def test_a_finished_batch_status_never_lists_the_jobs_still_processing(store, batch, monkeypatch):
    """Asked after every job's last step: a listing would cost each of a big batch's jobs
    the names of all those still running, the whole batch over and over."""
    from merritt_queue.core import multiread as mr

    for _ in range(3):
        job_in(store, batch, "Estimating")
    asked = []
    real = mr.start
    monkeypatch.setattr(
        mr, "start", lambda client, requests: asked.extend(requests) or real(client, requests)
    )
    assert store.batches.finished_batch_status(batch) is None
    assert asked and all(kind != mr.CHILDREN for kind, _ in asked)


def test_a_deleted_batch_gets_no_job(store, zk):
    """Found by the model test: a job created in a Deleted batch brought back the empty
    batch-processing node its deletion had removed, which MerrittZK's reporting throws on."""
    bid = store.new_batches.create_batch({}).id
    store.batch_moves.transition_batch(bid, "Held")
    store.batch_moves.transition_batch(bid, "Deleted")
    before = listing(zk)
    with pytest.raises(InvalidTransition, match="was deleted"):
        store.new_jobs.create_job(bid, {})
    with pytest.raises(InvalidTransition, match="was deleted"):
        store.new_jobs.create_jobs(bid, [NewJob(configuration={})])
    assert listing(zk) == before


def test_whether_many_nodes_exist_is_one_request(store, batch, monkeypatch):
    """The dispatcher asks it of the lock of every job it may enqueue, each sweep: one
    request per node costs ZooKeeper and kazoo's thread far more than the answers."""
    jids = [store.new_jobs.create_job(batch, {}) for _ in range(4)]
    store.job_locks.lock_job(jids[1])
    paths = [t.job_node(jid, "lock") for jid in jids] + ["/no/such/node"]
    sent = []
    real = store.client._call
    monkeypatch.setattr(store.client, "_call", lambda r, a: sent.append(r) or real(r, a))
    assert store.reads.exists_many(paths) == [False, True, False, False, False]
    assert len(sent) == 1


def test_a_lock_is_released_when_its_session_dies(store, make_store, batch):
    jid = store.new_jobs.create_job(batch, {})
    worker = make_store()
    assert worker.job_locks.acquire_job("Pending").jid == jid
    assert store.job_locks.acquire_job("Pending") is None
    worker.client.stop()
    worker.client.close()
    assert store.job_locks.acquire_job("Pending").jid == jid


def test_a_worker_whose_session_expired_abandons_the_step(store, make_store, zk_config, batch):
    jid = store.new_jobs.create_job(batch, {})
    worker = make_store()
    job = worker.job_locks.acquire_job("Pending")
    session_id, password = worker.client.client_id
    # Closing a second client on the same session expires it on the server.
    twin = KazooClient(hosts=zk_config.hosts, client_id=(session_id, password))
    twin.start(timeout=10)
    twin.stop()
    twin.close()
    deadline = time.time() + 20
    while worker.session.session_id in (session_id, None) and time.time() < deadline:
        time.sleep(0.05)
    assert worker.session.session_id not in (session_id, None), "the worker never got a new session"
    with pytest.raises(LockLost, match="session that took the lock has ended"):
        worker.moves.succeed_job(job)
    assert store.jobs.get_job(jid).status == "Pending"
    assert store.job_locks.acquire_job("Pending").jid == jid


def _race_worker(hosts: str, chroot: str, out) -> None:
    store = QueueStore(connect(ZkConfig(hosts=hosts, chroot=chroot)))
    while (job := store.job_locks.acquire_job("Pending")) is not None:
        store.moves.succeed_job(job)
        out.put(job.jid)
    store.client.stop()


def test_workers_in_separate_processes_process_each_job_once(store, zk_config, batch):
    jids = {store.new_jobs.create_job(batch, {}) for _ in range(60)}
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_race_worker, args=(zk_config.hosts, zk_config.chroot, out))
        for _ in range(4)
    ]
    [p.start() for p in procs]
    [p.join(60) for p in procs]
    done = []
    while not out.empty():
        done.append(out.get())
    assert sorted(done) == sorted(jids)
    assert {store.jobs.get_job(j).status for j in jids} == {"Estimating"}


def test_workers_in_threads_process_each_job_once(store, make_store, batch):
    jids = {store.new_jobs.create_job(batch, {}) for _ in range(60)}
    done: list[str] = []

    def work(s: QueueStore) -> None:
        while (job := s.job_locks.acquire_job("Pending")) is not None:
            s.moves.succeed_job(job)
            done.append(job.jid)

    threads = [threading.Thread(target=work, args=(make_store(),)) for _ in range(6)]
    [th.start() for th in threads]
    [th.join(60) for th in threads]
    assert sorted(done) == sorted(jids)


# --- batches -----------------------------------------------------------------


def test_acquire_pending_batch_is_fifo_leaves_it_processing_and_locked(store, make_store, zk):
    first = store.new_batches.create_batch({"batchID": "a"}).id
    second = store.new_batches.create_batch({"batchID": "b"}).id
    got = store.batch_locks.acquire_pending_batch()
    assert got.bid == first and got.status == "Processing" and got.locked
    assert zk.exists(t.batch_states(first)) and zk.exists(t.batch_node(first, "lock"))
    assert make_store().batch_locks.acquire_pending_batch().bid == second
    assert store.batch_locks.acquire_pending_batch() is None


def test_a_batch_of_a_held_collection_goes_to_held_and_is_released_later(store, zk):
    store.holds.hold_collection("demo")
    bid = store.new_batches.create_batch({"collection": "demo"}).id
    assert store.batch_locks.acquire_pending_batch() is None
    held = store.batches.get_batch(bid)
    assert (
        held.status == "Held" and "collection demo is on hold" in held.message and not held.locked
    )
    store.holds.release_collection("demo")
    result = store.held.release_collection_items("demo")
    assert result.released == [bid]
    assert store.batch_locks.acquire_pending_batch().bid == bid


def test_release_all_releases_only_that_collections_held_jobs(store, batch):
    mine = [store.new_jobs.create_job(batch, {"collection": "demo"}) for _ in range(3)]
    theirs = store.new_jobs.create_job(batch, {"collection": "other"})
    for jid in [*mine, theirs]:
        store.moves.hold_job(jid, "collection on hold")
    result = store.held.release_collection_items("demo")
    assert sorted(result.released) == sorted(mine) and result.skipped == {}
    assert {store.jobs.get_job(j).status for j in mine} == {"Pending"}
    assert store.jobs.get_job(theirs).status == "Held"


def test_batch_reporting_waits_for_the_last_job(store, batch):
    a = store.new_jobs.create_job(batch, {})
    b = store.new_jobs.create_job(batch, {})
    for step in path_to("Completed"):
        store.moves.transition_job(a, step)
    assert store.batch_locks.acquire_batch_for_reporting() is None
    store.moves.transition_job(b, "Failed", "bad digest")
    reporting = store.batch_locks.acquire_batch_for_reporting()
    assert reporting.bid == batch and reporting.status == "Reporting"
    jobs = store.batches.batch_jobs(batch)
    assert (
        jobs["batch-completed"] == [a]
        and jobs["batch-failed"] == [b]
        and jobs["batch-processing"] == []
    )
    report = store.batch_moves.write_status_report(
        batch, jobs["batch-failed"], jobs["batch-completed"]
    )
    assert store.batches.get_batch(batch).status_report == report
    done = store.batch_moves.transition_batch(
        reporting, "Failed", "1 job failed", release_lock=True
    )
    assert done.status == "Failed" and not store.batches.get_batch(batch).locked


def test_a_big_batchs_status_report_stays_a_few_kilobytes(store, batch, zk):
    # 60,000 ids would pass ZooKeeper's 1 MB node limit if written whole.
    failed = [f"jid{i:010d}" for i in range(300)]
    successful = [f"jid{i:010d}" for i in range(300, 60_300)]
    report = store.batch_moves.write_status_report(batch, failed, successful)
    assert report["failed_jobs"] == failed[:STATUS_REPORT_MAX_JIDS]
    assert report["successful_jobs"] == []  # failed ones first: they are the ones to act on
    assert (report["failed_count"], report["successful_count"]) == (300, 60_000)
    _, stat = zk.get(t.batch_node(batch, "status-report"))
    assert stat.dataLength < 4096
    assert store.batches.get_batch(batch).status_report == report

    few = store.batch_moves.write_status_report(batch, failed[:2], successful[:3])
    assert few["failed_jobs"] == failed[:2] and few["successful_jobs"] == successful[:3]
    assert (few["failed_count"], few["successful_count"]) == (2, 3)


def test_batch_hold_release_and_delete(store):
    bid = store.new_batches.create_batch({}).id
    store.batch_moves.hold_batch(bid, "librarian asked")
    assert store.batches.get_batch(bid).status == "Held"
    store.batch_moves.release_batch(bid)
    store.batch_moves.hold_batch(bid)
    assert store.batch_moves.delete_batch(bid).status == "Deleted"
    with pytest.raises(InvalidTransition):
        store.batch_moves.release_batch(bid)


# --- removal -----------------------------------------------------------------


def test_purge_removes_a_completed_batch_with_all_its_jobs_and_uuid(store, zk, batch):
    done = job_in(store, batch, "Completed")
    failed = job_in(store, batch, "Failed")
    reporting = store.batch_locks.acquire_batch_for_reporting()
    store.batch_moves.transition_batch(reporting, "Completed", release_lock=True)
    assert sorted(store.removal.purge_batch(batch)) == sorted([done, failed])
    assert not zk.exists(t.batch_path(batch)) and not zk.exists("/batch-uuids/uuid-1")
    assert zk.get_children(t.JOBS) == ["states"]
    assert all(not zk.get_children(f"{t.JOB_STATES}/{d}") for d in zk.get_children(t.JOB_STATES))


def test_purge_refuses_a_batch_with_a_job_still_processing(store, zk, batch):
    failed = job_in(store, batch, "Failed")
    store.batch_moves.transition_batch(batch, "Failed", "manual")
    store.batch_moves.delete_batch(batch)
    # A job back at work in a Deleted batch: the store refuses to write it (issue 13), so
    # the reference is written as another writer (MerrittZK's requeue) would leave it.
    zk.create(t.batch_job_ref(batch, "Pending", failed), makepath=True)
    before = listing(zk)
    with pytest.raises(NotRemovable, match="still has 1 job"):
        store.removal.purge_batch(batch)
    assert listing(zk) == before


def test_only_deleted_jobs_are_removed_on_their_own(store, zk, batch):
    failed = job_in(store, batch, "Failed")
    with pytest.raises(NotRemovable, match="only a Deleted job"):
        store.removal.purge_job(failed)
    store.moves.delete_job(failed, "not wanted")
    store.removal.purge_job(failed)
    assert not zk.exists(t.job_path(failed))
    assert store.batches.batch_jobs(batch)["batch-deleted"] == []


def test_a_locked_job_is_not_removed(store, make_store, batch):
    jid = job_in(store, batch, "Deleted")
    make_store().job_locks.lock_job(jid)
    with pytest.raises(Locked):
        store.removal.purge_job(jid)


# --- holds and object locks --------------------------------------------------


def test_queue_pause_and_collection_holds(store):
    assert not store.pause.queue_paused()
    assert store.pause.pause_queue() is True and store.pause.pause_queue() is False
    assert store.pause.queue_paused()
    assert store.pause.unpause_queue() is True and not store.pause.queue_paused()
    store.holds.hold_collection("a")
    store.holds.hold_collection("b")
    assert store.holds.held_collections() == ["a", "b"]
    assert store.holds.is_collection_held("a") and not store.holds.is_collection_held("c")


def test_object_locks_are_exclusive_and_named_per_the_wire_format(store, make_store, zk):
    other = make_store()
    ark = "ark:/13030/m5abc"
    assert store.locks.lock_storage(ark, "jid1") and not other.locks.lock_storage(ark, "jid2")
    assert zk.exists("/locks/storage/ark_13030_m5abc")
    assert store.locks.lock_inventory("ark:/1/x") and not other.locks.lock_inventory("ark:/1/x")
    assert store.locks.lock_localid("loc 1") and not other.locks.lock_localid("loc 1")
    # Another holder's release leaves a lock alone: the owner a storage lock records, the
    # session an inventory lock belongs to.
    other.locks.release_lock(ItemLock("storage", ark, owner="jid2"))
    other.locks.release_lock(ItemLock("inventory", "ark:/1/x"))
    assert zk.exists("/locks/storage/ark_13030_m5abc") and zk.exists("/locks/inventory/ark_1_x")
    store.locks.release_lock(ItemLock("storage", ark, owner="jid1"))
    store.locks.release_lock(ItemLock("inventory", "ark:/1/x"))
    store.locks.release_lock(ItemLock("inventory", "ark:/1/x"))  # twice: no error
    assert other.locks.lock_storage(ark, "jid2") and other.locks.lock_inventory("ark:/1/x")
    # The storage lock is persistent: it outlives the session that took it.
    other.client.stop()
    other.client.close()
    assert zk.exists("/locks/storage/ark_13030_m5abc")
    assert not zk.exists("/locks/inventory/ark_1_x")


# --- reading never writes -----------------------------------------------------


def test_reading_never_writes(store, zk, batch):
    jid = job_in(store, batch, "Failed")
    job_in(store, batch, "Completed")
    before = listing(zk)
    store.jobs.get_job(jid)
    store.batches.get_batch(batch)
    store.jobs.list_job_ids()
    store.batches.list_batch_ids()
    store.jobs.jobs_in_state("Failed")
    store.batches.batch_jobs(batch)
    store.batches.batch_statuses()
    store.batches.finished_batches()
    store.batches.find_batch_by_uuid("uuid-1")
    store.batches.batch_is_finished(batch)
    store.batches.finished_batch_status(batch)
    store.pause.queue_paused()
    store.holds.held_collections()
    list(store.locks.nodes())
    assert listing(zk) == before


def test_a_job_with_unreadable_data_is_skipped_and_its_lock_released(store, zk, batch):
    broken = store.new_jobs.create_job(batch, {}, priority=1)
    fine = store.new_jobs.create_job(batch, {}, priority=5)
    zk.set(t.job_node(broken, "priority"), b"high")
    with pytest.raises(InvalidData, match=f"job {broken} has unreadable data"):
        store.jobs.get_job(broken)
    assert store.job_locks.acquire_job("Pending").jid == fine
    assert not zk.exists(t.job_node(broken, "lock"))


def test_a_job_whose_earlier_run_died_while_storing_takes_its_storage_lock_back(store, make_store):
    assert store.locks.lock_storage("ark:/1/a", owner="jid0000000001")
    other = make_store()
    assert other.locks.lock_storage("ark:/1/a", owner="jid0000000001")
    assert not other.locks.lock_storage("ark:/1/a", owner="jid0000000002")
    assert not other.locks.lock_storage("ark:/1/a")


def test_listeners_hear_every_change_with_its_actor_and_cannot_break_a_write(store, batch):
    heard = []
    store.changes.default_actor = "admin:ann"
    store.changes.listeners += [heard.append, lambda change: 1 / 0]
    jid = store.new_jobs.create_job(batch, {})
    store.moves.transition_job(jid, "Held", "asked")
    store.job_data.save_job_data(jid, "metadata", {"erc_what": "x"})
    store.moves.transition_job(jid, "Deleted")
    store.removal.purge_job(jid)
    assert [(c.kind, c.id, c.old_status, c.removed) for c in heard] == [
        ("job", jid, None, False),
        ("job", jid, "Pending", False),
        ("job", jid, None, False),
        ("job", jid, "Held", False),
        ("job", jid, "Deleted", True),
    ]
    assert heard[1].record.status == "Held" and {c.actor for c in heard} == {"admin:ann"}


def test_force_fail_clears_the_jobs_lock_and_its_arks_object_locks(store, make_store, zk, batch):
    jid = job_in(store, batch, "Storing")
    store.job_data.save_job_data(jid, "identifiers", {"primary_id": "ark:/1/x", "local_id": []})
    worker = make_store()
    held = worker.job_locks.lock_job(jid)
    worker.locks.lock_storage("ark:/1/x", owner=jid)
    failed = store.moves.force_fail(jid, "stuck for 3 days")
    assert failed.status == "Failed" and failed.last_successful_status == "Processing"
    assert not zk.exists(t.job_node(jid, "lock")) and not zk.exists("/locks/storage/ark_1_x")
    with pytest.raises(ChangedUnderYou):
        worker.moves.succeed_job(held)
    assert store.edits.resume_job(jid).status == "Storing"


def test_job_heads_takes_batch_and_priority_from_a_row_at_the_same_version(store):
    bid = store.new_batches.create_batch({}).id
    jid = store.new_jobs.create_job(bid, {}, priority=3)
    job = store.jobs.get_job(jid)
    store.stats.clear()
    heads = store.jobs.job_heads([jid], {jid: (job.status_version, bid, 3)})
    assert (heads[jid].bid, heads[jid].priority, heads[jid].partial) == (bid, 3, True)
    assert store.stats["round_trips"] == 1
    # A priority change moves the status version: the row's priority is not trusted then.
    store.job_data.set_priority(jid, 7)
    store.stats.clear()
    heads = store.jobs.job_heads([jid], {jid: (job.status_version, bid, 3)})
    assert heads[jid].priority == 7 and store.stats["round_trips"] == 2
    assert isinstance(store.jobs.job_heads(["jid00000x"])["jid00000x"], InvalidData)


def test_the_process_has_one_store_per_client(process_store, monkeypatch):
    from kazoo.exceptions import ConnectionLoss

    from merritt_queue.project import runtime

    listeners = len(process_store.changes.listeners)
    assert runtime.get_store() is process_store and runtime.get_store() is process_store
    added = []
    monkeypatch.setattr(process_store.client, "add_listener", added.append)
    monkeypatch.setattr(
        process_store.client, "delete", lambda *a, **k: (_ for _ in ()).throw(ConnectionLoss())
    )
    for path in ("/nowhere-1", "/nowhere-2"):  # two outages, one state listener
        process_store.session.orphan(path)
        runtime.get_store().session.orphan(path)
    assert len(added) == 1
    assert len(runtime.get_store().changes.listeners) == listeners <= 1  # none added by a call


def test_the_actors_of_two_threads_do_not_mix(store, batch):
    heard = []
    store.changes.default_actor = "worker"
    store.changes.listeners.append(heard.append)
    both_acting = threading.Barrier(2)

    def act(actor: str) -> None:
        with store.changes.acting_as(actor):
            both_acting.wait()
            store.new_jobs.create_job(batch, {"who": actor})
            both_acting.wait()

    threads = [threading.Thread(target=act, args=(a,)) for a in ("admin:ada", "admin:bob")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.new_jobs.create_job(batch, {})
    by_actor = {c.actor: (c.record.configuration or {}).get("who") for c in heard}
    assert by_actor == {"admin:ada": "admin:ada", "admin:bob": "admin:bob", "worker": None}
    with store.changes.acting_as("admin:cy"):
        assert store.changes.actor == "admin:cy"
        store.changes.default_actor = (
            "dispatcher"  # the process's actor: the block's own still wins
        )
        assert store.changes.actor == "admin:cy"
    assert store.changes.actor == "dispatcher"
