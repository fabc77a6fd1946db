"""A destructive update decided over the API and by ``manage.py approve_update``: the same
rules as the pages (role, collection, reason, version shown, one decision per confirm)."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from batches.models import ApiToken
from merritt_queue.core import review
from steering.models import AdminAction, CollectionScope
from tests.pages import test_steering_actions as base
from tests.pages.test_preservation_destructive_pages import awaiting_job

queue, people, job_in = base.queue, base.people, base.job_in


def bearer(user) -> dict:
    return {"Authorization": f"Bearer {ApiToken.issue(user, 'tests')[1]}"}


def test_get_shows_the_diff_and_a_confirm_to_an_operator(client, queue, people):
    jid = awaiting_job(queue)
    got = client.get(f"/api/v1/jobs/{jid}/review", headers=bearer(people["operator"])).json()
    assert got["awaiting_approval"] is True and got["status"] == "Held"
    assert got["review"]["totals"]["deleted"] == {"files": 1, "bytes": 10}
    assert got["confirm"]
    viewer = client.get(f"/api/v1/jobs/{jid}/review", headers=bearer(people["viewer"])).json()
    assert "confirm" not in viewer and "operator role" in viewer["may_decide"]


def test_post_approves_once_on_the_version_shown(client, queue, people):
    jid = awaiting_job(queue)
    headers = bearer(people["operator"])
    confirm = client.get(f"/api/v1/jobs/{jid}/review", headers=headers).json()["confirm"]
    fields = {"confirm": confirm, "decision": "approve", "reason": "looked at it"}
    done = client.post(f"/api/v1/jobs/{jid}/review", fields, headers=headers)
    assert done.status_code == 200, done.content
    body = done.json()
    assert body["result"] == "done" and body["status"] == "Storing" and not body["repeated"]
    assert queue.jobs.get_job(jid).store[review.KEY]["by"] == "otto"
    again = client.post(f"/api/v1/jobs/{jid}/review", fields, headers=headers).json()
    assert again["repeated"] and again["admin_action"] == body["admin_action"]
    assert AdminAction.objects.count() == 1


def test_post_refusals_are_clear(client, queue, people):
    jid = awaiting_job(queue)
    headers = bearer(people["operator"])
    confirm = client.get(f"/api/v1/jobs/{jid}/review", headers=headers).json()["confirm"]
    url = f"/api/v1/jobs/{jid}/review"
    no_reason = client.post(
        url, {"confirm": confirm, "decision": "reject", "reason": ""}, headers=headers
    )
    assert no_reason.status_code == 400 and "reason is required" in no_reason.json()["errors"][0]
    bad = client.post(
        url, {"confirm": confirm + "x", "decision": "reject", "reason": "r"}, headers=headers
    )
    assert bad.status_code == 400 and "not valid" in bad.json()["errors"][0]
    # Changed since it was shown: skipped, not decided.
    review.approve(queue, queue.jobs.get_job(jid), "someone", "first")
    late = client.post(
        url, {"confirm": confirm, "decision": "reject", "reason": "r"}, headers=headers
    ).json()
    assert late["result"] == "skipped" and queue.jobs.get_job(jid).status == "Storing"
    # A job of a collection outside the person's: shown, not decided.
    CollectionScope.objects.create(user=people["operator"], collections=["other"])
    other = client.get(f"/api/v1/jobs/{awaiting_job(queue)}/review", headers=headers).json()
    assert "confirm" not in other and "outside your collections" in other["may_decide"]
    unknown = client.get("/api/v1/jobs/jid9999999999/review", headers=headers)
    assert unknown.status_code == 404


def test_the_command_rejects_with_the_reason_audited(queue, people):
    jid = awaiting_job(queue)
    out = io.StringIO()
    call_command("approve_update", jid, user="otto", reason="keep it", reject=True, stdout=out)
    text = out.getvalue()
    assert "producer/gone.txt" in text and f"{jid}: done" in text
    job = queue.jobs.get_job(jid)
    assert job.status == "Failed" and "rejected by otto: keep it" in job.message
    assert AdminAction.objects.get().action == "job.reject_update"


def test_the_command_refuses_clearly(queue, people):
    jid = awaiting_job(queue)
    with pytest.raises(CommandError, match="--reason is required"):
        call_command("approve_update", jid, user="otto", stdout=io.StringIO())
    with pytest.raises(CommandError, match="operator role"):
        call_command("approve_update", jid, user="vera", reason="r", stdout=io.StringIO())
    held = job_in(queue, "Held")
    with pytest.raises(CommandError, match="not awaiting approval"):
        call_command("approve_update", held, user="otto", reason="r", stdout=io.StringIO())
    out = io.StringIO()
    call_command("approve_update", jid, user="otto", dry_run=True, stdout=out)
    assert "Dry run" in out.getvalue() and queue.jobs.get_job(jid).status == "Held"
