"""What a librarian met steering in a real browser (issue 16): a used confirmation page, a
batch delete that takes jobs with it, waits nobody named, bulk resume's steps, selecting
rows, and the way back after an action."""

from __future__ import annotations

import os
import re

from jobs.models import Job
from mirror import facade as mirror
from steering.models import AdminAction, AdminActionItem
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_pages import confirm_and_execute, mirrored, payload_of

queue, people, job_in, new_batch = base.queue, base.people, base.job_in, base.new_batch


def batch_mirrored(store, bid):
    mirror.apply_batch(store.batches.get_batch(bid))


def held_batch_with_jobs(store) -> tuple[str, str, str]:
    """A Held batch with two Failed jobs (a Held job keeps the queue from deleting it)."""
    bid = new_batch(store)
    one = store.new_jobs.create_job(bid, {"collection": "demo"})
    two = store.new_jobs.create_job(bid, {"collection": "demo"})
    store.moves.transition_job(one, "Failed", "x")
    store.moves.transition_job(two, "Failed", "y")
    store.batch_moves.hold_batch(bid)
    mirrored(store, one, two)
    batch_mirrored(store, bid)
    return bid, one, two


# --- a used confirmation -------------------------------------------------------------------


def test_confirmation_and_result_pages_are_not_kept_by_the_browser(client, queue, people):
    jid = job_in(queue, "Pending")
    mirrored(queue, jid)
    client.force_login(people["operator"])
    page, done, _ = confirm_and_execute(client, "job.hold", f"ids={jid}")
    assert "no-store" in page["Cache-Control"]
    assert "no-store" in client.get(done.url)["Cache-Control"]


def test_a_used_confirmation_says_so_keeps_the_new_reason_and_offers_a_fresh_one(
    client, queue, people
):
    client.force_login(people["administrator"])
    _, first, data = confirm_and_execute(client, "queue.pause", "")
    record = AdminAction.objects.get()
    again = client.post("/actions/queue.pause/execute", {**data, "reason": "a second try"})
    body = again.content.decode()
    assert again.status_code == 409 and "already used" in body
    assert f'href="{first.url}"' in body and ">a second try</textarea>" in body
    assert payload_of(again) != data["payload"]  # a fresh confirmation
    assert AdminAction.objects.get() == record


def test_a_used_confirmation_that_no_longer_applies_acts_once_and_keeps_the_reason_shown(
    client, queue, people
):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    client.force_login(people["operator"])
    _, first, data = confirm_and_execute(client, "job.resume", f"ids={jid}")
    again = client.post("/actions/job.resume/execute", {**data, "reason": "a second try"})
    body = again.content.decode()
    assert again.status_code == 409 and "already used" in body and f'href="{first.url}"' in body
    assert "not recorded: “a second try”" in body
    assert AdminAction.objects.count() == 1 and queue.jobs.get_job(jid).retry_count == 1


def test_two_tabs_each_get_their_own_result(client, queue, people):
    bid = new_batch(queue)
    batch_mirrored(queue, bid)
    client.force_login(people["operator"])
    one = client.get(f"/actions/batch.hold/confirm?ids={bid}")
    two = client.get(f"/actions/batch.hold/confirm?ids={bid}")
    a = client.post("/actions/batch.hold/execute", {"payload": payload_of(one), "reason": "tab 1"})
    b = client.post("/actions/batch.hold/execute", {"payload": payload_of(two), "reason": "tab 2"})
    assert a.url != b.url
    second = AdminAction.objects.get(reason="tab 2")
    assert (second.done, second.skipped) == (0, 1)
    assert "tab 2" in client.get(b.url).content.decode()


# --- deleting a batch ------------------------------------------------------------------------


def test_batch_delete_lists_warns_audits_and_removes_each_job(client, queue, people, settings):
    bid, failed, held = held_batch_with_jobs(queue)
    for jid in (failed, held):
        os.makedirs(f"{settings.MQ_WORK_DIR}/jobs/{jid}")
    client.force_login(people["administrator"])
    page, done, _ = confirm_and_execute(client, "batch.delete", f"ids={bid}")
    body = page.content.decode()
    assert "cannot be undone" in body and "depositor is not notified" in body
    along = re.search(r'data-along="[^"]+">(.*?)</tr>', body, re.S).group(1)
    assert failed in along and held in along and "2 jobs" in along
    assert (
        queue.jobs.get_job(failed).status == "Deleted"
        and queue.jobs.get_job(held).status == "Deleted"
    )
    record = AdminAction.objects.get()
    assert (record.total, record.done) == (1, 1)
    rows = {i.item_id: i for i in AdminActionItem.objects.filter(part_of=bid)}
    assert set(rows) == {failed, held}
    assert (rows[held].before_status, rows[held].after_status) == ("Failed", "Deleted")
    assert not os.path.exists(f"{settings.MQ_WORK_DIR}/jobs/{failed}")
    assert not os.path.exists(f"{settings.MQ_WORK_DIR}/jobs/{held}")
    job_audit = client.get(f"/actions/?job={failed}").content.decode()
    assert f'data-action="{record.pk}"' in job_audit


# --- waits nobody named ----------------------------------------------------------------------


def test_releasing_a_batch_in_a_held_collection_says_it_will_be_held_again(client, queue, people):
    bid = new_batch(queue)
    queue.batch_moves.hold_batch(bid)
    batch_mirrored(queue, bid)
    queue.holds.hold_collection("demo")
    client.force_login(people["operator"])
    body = client.get(f"/actions/batch.release/confirm?ids={bid}").content.decode()
    assert "collection demo is on hold, so the batch will be held again" in body
    detail = client.get(f"/batches/{bid}/").content.decode()
    assert "Collection demo is on hold" in detail and "Release on the collection" in detail


def test_report_again_says_it_waits_for_the_held_job(client, queue, people):
    bid = new_batch(queue)
    held = queue.new_jobs.create_job(bid, {"collection": "demo"})
    queue.moves.transition_job(held, "Held")
    queue.batch_moves.transition_batch(bid, "Processing")
    queue.batch_moves.transition_batch(bid, "Failed", "x")
    mirrored(queue, held)
    batch_mirrored(queue, bid)
    client.force_login(people["operator"])
    body = client.get(f"/actions/batch.update_reporting/confirm?ids={bid}").content.decode()
    assert "the report waits while 1 of its jobs is Held" in body
    queue.batch_moves.transition_batch(bid, "UpdateReporting")
    batch_mirrored(queue, bid)
    detail = client.get(f"/batches/{bid}/").content.decode()
    assert "The report waits while 1 of its jobs is Held" in detail and "(Release)" in detail


# --- bulk resume, selecting rows ---------------------------------------------------------


def test_bulk_resume_offers_the_steps_common_to_the_selection(client, queue, people):
    storing, downloading = job_in(queue, "Storing"), job_in(queue, "Downloading")
    queue.moves.fail_job(storing, "storage down")
    queue.moves.fail_job(downloading, "network down")
    mirrored(queue, storing, downloading)
    client.force_login(people["operator"])
    ids = f"ids={storing},{downloading}"
    page, done, _ = confirm_and_execute(client, "job.resume", ids, step="Estimating")
    body = page.content.decode()
    assert "each job where it failed" in body and 'value="Estimating"' in body
    assert 'value="Storing"' not in body  # the Downloading job may not restart there
    assert queue.jobs.get_job(storing).status == "Estimating"
    assert queue.jobs.get_job(downloading).status == "Estimating"


def test_bulk_resume_where_each_failed_by_default(client, queue, people):
    storing, downloading = job_in(queue, "Storing"), job_in(queue, "Downloading")
    queue.moves.fail_job(storing, "storage down")
    queue.moves.fail_job(downloading, "network down")
    mirrored(queue, storing, downloading)
    client.force_login(people["operator"])
    confirm_and_execute(client, "job.resume", f"ids={storing},{downloading}", step="")
    assert queue.jobs.get_job(storing).status == "Storing"
    assert queue.jobs.get_job(downloading).status == "Downloading"


def test_lists_offer_select_all_and_viewers_see_no_checkboxes(client, queue, people):
    jid = job_in(queue, "Pending")
    mirrored(queue, jid)
    client.force_login(people["operator"])
    body = client.get("/jobs/").content.decode()
    assert 'data-select-all="mq-actions-job"' in body and "data-select " in body
    client.force_login(people["viewer"])
    for url in ("/jobs/", "/batches/"):
        body = client.get(url).content.decode()
        assert "data-select" not in body and jid in client.get("/jobs/").content.decode()


# --- the way back --------------------------------------------------------------------------


def test_the_result_links_back_to_the_filtered_list(client, queue, people):
    jid = job_in(queue, "Pending")
    mirrored(queue, jid)
    client.force_login(people["operator"])
    listing = "/jobs/?collection=demo&status=Pending"
    bar = client.get(listing).content.decode()
    assert 'name="next" value="/jobs/?collection=demo&amp;status=Pending"' in bar
    chosen = client.get(
        "/actions/choose", {"action": "job.hold", "mode": "selected", "ids": jid, "next": listing}
    )
    page = client.get(chosen.url)
    done = client.post(
        chosen.url.replace("/confirm", "/execute").split("?")[0],
        {"payload": payload_of(page), "reason": "check"},
    )
    result = client.get(done.url).content.decode()
    assert 'class="back" href="/jobs/?collection=demo&amp;status=Pending"' in result


def test_a_next_to_another_site_is_dropped(client, queue, people):
    jid = job_in(queue, "Pending")
    mirrored(queue, jid)
    client.force_login(people["operator"])
    query = f"ids={jid}&next=https://evil.example/&x=1"
    _, done, _ = confirm_and_execute(client, "job.hold", query)
    assert "next" not in done.url
    assert 'class="back"' not in client.get(done.url + "?next=//evil.example/").content.decode()
    assert Job.objects.get(jid=jid).status == "Held"


def test_every_scope_has_a_list_for_cancel_to_go_back_to():
    """The confirmation's Cancel falls back to its scope's list: a scope without one (the
    workers' drain, when it came) answered 500."""
    from steering.actions.kinds import Scope
    from steering.actions.views import LISTS

    assert set(LISTS) == set(Scope)
