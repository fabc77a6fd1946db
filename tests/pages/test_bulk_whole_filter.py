"""An "all matching" hold, release, resume or delete of more jobs than a page lists
(``MQ_BULK_LIST_MAX``): the confirmation page summarises the selection and signs its filter,
never each job; the run reads it again from the mirror, ``MQ_BULK_CHUNK`` jobs at a time,
its progress on its page while it runs, the mirror current when it ends, every job audited
and a job that changed since the page skipped and said. Small sizes, small chunks: the
figures at 100,000 jobs are the benchmark's (``make bench BENCH=bulk``)."""

from __future__ import annotations

import pytest
from django.core import signing

from jobs.models import Job
from merritt_queue.core.records import NewJob
from steering import confirmations, tasks
from steering.actions import execution, selection, wholefilter
from steering.actions.catalog import ACTIONS
from steering.actions.views import SALT
from steering.models import AdminAction, AdminActionItem, ResumeRun
from tests.pages import test_steering_actions as base
from tests.pages.test_quarantine import fail_again
from tests.pages.test_steering_pages import confirm_and_execute, mirrored, payload_of

queue, people, admin_queue = base.queue, base.people, base.admin_queue  # the same fixtures
work, new_batch = base.work, base.new_batch

N, CHUNK, LIST_MAX = 120, 25, 50


@pytest.fixture
def small(settings, admin_queue, monkeypatch):
    settings.MQ_BULK_LIST_MAX = LIST_MAX
    settings.MQ_BULK_CHUNK = CHUNK
    settings.MQ_BULK_INLINE_MAX = 10
    monkeypatch.setattr(selection, "SAMPLE", 10, raising=False)
    return admin_queue


def jobs_in(store, status: str, n: int = N, collection: str = "wide") -> list[str]:
    """``n`` jobs of one batch moved to ``status`` and mirrored."""
    bid = new_batch(store)
    jids = store.new_jobs.create_jobs(bid, [NewJob({"collection": collection})] * n)
    for jid in jids:
        if status == "Deleted":
            store.moves.transition_job(jid, "Held", "")
        if status != "Pending":
            store.moves.transition_job(jid, status, "broke" if status == "Failed" else "")
    mirrored(store, *jids)
    return jids


def signed(page) -> dict:
    return signing.loads(payload_of(page), salt=SALT, max_age=confirmations.MAX_AGE)


def test_the_confirmation_summarises_and_signs_the_filter_not_each_job(
    client, queue, people, small
):
    jids = jobs_in(queue, "Failed")
    jobs_in(queue, "Held", 7)
    client.force_login(people["operator"])
    page = client.get("/actions/job.resume/confirm?all=1&collection=wide")
    body = page.content.decode()
    assert page.status_code == 200 and "bulk-summary" in body
    assert f'data-applying="{N}"' in body and f"Resume {N} items" in body
    # Counts by collection and status, of the whole selection.
    assert "<td>wide</td>" in body and f"<td>{N}</td>" in body and "<td>7</td>" in body
    assert (
        body.count('<tr class="applies" data-item=')
        + body.count('<tr class="not-applicable" data-item=')
        == 10
    )  # a sample, not every job
    data = signed(page)
    assert "items" not in data and data["whole"]["counted"] == N
    assert sum(jid in payload_of(page) for jid in jids) == 0


@pytest.mark.parametrize(
    "name,before,after,who",
    [
        ("job.hold", "Pending", "Held", "operator"),
        ("job.release", "Held", "Pending", "operator"),
        ("job.resume", "Failed", "Pending", "operator"),
        ("job.delete", "Held", "Deleted", "administrator"),
    ],
)
def test_a_large_selection_runs_in_chunks_with_its_progress_shown(
    client, queue, people, small, monkeypatch, name, before, after, who
):
    jids = jobs_in(queue, before)
    client.force_login(people[who])
    page, done, data = confirm_and_execute(
        client, name, f"all=1&collection=wide&status={before}", reason="storage moved"
    )
    record = AdminAction.objects.get()
    assert done.status_code == 302 and done.url == f"/actions/{record.pk}/"
    # Queued, with no list of the jobs kept in the record.
    assert record.finished is None and record.total == N and record.pending_items == []
    assert small.count == 1

    seen: list[tuple[int, int, str]] = []
    real = execution._run_chunk

    def watched(store, action, rec, chunk, *rest):
        page = client.get(done.url).content.decode()
        seen.append((len(chunk), rec.progress, page))
        return real(store, action, rec, chunk, *rest)

    monkeypatch.setattr(execution, "_run_chunk", watched)
    work(small)

    assert [size for size, _, _ in seen] == [CHUNK] * (N // CHUNK) + [N % CHUNK]
    assert [progress for _, progress, _ in seen] == list(range(0, N, CHUNK))
    third = seen[2][2]  # the run's page, while it runs
    assert "<progress" in third and f"{2 * CHUNK}/{N} items handled" in third
    assert 'http-equiv="refresh"' in third

    record.refresh_from_db()
    assert record.finished and (record.done, record.skipped, record.failed) == (N, 0, 0)
    assert record.total == N and record.reason == "storage moved"
    assert all(queue.jobs.get_job(j).status == after for j in jids)
    # The mirror is current when the run ends: every job's row shows its new status.
    assert set(Job.objects.filter(jid__in=jids).values_list("status", flat=True)) == {after}
    audit = record.items.filter(part_of="")
    assert audit.count() == N and set(audit.values_list("result", flat=True)) == {"done"}
    assert set(audit.values_list("after_status", flat=True)) == {after}
    result = client.get(done.url).content.decode()
    assert f"{N} done" in result and "storage moved" in result

    # A double click: the same confirmation acts on nothing again.
    again = client.post(f"/actions/{name}/execute", data)
    assert again.status_code == 409 and AdminAction.objects.count() == 1
    assert small.count == 0 and AdminActionItem.objects.filter(part_of="").count() == N


def test_a_job_changed_since_the_page_is_skipped_and_said(client, queue, people, small):
    jids = jobs_in(queue, "Failed")
    client.force_login(people["operator"])
    page = client.get("/actions/job.resume/confirm?all=1&collection=wide")
    changed, gone = jids[3], jids[40]
    # After the page: one resumed and failed again (still Failed, another version), one
    # resumed by someone else (no longer Failed); the mirror saw both.
    queue.edits.resume_job(changed, message="by a colleague")
    queue.moves.transition_job(changed, "Failed", "broke again")
    queue.edits.resume_job(gone, message="by a colleague")
    mirrored(queue, changed, gone)
    before = queue.jobs.get_job(changed).status_version
    client.post(
        "/actions/job.resume/execute", {"payload": payload_of(page), "reason": "storage back"}
    )
    work(small)
    record = AdminAction.objects.get()
    row = record.items.get(item_id=changed)
    assert row.result == "skipped" and "changed since the page was shown" in row.detail
    assert queue.jobs.get_job(changed).status_version == before  # not acted on
    assert not record.items.filter(item_id=gone).exists()
    assert (record.done, record.skipped, record.failed) == (N - 2, 1, 0)
    assert record.params["no_longer_matching"] == 1 and record.total == N - 1
    result = client.get(f"/actions/{record.pk}/").content.decode()
    assert "1 job counted on the confirmation page no longer matched it" in result
    assert "changed since the page was shown" in result


def test_a_run_stopped_midway_goes_on_where_it_was_and_acts_once(
    client, queue, people, small, monkeypatch
):
    jids = jobs_in(queue, "Failed")
    client.force_login(people["operator"])
    confirm_and_execute(client, "job.resume", "all=1&collection=wide")
    record = AdminAction.objects.get()
    real, calls = execution._run_chunk, []

    def dies_on_the_third(*args):
        calls.append(1)
        real(*args)
        if len(calls) == 3:  # the chunk acted on and audited, the worker then killed
            raise SystemExit("worker killed")

    monkeypatch.setattr(execution, "_run_chunk", dies_on_the_third)
    with pytest.raises(SystemExit):
        tasks.run_admin_action(record.pk)
    monkeypatch.setattr(execution, "_run_chunk", real)
    assert tasks.run_admin_action(record.pk) == f"{N} done"
    record.refresh_from_db()
    assert (record.done, record.skipped, record.failed) == (N, 0, 0)
    assert all(queue.jobs.get_job(j).retry_count == 1 for j in jids)
    assert record.items.count() == N


def test_a_large_resume_at_a_pace_becomes_a_run_of_every_job(client, queue, people, small):
    jids = jobs_in(queue, "Failed")
    client.force_login(people["operator"])
    _, done, _ = confirm_and_execute(
        client, "job.resume", "all=1&collection=wide", pace="per_minute", rate="10"
    )
    run = ResumeRun.objects.get()
    assert done.url == f"/actions/runs/{run.pk}/"
    assert sorted(run.items.values_list("jid", flat=True)) == sorted(jids)
    assert run.action.total == N and small.count == 0


def test_a_summarised_resume_leaves_quarantined_jobs_out(client, queue, people, small, settings):
    settings.MQ_POISON_FAILURES = 3
    jids = jobs_in(queue, "Failed")
    poisoned = jids[:3]
    for jid in poisoned:
        fail_again(queue, jid, "broke", 2)
    mirrored(queue, *poisoned)
    client.force_login(people["operator"])
    confirm_and_execute(client, "job.resume", "all=1&collection=wide&status=Failed", reason="fixed")
    work(small)
    record = AdminAction.objects.get()
    assert (record.done, record.skipped) == (N - 3, 3)
    assert all(queue.jobs.get_job(j).status == "Failed" for j in poisoned)
    skipped = record.items.filter(part_of="", result="skipped")
    assert set(skipped.values_list("item_id", flat=True)) == set(poisoned)
    assert all("quarantined" in d for d in skipped.values_list("detail", flat=True))


def test_a_filter_whose_matches_change_without_a_write_is_not_summarised(settings):
    """Stalled, waiting and quarantined are judged at the moment: jobs enter them with no row
    written, which the run's guard (a row written since the page) cannot see."""
    settings.MQ_BULK_LIST_MAX = LIST_MAX
    resume, many = ACTIONS["job.resume"], LIST_MAX + 1
    assert wholefilter.summarizes(resume, many, "status=Failed&collection=wide")
    for extra in ("quarantined=1", "stalled=1", "waiting=worker"):
        assert not wholefilter.summarizes(resume, many, f"status=Failed&{extra}"), extra
    assert wholefilter.summarizes(resume, many, "status=Failed&stalled=&waiting=")
