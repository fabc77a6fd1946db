"""Poison jobs: a job that failed MQ_POISON_FAILURES times with one cause is quarantined,
counted from its record (the history node, mirrored as its timeline), left out of bulk
resumes and resumable only when a person names it with a reason."""

from __future__ import annotations

import pytest

from jobs.models import Job, JobEvent
from mirror import facade as mirror
from steering.models import AdminAction
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_pages import confirm_and_execute, mirrored
from ui import quarantine

queue, people = base.queue, base.people  # the same fixtures
job_in = base.job_in


@pytest.fixture(autouse=True)
def three(settings):
    settings.MQ_POISON_FAILURES = 3


def fail_again(store, jid: str, message: str, times: int) -> None:
    """Resume the Failed job and fail it with ``message``, ``times`` times, as a worker would."""
    for _ in range(times):
        store.edits.resume_job(jid, message="resumed")
        store.moves.transition_job(jid, "Failed", message)


def poison(store, collection: str = "demo") -> str:
    jid = job_in(store, "Failed", collection)

    fail_again(store, jid, "broke", 2)
    mirrored(store, jid)
    return jid


def test_three_failures_with_one_cause_quarantine_a_job(queue, db):
    jid = poison(queue)
    # Numbers and URLs differ between the failures: still one cause (ui.signatures).
    other = job_in(queue, "Failed")
    fail_again(queue, other, "HTTP 500 at http://a/1.zip after 3 tries", 1)
    fail_again(queue, other, "HTTP 500 at http://a/2.zip after 4 tries", 2)
    mixed = job_in(queue, "Failed")
    fail_again(queue, mixed, "HTTP 404 at http://a/1.zip", 1)
    fail_again(queue, mixed, "disk full", 1)
    mirrored(queue, other, mixed)
    found = quarantine.of([jid, other, mixed])
    assert set(found) == {jid, other}
    assert found[jid].failures == 3 and found[jid].cause == "broke"
    assert found[other].failures == 3  # the first "broke" is another cause
    assert found[other].cause == "HTTP <n> at <url> after <n> tries"


def test_fewer_failures_or_a_job_no_longer_failed_is_not_quarantined(queue, db):
    twice = job_in(queue, "Failed")
    fail_again(queue, twice, "broke", 1)
    resumed = poison(queue)
    queue.edits.resume_job(resumed, message="a person named it")
    mirrored(queue, twice, resumed)
    assert quarantine.of([twice, resumed]) == {}


def test_the_count_survives_a_mirror_rebuild(queue, db):
    jid = poison(queue)
    Job.objects.all().delete()
    JobEvent.objects.all().delete()
    assert quarantine.of([jid]) == {}
    mirror.full_reconcile(queue)
    assert quarantine.of([jid])[jid].failures == 3


def test_a_bulk_resume_leaves_a_quarantined_job_out(client, queue, people):
    bad = poison(queue, "storm")
    good = job_in(queue, "Failed", "storm")
    mirrored(queue, good)
    client.force_login(people["operator"])
    page, done, _ = confirm_and_execute(client, "job.resume", "all=1&collection=storm")
    body = page.content.decode()
    assert "quarantined: failed 3 times with" in body and "resume it on its own" in body
    record = AdminAction.objects.get()
    assert record.total == 1 and list(record.items.values_list("item_id", flat=True)) == [good]
    assert queue.jobs.get_job(bad).status == "Failed"
    assert queue.jobs.get_job(good).status == "Pending"


def test_a_quarantined_job_resumes_when_a_person_names_it_with_a_reason(client, queue, people):
    jid = poison(queue)
    client.force_login(people["operator"])
    page = client.get(f"/actions/job.resume/confirm?ids={jid}").content.decode()
    assert "quarantined" in page  # said, and still offered
    _, done, _ = confirm_and_execute(client, "job.resume", f"ids={jid}", reason="EZID is back")
    record = AdminAction.objects.get()
    assert record.done == 1 and record.reason == "EZID is back"
    assert queue.jobs.get_job(jid).status == "Pending"


def test_the_job_page_and_list_show_the_quarantine(client, queue, people):
    jid = poison(queue)
    fine = job_in(queue, "Failed")
    mirrored(queue, fine)
    client.force_login(people["viewer"])
    page = client.get(f"/jobs/{jid}/").content.decode()
    assert "mq-quarantined" in page and "failed 3 times with" in page
    attempts = page.split('class="failures"')[1].split("</ol>")[0]
    assert attempts.count("<li>") == 3 and attempts.count("broke") == 3
    assert "mq-quarantined" not in client.get(f"/jobs/{fine}/").content.decode()
    listed = client.get("/jobs/?quarantined=1").content.decode()
    assert jid in listed and fine not in listed and "mq-quarantined" in listed
    everything = client.get("/jobs/").content.decode()
    assert jid in everything and fine in everything


def test_a_filter_matching_only_the_quarantined_job_does_not_name_it(client, queue, people):
    jid = poison(queue, "alone")
    client.force_login(people["operator"])
    page = client.get("/actions/job.resume/confirm?all=1&collection=alone").content.decode()
    assert "resume it on its own" in page and "applies to none of these items" in page
    assert queue.jobs.get_job(jid).status == "Failed"
