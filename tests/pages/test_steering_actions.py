"""Admin actions through the service layer: states, permissions, versions, audit."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from rq import Queue, SimpleWorker

from merritt_queue.core.states import JOB
from steering.actions.catalog import ACTIONS
from steering.actions.execution import execute
from steering.actions.planning import Target, plan
from steering.actions.plans import steps_again
from steering.models import AdminAction, CollectionScope


@pytest.fixture
def queue(process_store):
    return process_store


@pytest.fixture
def admin_queue(settings, redis) -> Queue:
    """``mq-admin`` on the test's Redis, which django_rq's "default" connection then names."""
    url = redis.connection_pool.connection_kwargs
    settings.RQ_QUEUES = {
        "default": {
            "HOST": url.get("host", "127.0.0.1"),
            "PORT": url.get("port", 6379),
            "DB": url.get("db", 0),
        }
    }
    return Queue("mq-admin", connection=redis)


def work(admin_queue: Queue) -> None:
    """Run what is queued on ``mq-admin``, as its worker would, then return."""
    SimpleWorker([admin_queue], connection=admin_queue.connection).work(
        burst=True, logging_level="WARNING"
    )


@pytest.fixture
def people(django_user_model, db):
    def make(name, *groups):
        user = django_user_model.objects.create_user(name, password="pw")
        user.groups.set(Group.objects.filter(name__in=groups))
        return user

    return {
        "viewer": make("vera", "viewer"),
        "operator": make("otto", "operator"),
        "administrator": make("ada", "administrator"),
    }


def new_batch(store) -> str:
    bid = store.new_batches.create_batch({"batchID": uuid.uuid4().hex, "collection": "demo"}).id
    return bid


def job_in(store, status: str, collection: str = "demo") -> str:
    bid = new_batch(store)
    jid = store.new_jobs.create_job(bid, {"collection": collection})
    route, s = [], "Pending"
    if status in ("Held", "Failed"):
        route = [status]
    elif status == "Deleted":
        route = ["Held", "Deleted"]
    else:
        while s != status:
            s = JOB.success_of(s)
            route.append(s)
    for step in route:
        store.moves.transition_job(jid, step, "broke" if step == "Failed" else "")
    return jid


def run(user, name, store, jid, reason="because", **params):
    job = store.jobs.get_job(jid)
    return execute(
        user,
        ACTIONS[name],
        [(jid, job.status_version)],
        reason,
        token=uuid.uuid4().hex,
        params=params,
    )


JOB_CASES = [
    ("job.hold", "Pending", "Held"),
    ("job.release", "Held", "Pending"),
    ("job.resume", "Failed", "Pending"),
    ("job.force_fail", "Downloading", "Failed"),
    ("job.delete", "Failed", "Deleted"),
    ("job.delete", "Held", "Deleted"),
]


@pytest.mark.parametrize("name,before,after", JOB_CASES)
def test_each_job_action_from_a_state_it_applies_to(queue, people, name, before, after):
    jid = job_in(queue, before)
    record = run(people["administrator"], name, queue, jid, "librarian asked")
    item = record.items.get()
    assert (item.result, item.before_status, item.after_status) == ("done", before, after)
    job = queue.jobs.get_job(jid)
    assert job.status == after and "ada: librarian asked" in job.message


@pytest.mark.parametrize(
    "name,status",
    [
        (n, s)
        for n, a in ACTIONS.items()
        if a.scope == "job"
        for s in JOB.statuses
        if s not in a.applies_to
    ],
)
def test_each_job_action_is_refused_from_other_states_and_writes_nothing(
    queue, people, name, status
):
    jid = job_in(queue, status)
    before = queue.jobs.get_job(jid)
    record = run(people["administrator"], name, queue, jid)
    item = record.items.get()
    assert item.result == "skipped" and f"it is {status}" in item.detail
    assert queue.jobs.get_job(jid).status_version == before.status_version


def test_deleting_a_completed_job_says_how_to_remove_it(queue, people):
    jid = job_in(queue, "Completed")
    item = run(people["administrator"], "job.delete", queue, jid).items.get()
    assert item.result == "skipped"
    assert "Completed is final in the queue" in item.detail and "Purge now" in item.detail
    assert queue.jobs.get_job(jid).status == "Completed"


def test_an_item_changed_since_the_page_was_shown_is_skipped(queue, people):
    jid = job_in(queue, "Pending")
    shown = queue.jobs.get_job(jid).status_version
    queue.moves.transition_job(jid, "Estimating")
    record = execute(people["operator"], ACTIONS["job.hold"], [(jid, shown)], "hold", token="t1")
    item = record.items.get()
    assert item.result == "skipped" and "changed since the page was shown" in item.detail
    # What changed, from the job's history (a batched action reads it for such a job only).
    assert "Pending → Estimating by" in item.detail and "it is now Estimating" in item.detail
    assert queue.jobs.get_job(jid).status == "Estimating"


def test_a_double_submit_acts_once(queue, people):
    jid = job_in(queue, "Failed")
    version = queue.jobs.get_job(jid).status_version
    first = execute(
        people["operator"], ACTIONS["job.resume"], [(jid, version)], "retry", token="same"
    )
    again = execute(
        people["operator"], ACTIONS["job.resume"], [(jid, version)], "retry", token="same"
    )
    assert first.pk == again.pk and AdminAction.objects.count() == 1
    assert queue.jobs.get_job(jid).retry_count == 1


@pytest.mark.parametrize(
    "who,name,allowed",
    [
        ("viewer", "job.hold", False),
        ("operator", "job.hold", True),
        ("operator", "job.resume", True),
        ("operator", "job.force_fail", False),
        ("operator", "job.delete", False),
        ("operator", "queue.pause", False),
        ("administrator", "job.force_fail", True),
        ("administrator", "queue.pause", True),
    ],
)
def test_each_group_can_take_exactly_its_actions(queue, people, who, name, allowed):
    action = ACTIONS[name]
    jid = job_in(queue, next(iter(action.applies_to)) if action.applies_to else "Pending")
    items = (
        [(jid, queue.jobs.get_job(jid).status_version)]
        if action.scope == "job"
        else [("ingest", None)]
    )
    if allowed:
        assert execute(people[who], action, items, "ok", token=uuid.uuid4().hex).done == 1
    else:
        with pytest.raises(PermissionDenied, match=f"needs the {action.role} role"):
            execute(people[who], action, items, "no", token=uuid.uuid4().hex)
        assert AdminAction.objects.count() == 0


def test_read_only_turns_every_action_off(queue, people, settings):
    settings.READ_ONLY = True
    jid = job_in(queue, "Pending")
    with pytest.raises(PermissionDenied, match="read-only"):
        run(people["administrator"], "job.hold", queue, jid)
    assert queue.jobs.get_job(jid).status == "Pending"


def test_a_person_limited_to_collections_acts_only_on_those(queue, people):
    CollectionScope.objects.create(user=people["operator"], collections=["demo"])
    mine, theirs = job_in(queue, "Pending", "demo"), job_in(queue, "Pending", "other")
    record = execute(
        people["operator"],
        ACTIONS["job.hold"],
        [(j, queue.jobs.get_job(j).status_version) for j in (mine, theirs)],
        "hold",
        token="scoped",
    )
    results = {i.item_id: (i.result, i.detail) for i in record.items.all()}
    assert results[mine][0] == "done"
    assert results[theirs] == ("skipped", "collection other is outside your collections")


def test_a_reason_is_required(queue, people):
    jid = job_in(queue, "Pending")
    with pytest.raises(ValueError, match="reason is required"):
        run(people["operator"], "job.hold", queue, jid, reason="  ")


def test_the_plan_says_which_items_apply_and_why_not(queue, people):
    targets = [
        Target("jid1", "Pending", 0, "demo"),
        Target("jid2", "Failed", 3, "demo"),
        Target("jid3", "Pending", 0, "demo", locked=True),
    ]
    got = plan(people["operator"], ACTIONS["job.hold"], targets)
    assert [p.applies for p in got] == [True, False, False]
    assert "it is Failed; hold applies to Pending" == got[1].why
    assert "locked" in got[2].why


def test_release_warns_when_the_collection_is_still_held(queue, people):
    queue.holds.hold_collection("demo")
    (item,) = plan(people["operator"], ACTIONS["job.release"], [Target("jid1", "Held", 0, "demo")])
    assert item.applies and "collection demo is on hold" in item.why


def test_resume_says_which_steps_run_again(queue):
    assert steps_again("Provisioning") == [
        "Downloading",
        "Processing",
        "Storing",
        "Recording",
        "Notify",
    ]
    assert steps_again("Storing", step="Processing")[0] == "Processing"


def test_resume_from_an_earlier_step_the_admin_picks(queue, people):
    jid = job_in(queue, "Storing")
    queue.moves.fail_job(jid, "storage down")
    run(people["operator"], "job.resume", queue, jid, step="Downloading")
    assert queue.jobs.get_job(jid).status == "Downloading"


def test_force_fail_racing_a_worker_one_wins_and_the_other_is_reported(queue, people, make_store):
    jid = job_in(queue, "Downloading")
    worker = make_store()
    held = worker.job_locks.lock_job(jid)
    record = run(people["administrator"], "job.force_fail", queue, jid, "stuck")
    assert record.done == 1
    from merritt_queue.core.errors import ChangedUnderYou

    with pytest.raises(ChangedUnderYou):
        worker.moves.succeed_job(held)
    assert queue.jobs.get_job(jid).status == "Failed"


def test_batch_delete_takes_the_jobs_that_can_go_and_names_the_others(queue, people):
    bid = new_batch(queue)
    failed = queue.new_jobs.create_job(bid, {"collection": "demo"})
    done = queue.new_jobs.create_job(bid, {"collection": "demo"})
    queue.moves.transition_job(failed, "Failed", "x")
    for status in ("Estimating", "Provisioning", "Downloading", "Processing", "Storing"):
        queue.moves.transition_job(done, status)
    for status in ("Recording", "Notify", "Completed"):
        queue.moves.transition_job(done, status)
    queue.batch_moves.hold_batch(bid)
    version = queue.batches.get_batch(bid).status_version
    record = execute(
        people["administrator"], ACTIONS["batch.delete"], [(bid, version)], "gone", token="bd"
    )
    item = record.items.get(part_of="")
    assert item.result == "done" and f"{done} (Completed)" in item.detail
    assert (
        queue.jobs.get_job(failed).status == "Deleted"
        and queue.jobs.get_job(done).status == "Completed"
    )


def test_batch_delete_takes_its_held_jobs_too(queue, people):
    """A Held job stays in batch-processing, where the queue refuses a batch delete: the
    action deletes the jobs first, then the batch (issue 16: the page lists them as deleted)."""
    bid = new_batch(queue)
    held = queue.new_jobs.create_job(bid, {"collection": "demo"})
    failed = queue.new_jobs.create_job(bid, {"collection": "demo"})
    queue.moves.hold_job(held)
    queue.moves.transition_job(failed, "Failed", "x")
    queue.batch_moves.hold_batch(bid)
    version = queue.batches.get_batch(bid).status_version
    record = execute(
        people["administrator"], ACTIONS["batch.delete"], [(bid, version)], "gone", token="bh"
    )
    item = record.items.get(part_of="")
    assert item.result == "done", item.detail
    assert queue.batches.get_batch(bid).status == "Deleted"
    assert (
        queue.jobs.get_job(held).status == "Deleted"
        and queue.jobs.get_job(failed).status == "Deleted"
    )
    assert set(record.items.exclude(part_of="").values_list("item_id", flat=True)) == {held, failed}


def test_a_batch_delete_that_fails_on_one_job_records_the_jobs_it_deleted(
    queue, people, monkeypatch
):
    """The first job refused aborted the batch's result: the jobs already Deleted in
    ZooKeeper had no audit row, and those after it kept their folders."""
    from merritt_queue.core.errors import QueueError
    from steering.actions import execution as actions

    bid = new_batch(queue)
    first = queue.new_jobs.create_job(bid, {"collection": "demo"})
    second = queue.new_jobs.create_job(bid, {"collection": "demo"})
    for jid in (first, second):
        queue.moves.transition_job(jid, "Failed", "x")
    queue.batch_moves.hold_batch(bid)
    store = actions.get_store()
    real = store.moves.move_jobs

    def second_refused(moves):
        done = real(moves[:1])
        return [*done, *(QueueError("refused here") for _ in moves[1:])]

    monkeypatch.setattr(store.moves, "move_jobs", second_refused)
    version = queue.batches.get_batch(bid).status_version
    record = execute(
        people["administrator"], ACTIONS["batch.delete"], [(bid, version)], "gone", token="bp"
    )
    item = record.items.get(part_of="")
    assert item.result == "failed" and "could not be deleted" in item.detail
    assert queue.batches.get_batch(bid).status == "Held"
    deleted = [jid for jid in (first, second) if queue.jobs.get_job(jid).status == "Deleted"]
    assert len(deleted) == 1
    along = record.items.exclude(part_of="")
    assert list(along.values_list("item_id", flat=True)) == deleted


def test_batch_delete_is_refused_while_a_job_is_still_processing(queue, people):
    """Deleted with a job running, the batch would be left to MerrittZK's reporting, which
    throws on a Deleted batch once that job leaves batch-processing (issue 13)."""
    bid = new_batch(queue)
    running = queue.new_jobs.create_job(bid, {"collection": "demo"})
    queue.moves.transition_job(running, "Estimating")
    queue.batch_moves.hold_batch(bid)
    version = queue.batches.get_batch(bid).status_version
    record = execute(
        people["administrator"], ACTIONS["batch.delete"], [(bid, version)], "gone", token="be"
    )
    item = record.items.get()
    assert item.result == "failed" and running in item.detail and "not finished" in item.detail
    assert queue.batches.get_batch(bid).status == "Held"


def test_a_job_of_a_deleted_batch_is_not_resumed(queue, people):
    """Back in a working state it would come into the Deleted batch's empty batch-processing,
    which MerrittZK's cleanup and our own expect empty (issues 13 and 30)."""
    bid = new_batch(queue)
    failed = queue.new_jobs.create_job(bid, {"collection": "demo"})
    queue.moves.transition_job(failed, "Failed", "x")
    queue.batch_moves.hold_batch(bid)
    queue.batch_moves.delete_batch(bid)  # the store's own delete leaves the Failed job as it is
    version = queue.jobs.get_job(failed).status_version
    record = execute(
        people["operator"], ACTIONS["job.resume"], [(failed, version)], "again", token="rd"
    )
    item = record.items.get()
    assert item.result == "failed" and "is Deleted" in item.detail, item.detail
    assert queue.jobs.get_job(failed).status == "Failed"
    assert queue.client.get_children(f"/batches/{bid}/states/batch-processing") == []


def test_a_bulk_resume_reads_the_batches_in_one_round_not_one_per_job(queue, people, monkeypatch):
    """The refusal for jobs of a Deleted batch reads the batches of a chunk together: a
    bulk resume of a batch's jobs waits as many round trips for many jobs as for one."""
    from steering.actions import execution as actions

    monkeypatch.setattr(actions, "get_store", lambda **_: queue)  # to count its round trips

    def round_trips(n: int) -> int:
        bid = new_batch(queue)
        jids = [queue.new_jobs.create_job(bid, {"collection": "demo"}) for _ in range(n)]
        for jid in jids:
            queue.moves.transition_job(jid, "Failed", "x")
        items = [(jid, queue.jobs.get_job(jid).status_version) for jid in jids]
        before = queue.stats["round_trips"]
        record = execute(
            people["operator"], ACTIONS["job.resume"], items, "again", token=uuid.uuid4().hex
        )
        assert record.done == n, list(record.items.values_list("detail", flat=True))
        return queue.stats["round_trips"] - before

    a, b = round_trips(8), round_trips(1)
    assert a == b


def test_collection_and_queue_actions(queue, people):
    admin = people["administrator"]
    execute(admin, ACTIONS["collection.hold"], [("demo", None)], "audit", token="c1")
    assert queue.holds.is_collection_held("demo")
    assert queue.holds.read_collection_hold("demo") | {"at": "x"} == {
        "by": "ada",
        "reason": "audit",
        "at": "x",
    }
    jid = job_in(queue, "Held")
    execute(admin, ACTIONS["collection.release"], [("demo", None)], "done", token="c2")
    record = execute(admin, ACTIONS["collection.release_all"], [("demo", None)], "go", token="c3")
    assert "released 1 item(s)" in record.items.get(part_of="").detail
    assert queue.jobs.get_job(jid).status == "Pending"
    # Each released item has its own audit row, under the collection.
    assert record.items.get(part_of="demo").item_id == jid
    execute(admin, ACTIONS["queue.pause"], [("ingest", None)], "maintenance", token="q1")
    assert queue.pause.queue_paused()
    execute(admin, ACTIONS["queue.resume"], [("ingest", None)], "done", token="q2")
    assert not queue.pause.queue_paused()
