"""Admin actions through the web: confirmation, execution, result, audit trail."""

from __future__ import annotations

import re

from django.core import signing

from jobs.models import Job
from mirror import facade as mirror
from steering.models import AdminAction
from tests.pages import test_steering_actions as base

queue, people, job_in = base.queue, base.people, base.job_in  # the same fixtures and helper

PAYLOAD = re.compile(r'name="payload" value="([^"]+)"')


def mirrored(store, *jids):
    for jid in jids:
        mirror.apply_job(store.jobs.get_job(jid))


def payload_of(response) -> str:
    return PAYLOAD.search(response.content.decode()).group(1)


def confirm_and_execute(client, name, query, reason="librarian asked", **extra):
    page = client.get(f"/actions/{name}/confirm?{query}")
    assert page.status_code == 200, page.content
    data = {"payload": payload_of(page), "reason": reason, **extra}
    return page, client.post(f"/actions/{name}/execute", data), data


def test_hold_a_job_from_its_page(client, queue, people):
    jid = job_in(queue, "Pending")
    mirrored(queue, jid)
    client.force_login(people["operator"])
    detail = client.get(f"/jobs/{jid}/").content.decode()
    assert f"/actions/job.hold/confirm?ids={jid}" in detail
    assert "job.release/confirm" not in detail and "job.force_fail" not in detail
    page, done, _ = confirm_and_execute(client, "job.hold", f"ids={jid}")
    body = page.content.decode()
    assert "data-confirm-open" in body and jid in body and 'name="reason"' in body
    record = AdminAction.objects.get()
    assert done.status_code == 302 and done.url == f"/actions/{record.pk}/"
    assert queue.jobs.get_job(jid).status == "Held"
    result = client.get(done.url).content.decode()
    assert "1 done" in result and "Pending" in result and "Held" in result
    assert Job.objects.get(jid=jid).status == "Held"  # the mirror followed
    timeline = client.get(f"/jobs/{jid}/").content.decode()
    assert "librarian asked" in timeline and f"/actions/?job={jid}" in timeline


def test_a_job_in_a_wrong_state_is_listed_as_not_applicable_and_nothing_is_written(
    client, queue, people
):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    version = queue.jobs.get_job(jid).status_version
    client.force_login(people["operator"])
    body = client.get(f"/actions/job.hold/confirm?ids={jid}").content.decode()
    assert "it is Failed; hold applies to Pending" in body
    assert 'name="payload"' not in body and "applies to none" in body
    assert AdminAction.objects.count() == 0 and queue.jobs.get_job(jid).status_version == version


def test_bulk_resume_of_all_matching_skips_the_one_that_changed(client, queue, people):
    jids = [job_in(queue, "Failed", "bulk") for _ in range(3)]
    other = job_in(queue, "Failed", "elsewhere")
    mirrored(queue, *jids, other)
    client.force_login(people["operator"])
    page = client.get("/actions/job.resume/confirm?all=1&collection=bulk&status=Failed")
    body = page.content.decode()
    assert "All <strong>3</strong> items" in body and other not in body
    assert "applies to <strong>3</strong>" in body
    queue.edits.resume_job(jids[1], message="someone else")  # changes between page and submit
    queue.moves.fail_job(jids[1], "again")
    done = client.post(
        "/actions/job.resume/execute", {"payload": payload_of(page), "reason": "storage back"}
    )
    record = AdminAction.objects.get()
    assert done.url == f"/actions/{record.pk}/"
    assert (record.done, record.skipped, record.selection) == (
        2,
        1,
        "collection=bulk&status=Failed",
    )
    assert (
        queue.jobs.get_job(jids[1]).status == "Failed"
        and queue.jobs.get_job(jids[0]).status == "Pending"
    )
    result = client.get(done.url).content.decode()
    assert "changed since the page was shown" in result


def test_resume_one_job_offers_the_steps(client, queue, people):
    jid = job_in(queue, "Storing")
    queue.moves.fail_job(jid, "storage down")
    mirrored(queue, jid)
    client.force_login(people["operator"])
    page, done, _ = confirm_and_execute(client, "job.resume", f"ids={jid}", step="Downloading")
    body = page.content.decode()
    assert (
        'value="Downloading"' in body
        and "Storing (where it failed) — runs again: Storing, Recording, Notify" in body
    )
    assert queue.jobs.get_job(jid).status == "Downloading"
    assert AdminAction.objects.get().params == {"step": "Downloading"}


def test_a_double_post_acts_once(client, queue, people):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    client.force_login(people["operator"])
    _, first, data = confirm_and_execute(client, "job.resume", f"ids={jid}")
    again = client.post("/actions/job.resume/execute", data)
    assert again.status_code == 409 and first.url in again.content.decode()
    assert AdminAction.objects.count() == 1 and queue.jobs.get_job(jid).retry_count == 1


def test_missing_reason_shows_the_confirmation_again(client, queue, people):
    jid = job_in(queue, "Pending")
    mirrored(queue, jid)
    client.force_login(people["operator"])
    page, again, _ = confirm_and_execute(client, "job.hold", f"ids={jid}", reason="  ")
    assert again.status_code == 400 and "A reason is required" in again.content.decode()
    assert AdminAction.objects.count() == 0 and queue.jobs.get_job(jid).status == "Pending"


def test_a_viewer_is_refused_on_confirm_and_on_a_direct_post(client, queue, people):
    jid = job_in(queue, "Pending")
    mirrored(queue, jid)
    client.force_login(people["operator"])
    payload = payload_of(client.get(f"/actions/job.hold/confirm?ids={jid}"))
    client.force_login(people["viewer"])
    refused = client.get(f"/actions/job.hold/confirm?ids={jid}")
    assert refused.status_code == 403 and "needs the operator role" in refused.content.decode()
    forged = signing.loads(payload, salt="steering.confirm")
    forged["user"] = people["viewer"].pk
    posted = client.post(
        "/actions/job.hold/execute",
        {"payload": signing.dumps(forged, salt="steering.confirm", compress=True), "reason": "x"},
    )
    assert posted.status_code == 403
    # Someone else's confirmation is not theirs to submit either.
    stolen = client.post("/actions/job.hold/execute", {"payload": payload, "reason": "x"})
    assert stolen.status_code == 400
    assert AdminAction.objects.count() == 0 and queue.jobs.get_job(jid).status == "Pending"
    assert "/actions/job.hold/confirm" not in client.get(f"/jobs/{jid}/").content.decode()


def test_a_tampered_payload_is_refused(client, queue, people):
    jid, other = job_in(queue, "Pending"), job_in(queue, "Pending")
    mirrored(queue, jid, other)
    client.force_login(people["operator"])
    payload = payload_of(client.get(f"/actions/job.hold/confirm?ids={jid}"))
    value, stamp, signature = payload.rsplit(":", 2)
    changed = signing.loads(payload, salt="steering.confirm")
    changed["items"] = [[other, queue.jobs.get_job(other).status_version]]
    swapped = signing.dumps(changed, salt="steering.confirm", compress=True).rsplit(":", 2)[0]
    resigned = signing.dumps(changed, key="not the secret", salt="steering.confirm")
    for bad in (payload[:-2] + "xx", "garbage", f"{swapped}:{stamp}:{signature}", resigned):
        response = client.post("/actions/job.hold/execute", {"payload": bad, "reason": "x"})
        assert response.status_code == 400
    # The payload signed for one action cannot run another.
    response = client.post("/actions/job.delete/execute", {"payload": payload, "reason": "x"})
    assert response.status_code == 400
    assert AdminAction.objects.count() == 0
    assert queue.jobs.get_job(jid).status == queue.jobs.get_job(other).status == "Pending"


def test_read_only_refuses(client, queue, people, settings):
    jid = job_in(queue, "Pending")
    mirrored(queue, jid)
    client.force_login(people["administrator"])
    payload = payload_of(client.get(f"/actions/job.hold/confirm?ids={jid}"))
    settings.READ_ONLY = True
    page = client.get(f"/actions/job.hold/confirm?ids={jid}")
    assert page.status_code == 403 and "read-only" in page.content.decode()
    posted = client.post("/actions/job.hold/execute", {"payload": payload, "reason": "x"})
    assert posted.status_code == 403
    assert AdminAction.objects.count() == 0 and queue.jobs.get_job(jid).status == "Pending"


def test_anonymous_goes_to_the_login_page(client, db):
    for response in (
        client.get("/actions/job.hold/confirm?ids=jid0000000001"),
        client.post("/actions/job.hold/execute", {"payload": "x", "reason": "x"}),
        client.get("/actions/"),
    ):
        assert response.status_code == 302 and "/accounts/login/" in response.url


def test_execute_is_post_only(client, people):
    client.force_login(people["administrator"])
    assert client.get("/actions/job.hold/execute").status_code == 405


def test_queue_and_collection_actions_from_their_pages(client, queue, people):
    client.force_login(people["administrator"])
    locks = client.get("/locks/").content.decode()
    assert "/actions/queue.pause/confirm" in locks
    confirm_and_execute(client, "queue.pause", "", reason="maintenance")
    assert queue.pause.queue_paused()
    confirm_and_execute(client, "collection.hold", "ids=demo", reason="audit")
    assert queue.holds.is_collection_held("demo")
    assert AdminAction.objects.filter(action="collection.hold").get().items.get().item_id == "demo"


# --- buttons and action bars ------------------------------------------------------------


def test_lists_have_selection_boxes_and_an_action_bar(client, queue, people):
    jid = job_in(queue, "Failed", "bar")
    mirrored(queue, jid)
    client.force_login(people["operator"])
    body = client.get("/jobs/?collection=bar").content.decode()
    assert f'data-select name="ids" value="{jid}" form="mq-actions-job"' in body
    assert 'id="mq-actions-job"' in body and 'value="job.resume"' in body
    assert 'value="job.force_fail"' not in body  # an administrator's action
    assert 'name="collection" value="bar"' in body and "On all 1 matching" in body
    chosen = client.get("/actions/choose?action=job.resume&mode=all&collection=bar&page=2")
    assert chosen.url == "/actions/job.resume/confirm?all=1&collection=bar"
    chosen = client.get(f"/actions/choose?action=job.resume&mode=selected&ids={jid}")
    assert chosen.url == f"/actions/job.resume/confirm?ids={jid}"
    assert 'data-select name="ids"' in client.get("/batches/").content.decode()
    client.force_login(people["viewer"])
    assert 'id="mq-actions-job"' not in client.get("/jobs/").content.decode()


def test_batch_page_offers_its_actions(client, queue, people):
    bid = queue.new_batches.create_batch({"batchID": "b-x", "collection": "demo"}).id
    mirror.apply_batch(queue.batches.get_batch(bid))
    client.force_login(people["administrator"])
    body = client.get(f"/batches/{bid}/").content.decode()
    assert f"/actions/batch.hold/confirm?ids={bid}" in body
    assert "batch.purge" not in body and f"/actions/?batch={bid}" in body


def test_collections_and_locks_pages_link_to_their_actions(client, queue, people):
    jid = job_in(queue, "Pending", "coll")
    mirrored(queue, jid)
    client.force_login(people["administrator"])
    body = client.get("/collections/").content.decode()
    assert "/actions/collection.hold/confirm?ids=coll" in body
    assert "/actions/?collection=coll" in body
    client.force_login(people["operator"])
    assert "/actions/collection.hold/" not in client.get("/collections/").content.decode()
    assert "/actions/queue.pause/" not in client.get("/locks/").content.decode()


# --- the audit trail ---------------------------------------------------------------------


def test_the_audit_trail_lists_filters_and_exports(client, queue, people):
    held, other = job_in(queue, "Pending"), job_in(queue, "Failed", "other")
    mirrored(queue, held, other)
    client.force_login(people["administrator"])
    confirm_and_execute(client, "job.hold", f"ids={held}", reason="=cmd|evil")
    confirm_and_execute(client, "job.delete", f"ids={other}", reason="gone")

    def rows(url):
        return client.get(url).content.decode().split('class="mq-table audit"')[1]

    body = rows("/actions/")
    assert body.index("job.delete") < body.index("job.hold")  # newest first
    only = rows(f"/actions/?job={held}")
    assert "job.hold" in only and "job.delete" not in only
    assert "job.delete" in rows("/actions/?collection=other")
    assert "job.hold" not in rows("/actions/?user=ada&action=job.delete")
    csv_text = client.get(f"/actions/export.csv?job={held}").content.decode()
    lines = csv_text.strip().splitlines()
    assert lines[0].startswith("when,who,action,reason,item") and len(lines) == 2
    assert f"ada,job.hold,'=cmd|evil,{held},demo,Pending," in lines[1]
    assert ",Held," in lines[1] and lines[1].endswith(",done,")


# --- Django admin --------------------------------------------------------------------------


def test_django_admin_is_read_only_and_its_actions_go_to_the_confirmation(client, queue, people):
    jid = job_in(queue, "Pending")
    mirrored(queue, jid)
    admin = people["administrator"]
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    assert client.get("/admin/jobs/job/").status_code == 200
    assert client.get("/admin/jobs/job/add/").status_code == 403
    pk = Job.objects.get(jid=jid).pk
    response = client.post(
        "/admin/jobs/job/", {"action": "confirm_job_hold", "_selected_action": [pk]}
    )
    assert response.status_code == 302 and response.url == f"/actions/job.hold/confirm?ids={jid}"
    assert queue.jobs.get_job(jid).status == "Pending"
    assert client.get("/admin/steering/adminaction/").status_code == 200


# --- cleanup -------------------------------------------------------------------------------


def test_cleanup_purges_old_finished_items_and_stale_directories(
    queue, people, settings, monkeypatch
):
    import io
    import os
    from datetime import timedelta
    from types import SimpleNamespace

    from django.core.management import call_command
    from django.utils import timezone

    from steering.management.commands import cleanup

    done_bid = queue.new_batches.create_batch({"batchID": "old", "collection": "demo"}).id
    done_jid = queue.new_jobs.create_job(done_bid, {"collection": "demo"})
    queue.moves.transition_job(done_jid, "Failed", "x")
    queue.batch_moves.transition_batch(done_bid, "Held")
    queue.batch_moves.transition_batch(done_bid, "Deleted")
    deleted = job_in(queue, "Deleted")
    kept = job_in(queue, "Failed")
    work = settings.MQ_WORK_DIR + "/jobs/"
    for name in (kept, "jid0000009999"):
        os.makedirs(work + name)
    later = timezone.now() + timedelta(days=8)
    monkeypatch.setattr(cleanup, "timezone", SimpleNamespace(now=lambda: later))

    out = io.StringIO()
    call_command("cleanup", "--older-than", "7d", "--dry-run", stdout=out)
    assert "Dry run: 3 item(s) would remove" in out.getvalue()
    assert queue.jobs.get_job(deleted).status == "Deleted" and os.path.isdir(work + "jid0000009999")
    assert AdminAction.objects.count() == 0

    monkeypatch.setattr(cleanup, "timezone", SimpleNamespace(now=timezone.now))
    out = io.StringIO()
    call_command("cleanup", "--older-than", "7d", stdout=out)
    # Nothing is old enough yet; an orphaned working directory goes whatever its age.
    assert "1 item(s) removed" in out.getvalue() and queue.jobs.get_job(deleted).status == "Deleted"
    assert not os.path.exists(work + "jid0000009999") and os.path.isdir(work + kept)

    monkeypatch.setattr(cleanup, "timezone", SimpleNamespace(now=lambda: later))
    out = io.StringIO()
    call_command("cleanup", "--older-than", "7d", stdout=out)
    text = out.getvalue()
    assert f"{done_bid} (Deleted): removed with 1 job(s)" in text
    assert f"{deleted} (Deleted): removed" in text
    assert set(queue.jobs.list_job_ids()) == {kept} and queue.batches.list_batch_ids() != []
    assert os.path.isdir(work + kept)
    record = AdminAction.objects.get(username="cleanup", done=2)
    assert record.user is None and record.items.count() == 2


def test_cleanup_keeps_the_working_directory_of_a_job_created_while_it_runs(queue, settings):
    """A job created after cleanup listed the jobs, its working directory made before cleanup
    looked at the directories: the directory is its job's, not an orphan."""
    import os
    from datetime import timedelta

    from django.utils import timezone

    from steering.maintenance.cleanup import Cleanup

    work = settings.MQ_WORK_DIR + "/jobs/"
    os.makedirs(work, exist_ok=True)
    bid = base.new_batch(queue)
    listing = queue.jobs.list_job_ids

    def listed_then_a_job_starts():
        jids = listing()
        # and a worker makes its directory
        jid = queue.new_jobs.create_job(bid, {"collection": "demo"})
        os.makedirs(work + jid)
        return jids

    queue.jobs.list_job_ids = listed_then_a_job_starts
    try:
        Cleanup(queue, timezone.now() - timedelta(days=7), dry_run=False).run()
    finally:
        del queue.jobs.list_job_ids
    for jid in queue.jobs.list_job_ids():
        assert os.path.isdir(work + jid), f"the working directory of live job {jid} was removed"
