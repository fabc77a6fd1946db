"""Maintenance windows applied by the dispatcher's tick (``steering.windows.scheduler``), on a real
ZooKeeper: starts, ends, late starts, misses, overlaps, holds set by hand, restarts."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.utils import timezone

from merritt_queue.core.dispatcher import Dispatcher
from merritt_queue.project.tasks import TASKS
from steering.actions.catalog import ACTIONS
from steering.actions.execution import execute
from steering.models import AdminAction, MaintenanceWindow
from steering.windows.scheduler import apply_windows, end_now
from tests.pages.test_steering_actions import job_in

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


@pytest.fixture
def ada(django_user_model, db):
    user = django_user_model.objects.create_user("ada", password="pw")
    user.groups.set(Group.objects.filter(name="administrator"))
    return user


def act(user, name: str, item: str):
    """A collection or queue action taken by hand, as its confirmation page would."""
    return execute(user, ACTIONS[name], [(item, None)], "by hand", token=uuid.uuid4().hex)


def window(scope="queue", collection="", start=-1, end=30, **extra) -> MaintenanceWindow:
    """A one-off window from ``start`` to ``end`` minutes from now."""
    now = timezone.now()
    return MaintenanceWindow.objects.create(
        scope=scope,
        collection=collection,
        start=now + timedelta(minutes=start),
        end=now + timedelta(minutes=end),
        reason="storage upgrade",
        created_by_name="ada",
        **extra,
    )


def events(w: MaintenanceWindow) -> list[str]:
    rows = AdminAction.objects.filter(params__window=w.pk).order_by("started", "pk")
    return [a.action for a in rows]


def after(w: MaintenanceWindow):
    return w.end + timedelta(seconds=1)


def test_a_window_that_starts_and_ends_while_a_batch_runs(pipeline, content, settings):
    # The window starts between the jobs' creation and their first step, which a worker's
    # hand-over would otherwise enqueue in the same burst of the test's worker.
    settings.MQ_HANDOVER = False
    bid = pipeline.submit(
        type="single-file-batch-manifest",
        payload_url=f"{content.url}/sampleBatchOfFiles.checkm",
    )
    pipeline.run(bid, until=lambda b: b.status == "Processing")
    jobs = pipeline.jobs(bid)
    assert len(jobs) == 3 and {j.status for j in jobs} == {"Pending"}
    w = window(start=1, end=30)
    apply_windows(pipeline.store)  # before its start: nothing
    assert not pipeline.store.pause.queue_paused()

    apply_windows(pipeline.store, w.start + timedelta(seconds=1))
    assert pipeline.store.pause.queue_paused()
    for _ in range(3):  # sweeps and bursts of the workers: no job is started
        pipeline.step()
    assert {j.status for j in pipeline.jobs(bid)} == {"Pending"}

    apply_windows(pipeline.store, after(w))
    assert not pipeline.store.pause.queue_paused()
    assert pipeline.run(bid).status == "Completed"
    assert {j.status for j in pipeline.jobs(bid)} == {"Completed"}
    assert events(w) == ["window.start", "window.end"]
    start, end = (AdminAction.objects.get(params__window=w.pk, action=e) for e in events(w))
    assert start.username == end.username == "scheduler" and start.reason == "storage upgrade"
    assert end.items.get().detail == f"window {w.pk}: ended; resumed the queue"


def test_a_new_dispatcher_picks_up_an_active_window_without_auditing_it_again(process_store, redis):
    w = window()
    first = Dispatcher(process_store, redis, TASKS, on_tick=lambda: apply_windows(process_store))
    wait = first.tick()
    assert process_store.pause.queue_paused() and events(w) == ["window.start"]
    assert 0 < wait <= 30  # its end is far, the tick interval is not
    again = Dispatcher(process_store, redis, TASKS, on_tick=lambda: apply_windows(process_store))
    again.tick()
    assert process_store.pause.queue_paused() and events(w) == ["window.start"]


def test_a_window_starts_late_when_the_dispatcher_was_down_at_its_start(process_store):
    w = window(start=-10)
    apply_windows(process_store)
    assert process_store.pause.queue_paused()
    (item,) = AdminAction.objects.get(params__window=w.pk).items.all()
    assert "late: it began at" in item.detail


def test_a_window_that_ended_while_nothing_ran_is_recorded_as_missed_not_applied(process_store):
    w = window(start=-5, end=20)
    apply_windows(process_store, w.end + timedelta(minutes=5))
    assert not process_store.pause.queue_paused()
    assert events(w) == ["window.missed"]
    apply_windows(process_store, w.end + timedelta(minutes=6))
    assert events(w) == ["window.missed"]


def test_a_release_by_hand_during_the_window_is_put_back_at_the_next_check(process_store, ada):
    w = window(scope="collection", collection="demo")
    apply_windows(process_store)
    assert process_store.holds.is_collection_held("demo")
    release = act(ada, "collection.release", "demo")
    assert release.done == 1 and not process_store.holds.is_collection_held("demo")
    apply_windows(process_store)
    assert process_store.holds.is_collection_held("demo")
    assert events(w) == ["window.start", "window.reapply"]
    apply_windows(process_store, after(w))
    assert not process_store.holds.is_collection_held("demo")


def test_a_hold_set_by_hand_before_the_window_stays_after_it(process_store):
    process_store.holds.hold_collection("demo", by="ada", reason="bad metadata")
    w = window(scope="collection", collection="demo")
    apply_windows(process_store)
    apply_windows(process_store, after(w))
    assert process_store.holds.read_collection_hold("demo")["by"] == "ada"
    detail = AdminAction.objects.get(params__window=w.pk, action="window.end").items.get().detail
    assert "a person set it before the window" in detail


def test_a_hold_set_by_hand_during_the_window_stays_after_it(process_store, ada):
    w = window()
    apply_windows(process_store)
    act(ada, "queue.pause", "ingest")
    apply_windows(process_store, after(w))
    assert process_store.pause.queue_paused()
    detail = AdminAction.objects.get(params__window=w.pk, action="window.end").items.get().detail
    assert "ada held it by hand during the window" in detail


def test_overlapping_windows_release_only_when_the_last_one_ends(process_store):
    first = window(scope="collection", collection="demo", start=-5, end=10)
    second = window(scope="collection", collection="demo", start=-1, end=20)
    apply_windows(process_store)
    apply_windows(process_store, after(first))
    assert process_store.holds.is_collection_held("demo")
    detail = AdminAction.objects.get(params__window=first.pk, action="window.end").items.get()
    assert f"window {second.pk} wants it" in detail.detail
    apply_windows(process_store, after(second))
    assert not process_store.holds.is_collection_held("demo")


def test_the_end_of_a_collection_window_releases_what_its_hold_held_and_nothing_else(
    process_store,
):
    held_by_hand = job_in(process_store, "Held")
    w = window(scope="collection", collection="demo")
    apply_windows(process_store)
    bid = process_store.new_batches.create_batch({"batchID": "b", "collection": "demo"}).id
    jid = process_store.new_jobs.create_job(bid, {"collection": "demo"})
    job = process_store.jobs.get_job(jid)
    process_store.moves.transition_job(
        jid, "Held", process_store.holds.item_hold(job.configuration)
    )
    apply_windows(process_store, after(w))
    assert process_store.jobs.get_job(jid).status == "Pending"
    assert process_store.jobs.get_job(held_by_hand).status == "Held"
    detail = AdminAction.objects.get(params__window=w.pk, action="window.end").items.get().detail
    assert "and 1 item(s) its hold held" in detail


def test_cancelling_an_active_window_ends_it_now(process_store):
    w = window()
    apply_windows(process_store)
    w.cancelled, w.cancelled_by = timezone.now(), "ada"
    w.save(update_fields=["cancelled", "cancelled_by"])
    end_now(process_store, w)
    assert not process_store.pause.queue_paused()
    assert events(w) == ["window.start", "window.end"]
    apply_windows(process_store)
    assert events(w) == ["window.start", "window.end"] and not process_store.pause.queue_paused()


@pytest.mark.parametrize("scope", ["queue", "collection"])
def test_a_weekly_window_applies_each_week(process_store, scope):
    now = timezone.now()
    w = MaintenanceWindow.objects.create(
        scope=scope,
        collection="demo" if scope == "collection" else "",
        recurrence="weekly",
        weekday=now.weekday(),
        time_of_day=(now - timedelta(minutes=1)).time().replace(second=0, microsecond=0),
        duration=timedelta(hours=1),
        time_zone="UTC",
        reason="weekly backup",
        created_by_name="ada",
    )
    w.created = now - timedelta(days=1)
    w.save()
    occ = w.rule().active(now)
    assert occ is not None
    for moment in (now, occ.end, occ.start + timedelta(days=7), occ.end + timedelta(days=7)):
        apply_windows(process_store, moment)
    assert events(w) == ["window.start", "window.end", "window.start", "window.end"]


def test_the_dispatcher_command_applies_the_windows_before_it_sweeps(process_store, redis):
    w = window()
    out = io.StringIO()
    call_command("run_dispatcher", "--once", stdout=out)
    assert process_store.pause.queue_paused() and events(w) == ["window.start"]
    assert out.getvalue().strip() == "enqueued 0"


def test_a_failing_hook_is_logged_and_called_again_soon_not_fatal(process_store, redis, caplog):
    def broken():
        raise RuntimeError("database away")

    dispatcher = Dispatcher(process_store, redis, TASKS, on_tick=broken)
    assert dispatcher.tick() == 5.0
    assert "dispatcher tick failed" in caplog.text
