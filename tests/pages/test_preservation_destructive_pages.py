"""Approving or rejecting a destructive update from the web UI: the job page's diff, the
confirmation pages, the refusals, the audit, the jobs list's filter and the dashboard count."""

from __future__ import annotations

from jobs.models import Job
from merritt_queue.core import review
from steering.models import AdminAction, AdminActionItem, CollectionScope
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_pages import confirm_and_execute, mirrored, payload_of

queue, people, job_in = base.queue, base.people, base.job_in

DIFF = {
    "version": 1,
    "mode": "update",
    "current_files": 3,
    "current_bytes": 30,
    "replaced_share": 0.0,
    "totals": {
        "added": {"files": 1, "bytes": 5},
        "replaced": {"files": 0, "bytes": 0},
        "carried": {"files": 2, "bytes": 20},
        "deleted": {"files": 1, "bytes": 10},
    },
    "files": {
        "added": [["producer/c.txt", None, 5]],
        "replaced": [],
        "carried": [["producer/b.txt", 20, 20]],
        "deleted": [["producer/gone.txt", 10, None]],
        "left_out": 0,
    },
    "why": ["it deletes 1 file(s), 10 bytes"],
}


def awaiting_job(store, collection="demo", diff=DIFF) -> str:
    """A job held after Processing with its diff, as Processing leaves it."""
    jid = job_in(store, "Processing", collection)
    job = store.jobs.get_job(jid)
    data = {"store": {"manifest_url": "file:///x", "mode": "update/local/ark", "delete": ""}}
    data["store"][review.KEY] = diff
    store.moves.transition_job(job, "Held", f"{review.WAITING}: {diff['why'][0]}", data=data)
    mirrored(store, jid)
    return jid


def test_the_job_page_shows_the_diff_with_approve_and_reject(client, queue, people):
    jid = awaiting_job(queue)
    client.force_login(people["operator"])
    page = client.get(f"/jobs/{jid}/").content.decode()
    assert "Destructive update" in page and "Awaiting approval" in page
    assert "producer/gone.txt" in page and "producer/c.txt" in page
    assert f"/actions/job.approve_update/confirm?ids={jid}" in page
    assert f"/actions/job.reject_update/confirm?ids={jid}" in page
    # A viewer sees the diff, not the buttons.
    client.force_login(people["viewer"])
    page = client.get(f"/jobs/{jid}/").content.decode()
    assert "producer/gone.txt" in page and "job.approve_update" not in page


def test_an_object_only_merritt_may_hold_shows_it_was_not_compared(client, queue, people):
    unknown = DIFF | {"version": None, "current_files": 0, "current_bytes": 0}
    jid = awaiting_job(queue, diff=unknown | {"why": ["current version unknown: ..."]})
    client.force_login(people["operator"])
    page = client.get(f"/jobs/{jid}/").content.decode()
    assert "Not compared" in page and "none (unknown)" in page


def test_approve_moves_the_job_to_storing_audited_once(client, queue, people):
    jid = awaiting_job(queue)
    client.force_login(people["operator"])
    page, done, data = confirm_and_execute(
        client, "job.approve_update", f"ids={jid}", reason="depositor confirmed"
    )
    assert done.status_code == 302, done.content
    job = queue.jobs.get_job(jid)
    assert job.status == "Storing" and job.last_successful_status == "Processing"
    assert job.store[review.KEY]["decision"] == "approved"
    assert job.store[review.KEY]["by"] == "otto"
    assert job.store[review.KEY]["reason"] == "depositor confirmed"
    record = AdminAction.objects.get(action="job.approve_update")
    assert record.reason == "depositor confirmed" and record.done == 1
    item = AdminActionItem.objects.get(admin_action=record)
    assert (item.before_status, item.after_status) == ("Held", "Storing")
    # A double click does nothing twice.
    again = client.post("/actions/job.approve_update/execute", data)
    assert again.status_code in (302, 409)
    assert AdminAction.objects.filter(action="job.approve_update").count() == 1


def test_reject_fails_the_job_with_the_reason(client, queue, people):
    jid = awaiting_job(queue)
    client.force_login(people["operator"])
    confirm_and_execute(client, "job.reject_update", f"ids={jid}", reason="keep gone.txt")
    job = queue.jobs.get_job(jid)
    assert job.status == "Failed"
    assert "destructive update rejected by otto: keep gone.txt" in job.message
    assert job.store[review.KEY]["decision"] == "rejected"


def test_a_reason_is_required(client, queue, people):
    jid = awaiting_job(queue)
    client.force_login(people["operator"])
    page = client.get(f"/actions/job.approve_update/confirm?ids={jid}")
    done = client.post(
        "/actions/job.approve_update/execute", {"payload": payload_of(page), "reason": " "}
    )
    assert done.status_code == 400 and "reason is required" in done.content.decode().lower()
    assert queue.jobs.get_job(jid).status == "Held"


def test_a_viewer_and_another_collections_operator_are_refused(client, queue, people):
    jid = awaiting_job(queue)
    client.force_login(people["viewer"])
    page = client.get(f"/actions/job.approve_update/confirm?ids={jid}")
    assert page.status_code == 403
    operator = people["operator"]
    CollectionScope.objects.create(user=operator, collections=["other"])
    client.force_login(operator)
    page = client.get(f"/actions/job.approve_update/confirm?ids={jid}").content.decode()
    assert "outside your collections" in page
    assert queue.jobs.get_job(jid).status == "Held"


def test_a_held_job_awaiting_nothing_is_refused_with_why(client, queue, people):
    jid = job_in(queue, "Held")
    mirrored(queue, jid)
    client.force_login(people["operator"])
    detail = client.get(f"/jobs/{jid}/").content.decode()
    assert "job.approve_update" not in detail and "job.release/confirm" in detail
    page = client.get(f"/actions/job.approve_update/confirm?ids={jid}").content.decode()
    assert "not awaiting approval of a destructive update" in page
    assert queue.jobs.get_job(jid).status == "Held"


def test_a_job_changed_since_the_page_is_skipped(client, queue, people):
    jid = awaiting_job(queue)
    client.force_login(people["operator"])
    page = client.get(f"/actions/job.reject_update/confirm?ids={jid}")
    review.approve(queue, queue.jobs.get_job(jid), "someone", "first")
    client.post(
        "/actions/job.reject_update/execute", {"payload": payload_of(page), "reason": "late"}
    )
    assert queue.jobs.get_job(jid).status == "Storing"
    item = AdminActionItem.objects.get(admin_action__action="job.reject_update")
    assert item.result == "skipped"


def test_the_jobs_list_filters_and_the_dashboard_counts_awaiting_approval(client, queue, people):
    jid = awaiting_job(queue)
    other = job_in(queue, "Held")
    mirrored(queue, other)
    client.force_login(people["viewer"])
    listed = client.get("/jobs/?awaiting=1").content.decode()
    assert jid in listed and other not in listed
    home = client.get("/").content.decode()
    assert "/jobs/?awaiting=1" in home
    assert "1</strong> job awaiting approval" in home


def test_the_django_admin_filters_them_and_its_action_asks_for_confirmation(
    client, queue, people, django_user_model
):
    jid = awaiting_job(queue)
    other = job_in(queue, "Held")
    mirrored(queue, other)
    root = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(root)
    listed = client.get("/admin/jobs/job/?awaiting=1").content.decode()
    assert jid in listed and other not in listed
    assert "Approve the update (confirm first)" in listed
    pk = Job.objects.get(jid=jid).pk
    chosen = client.post(
        "/admin/jobs/job/",
        {"action": "confirm_job_approve_update", "_selected_action": [pk]},
    )
    assert chosen.status_code == 302
    assert chosen.url.startswith("/actions/job.approve_update/confirm?ids=" + jid)


def test_the_job_page_says_what_it_waits_for(client, queue, people):
    jid = awaiting_job(queue)
    client.force_login(people["viewer"])
    page = client.get(f"/jobs/{jid}/").content.decode()
    assert "when an operator approves or rejects its update" in page
