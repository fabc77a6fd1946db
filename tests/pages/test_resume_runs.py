"""Resume runs: a bulk resume at a chosen pace, advanced a slice at a time by the
dispatcher's tick, with its progress, pause, resume and cancel (each audited), and a stop
of its own when the resumed jobs keep failing with one cause."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from merritt_queue.project import runtime
from steering.models import AdminAction, AdminActionItem, ResumeRun, ResumeRunItem
from steering.runs import driver
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_pages import confirm_and_execute, mirrored, payload_of

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

queue, people = base.queue, base.people  # the same fixtures
job_in = base.job_in

T0 = timezone.now().replace(microsecond=0)


def at(seconds: float):
    return T0 + timedelta(seconds=seconds)


def failed_jobs(store, n: int, collection: str = "storm") -> list[str]:
    jids = [job_in(store, "Failed", collection) for _ in range(n)]
    mirrored(store, *jids)
    return jids


def start_run(client, pace: str, rate: int, collection: str = "storm", **extra) -> ResumeRun:
    fields = {"pace": pace, "rate": str(rate), **{k: str(v) for k, v in extra.items()}}
    _, done, _ = confirm_and_execute(
        client, "job.resume", f"all=1&collection={collection}", **fields
    )
    run = ResumeRun.objects.get()
    assert done.status_code == 302 and done.url == f"/actions/runs/{run.pk}/"
    return run


def states(run: ResumeRun) -> dict[str, int]:
    out: dict[str, int] = {}
    for state in run.items.values_list("state", flat=True):
        out[state] = out.get(state, 0) + 1
    return out


def resumed(store, jids) -> list[str]:
    return [j for j in jids if store.jobs.get_job(j).status != "Failed"]


def test_a_run_per_minute_resumes_in_slices_and_shows_its_progress(client, queue, people):
    jids = failed_jobs(queue, 25)
    client.force_login(people["operator"])
    run = start_run(client, "per_minute", 10)
    # The plan is stored; nothing resumed by the request.
    assert run.items.count() == 25 and not resumed(queue, jids)
    record = run.action
    assert record.total == 25 and record.pending_items == [] and record.finished is None

    driver.advance_runs(queue, now=at(0))
    assert len(resumed(queue, jids)) == 1
    assert driver.advance_runs(queue, now=at(3)) == pytest.approx(3.0)  # next job in 3 s
    assert len(resumed(queue, jids)) == 1
    driver.advance_runs(queue, now=at(30))  # a job every 6 s: 0, 6, ..., 30
    assert len(resumed(queue, jids)) == 6
    mirrored(queue, *jids)
    page = client.get(f"/actions/runs/{run.pk}/").content.decode()
    assert "6 resumed and running" in page and "19 left" in page and "data-refresh" in page
    # Two finished: one Completed, one failed again.
    done, again = resumed(queue, jids)[:2]
    for state in ("Estimating", "Provisioning", "Downloading", "Processing", "Storing"):
        queue.moves.transition_job(done, state, "")
    for state in ("Recording", "Notify", "Completed"):
        queue.moves.transition_job(done, state, "")
    queue.moves.transition_job(again, "Failed", "broke again")
    mirrored(queue, done, again)
    driver.advance_runs(queue, now=at(31))
    page = client.get(f"/actions/runs/{run.pk}/").content.decode()
    assert "1 completed" in page and "1 failed again" in page and "4 resumed and running" in page
    # Long after (a dispatcher down for an hour): a minute's worth, not an hour's.
    driver.advance_runs(queue, now=at(3600))
    assert len(resumed(queue, jids)) == 6 + 10 - 1  # the one failed again is Failed now
    # Every job resumed has its audit row on the run's admin action.
    assert record.items.filter(result="done").count() == 16
    assert all(queue.jobs.get_job(j).retry_count <= 1 for j in jids)


def test_a_run_in_flight_keeps_n_jobs_running(client, queue, people):
    jids = failed_jobs(queue, 7)
    client.force_login(people["operator"])
    run = start_run(client, "in_flight", 3)
    driver.advance_runs(queue, now=at(0))
    driver.advance_runs(queue, now=at(1))
    first = resumed(queue, jids)
    assert len(first) == 3
    queue.moves.transition_job(first[0], "Failed", "broke")  # one finishes (badly)
    mirrored(queue, first[0])
    driver.advance_runs(queue, now=at(2))
    assert states(run) == {"failed_again": 1, "resumed": 3, "waiting": 3}


def test_pause_resume_and_cancel_are_audited_actions(client, queue, people):
    jids = failed_jobs(queue, 6)
    client.force_login(people["operator"])
    run = start_run(client, "in_flight", 2)
    driver.advance_runs(queue, now=at(0))

    def control(verb, reason="EZID is down"):
        page = client.get(f"/actions/runs/{run.pk}/{verb}")
        assert page.status_code == 200 and 'name="reason"' in page.content.decode()
        data = {"payload": payload_of(page), "reason": reason}
        assert (
            client.post(f"/actions/runs/{run.pk}/{verb}", {**data, "reason": ""}).status_code == 400
        )
        done = client.post(f"/actions/runs/{run.pk}/{verb}", data)
        assert done.status_code == 302
        assert client.post(f"/actions/runs/{run.pk}/{verb}", data).status_code == 302  # once
        return AdminAction.objects.get(action=f"run.{verb}")

    paused = control("pause")
    assert (paused.username, paused.reason, paused.done) == ("otto", "EZID is down", 1)
    assert AdminActionItem.objects.get(admin_action=paused).detail.endswith("running -> paused")
    for jid in resumed(queue, jids):  # the two running finish
        queue.moves.transition_job(jid, "Failed", "broke")
    mirrored(queue, *jids)
    driver.advance_runs(queue, now=at(10))
    assert len(resumed(queue, jids)) == 0 and states(run)["waiting"] == 4  # none while paused
    page = client.get(f"/actions/runs/{run.pk}/").content.decode()
    assert "paused by otto: EZID is down" in page and f"/actions/runs/{run.pk}/resume" in page

    control("resume", "EZID is back")
    driver.advance_runs(queue, now=at(20))
    assert len(resumed(queue, jids)) == 2

    cancelled = control("cancel", "enough")
    run.refresh_from_db()
    assert run.state == "cancelled" and run.action.finished is not None and cancelled.done == 1
    driver.advance_runs(queue, now=at(30))
    assert states(run)["waiting"] == 2  # never resumed
    audit = client.get("/actions/").content.decode()
    assert "Cancel a resume run" in audit and "Pause a resume run" in audit


def test_a_viewer_may_not_pause_a_run(client, queue, people):
    failed_jobs(queue, 2)
    client.force_login(people["operator"])
    run = start_run(client, "in_flight", 1)
    client.force_login(people["viewer"])
    assert client.get(f"/actions/runs/{run.pk}/pause").status_code == 403
    assert "Pause" not in client.get(f"/actions/runs/{run.pk}/").content.decode()


@pytest.mark.parametrize(
    "fields,error",
    [
        ({"pace": "fast", "rate": "3"}, "is not a pace"),
        ({"pace": "per_minute", "rate": "0"}, "at least 1"),
        ({"pace": "per_minute", "rate": "ten"}, "whole numbers"),
        ({"pace": "in_flight", "rate": "2", "stop_percent": "150"}, "percentage"),
    ],
)
def test_a_bad_pace_is_refused_and_starts_nothing(client, queue, people, fields, error):
    failed_jobs(queue, 2)
    client.force_login(people["operator"])
    page = client.get("/actions/job.resume/confirm?all=1&collection=storm")
    assert 'name="pace"' in page.content.decode()
    data = {"payload": payload_of(page), "reason": "why", **fields}
    answer = client.post("/actions/job.resume/execute", data)
    assert answer.status_code == 400 and error in answer.content.decode()
    assert not ResumeRun.objects.exists() and not AdminAction.objects.exists()


def test_a_restart_mid_slice_resumes_no_job_twice(client, queue, people, settings):
    jids = failed_jobs(queue, 6)
    client.force_login(people["operator"])
    run = start_run(client, "in_flight", 4)
    items = list(run.items.order_by("position"))
    # A dispatcher stopped mid-slice: four items marked sending; the first two resumed in
    # ZooKeeper, one of them also audited; then the process died.
    ResumeRunItem.objects.filter(pk__in=[i.pk for i in items[:4]]).update(state="sending")
    queue.edits.resume_job(items[0].jid, message="otto: resumed")
    queue.edits.resume_job(items[1].jid, message="otto: resumed")
    AdminActionItem.objects.create(
        admin_action=run.action, item_id=items[0].jid, result="done", after_version=3
    )
    runtime.close()  # another process: a fresh store
    store = runtime.get_store()
    driver.advance_runs(store, now=at(0))
    in_order = [i.jid for i in items]  # as the confirmation listed them
    assert sorted(in_order) == sorted(jids)
    assert [store.jobs.get_job(j).retry_count for j in in_order] == [1] * 4 + [0] * 2
    got = dict(run.items.values_list("jid", "state"))
    assert got[items[0].jid] == "resumed"
    assert got[items[1].jid] == "skipped"  # it had moved: the version check refused it
    assert got[items[2].jid] == got[items[3].jid] == "resumed"
    assert run.action.items.filter(item_id=items[1].jid).get().result == "skipped"


def test_a_run_leaves_a_quarantined_job_out(client, queue, people, settings):
    settings.MQ_POISON_FAILURES = 2
    jids = failed_jobs(queue, 3)
    client.force_login(people["operator"])
    run = start_run(client, "in_flight", 5)
    # Between the confirmation and the slice, a job failed a second time the same way.
    queue.edits.resume_job(jids[0], message="someone")
    queue.moves.transition_job(jids[0], "Failed", "broke")
    mirrored(queue, jids[0])
    ResumeRunItem.objects.filter(jid=jids[0]).update(
        version=queue.jobs.get_job(jids[0]).status_version
    )
    driver.advance_runs(queue, now=at(0))
    item = run.items.get(jid=jids[0])
    assert item.state == "skipped" and "quarantined: failed 2 times" in item.message
    assert queue.jobs.get_job(jids[0]).status == "Failed"


# --- a storm, with real downloads ----------------------------------------------------------


def test_a_run_whose_jobs_keep_failing_stops_itself_with_the_reason(
    client, pipeline, content, django_user_model, settings
):
    from django.contrib.auth.models import Group

    # A host that answers 500 to every job would open its breaker, and its jobs would wait
    # instead of failing: this storm is of jobs that do fail, so no breaker here.
    settings.MQ_BREAKER_THRESHOLD = 0

    from tests.pipelinerun import FINAL

    operator = django_user_model.objects.create_user("otto", password="pw")
    # A transactional test flushes the groups the migrations made: named here.
    operator.groups.set([Group.objects.get_or_create(name="operator")[0]])
    url = content.behave("/gone.zip", status=500)
    bids = [pipeline.submit(type="file", payload_url=url) for _ in range(6)]
    for bid in bids:
        pipeline.run(bid)
    jids = [job.jid for bid in bids for job in pipeline.jobs(bid)]
    assert all(pipeline.store.jobs.get_job(j).status == "Failed" for j in jids)

    client.force_login(operator)
    run = start_run(client, "in_flight", 2, "demo", stop_percent=50, stop_min=3)
    for tick in range(40):
        driver.advance_runs(pipeline.store, now=at(tick))
        run.refresh_from_db()
        if run.state != "running":
            break
        pipeline.step()
    assert run.state == "stopped"
    assert re.fullmatch(r"stopped: (\d) of \1 resumed jobs failed again with '.*500.*'", run.why)
    left = [j for j in jids if pipeline.store.jobs.get_job(j).retry_count == 0]
    assert left and len(left) <= 3  # the rest never resumed
    assert all(pipeline.store.jobs.get_job(j).status == "Failed" for j in left)
    page = client.get(f"/actions/runs/{run.pk}/").content.decode()
    assert run.why.replace("'", "&#x27;") in page and "the jobs that failed with it" in page
    stopped = AdminAction.objects.get(action="run.stopped")
    assert stopped.reason == run.why and stopped.username == "resume run"
    assert FINAL  # the batches' reports are no concern of the run


def test_a_depositor_does_not_read_a_run_over_other_collections(
    client, queue, people, django_user_model
):
    """The run's page counts and quotes every job it resumed: a depositor whose one job was
    among them would read other collections' results and failure messages."""
    from door.rights import grant_depositor

    failed_jobs(queue, 2, "storm")
    failed_jobs(queue, 1, "calm")
    client.force_login(people["operator"])
    _, done, _ = confirm_and_execute(
        client, "job.resume", "all=1&status=Failed", pace="per_minute", rate="10"
    )
    run = ResumeRun.objects.get()
    driver.advance_runs(queue, now=at(0))  # a job of hers resumed: the action is hers to read
    assert AdminActionItem.objects.filter(collection="calm").exists()
    dana = django_user_model.objects.create_user("dana", password="pw")
    grant_depositor(dana, ["calm"])
    client.force_login(dana)
    assert client.get(f"/actions/runs/{run.pk}/").status_code == 404
    client.force_login(people["viewer"])
    assert client.get(f"/actions/runs/{run.pk}/").status_code == 200
