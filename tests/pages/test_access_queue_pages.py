"""The access queue's pages: the list of both queues (filters, search, counts, pause), one
request (token fields, lock, message, history), the dashboard's counts, the Django admin
and the command, over what Merritt's access service wrote (the replay)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from access.models import AccessRequest
from mirror import access as mirrored
from steering.models import AdminAction
from tests.merrittzk_access import MerrittAccess
from tests.pages import test_steering_actions as base
from tests.pages.test_access_queue_steering import TOKEN, request_in, status_of

queue, people = base.queue, base.people


@pytest.fixture
def merritt(queue) -> MerrittAccess:
    zk = MerrittAccess(queue.client)
    zk.init_nodes()
    return zk


def mirror_all(queue) -> None:
    mirrored.refresh(queue.client)


def test_the_list_shows_both_queues_requests_with_their_token_fields_and_counts(
    client, merritt, queue, people
):
    failed = request_in(merritt, "Failed", url="https://merritt.example/dl/abc.zip")
    large = request_in(merritt, "Pending", "large", **{"delivery-node": 9502})
    q, qid = large.split("/")
    merritt.lock(q, qid)
    merritt.pause("large")
    mirror_all(queue)
    client.force_login(people["viewer"])
    body = client.get("/access/").content.decode()
    assert failed in body and large in body
    assert "assembly broke" in body and "9502" in body and "16.7" in body  # 17079 bytes
    assert "locked" in body and "data-refresh" in body
    small = body[body.index('data-queue="small"') :].split("</div>")[0]
    assert 'data-status="Failed" data-count="1"' in small and "running" in small
    big = body[body.index('data-queue="large"') :].split("</div>")[0]
    assert 'data-status="Pending" data-count="1"' in big and "paused" in big
    assert "access.pause/confirm" not in body, "a viewer is offered an action"
    assert "2 requests" in body


def test_filters_and_search(client, merritt, queue, people):
    failed = request_in(merritt, "Failed")
    done = request_in(merritt, "Completed", "large", token="bbbbbbbb-1111")
    mirror_all(queue)
    client.force_login(people["viewer"])

    def listed(query: str) -> set[str]:
        body = client.get(f"/access/?{query}").content.decode()
        return {k for k in (failed, done) if f">{k}<" in body}

    assert listed("queue=small") == {failed}
    assert listed("status=Completed") == {done}
    assert listed("status=Failed&status=Completed") == {failed, done}
    assert listed("q=bbbbbbbb-1111") == {done}
    assert listed(f"q={failed}") == {failed}
    assert failed in listed(f"q={int(failed.split('qid')[1])}"), "a qid without its zeros"
    assert listed("locked=yes") == set()
    assert listed("older_than=1") == set()
    assert listed("older_than=0") == {failed, done}


def test_the_detail_page_shows_token_lock_message_history_and_actions(
    client, merritt, queue, people
):
    key = request_in(
        merritt,
        "Processing",
        url="https://merritt.example/dl/x.zip",
        **{"anticipated-availability-time": "2026-11-28T10:00:00-08:00"},
    )
    mirror_all(queue)  # the mirror sees each status Merritt writes as it follows
    merritt.set_status(*key.split("/"), "Failed", "assembly broke")
    mirror_all(queue)
    client.force_login(people["operator"])
    body = client.get(f"/access/{key}/").content.decode()
    assert "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa" in body and "7777" in body
    assert "https://merritt.example/dl/x.zip" in body and "2026-11-28T10:00:00-08:00" in body
    assert "assembly broke" in body and "not locked" in body
    assert "Processing → Failed" in body and "Merritt access" in body
    assert f"/actions/access.requeue/confirm?ids={key.replace('/', '%2F')}" in body
    assert "access.pause" not in body
    assert client.get("/access/small/qid9999999999/").status_code == 404


def test_an_action_is_mirrored_at_once_and_shown_in_the_requests_history(
    client, merritt, queue, people
):
    from tests.pages.test_steering_pages import confirm_and_execute

    key = request_in(merritt, "Failed")
    mirror_all(queue)
    client.force_login(people["operator"])
    confirm_and_execute(client, "access.requeue", f"ids={key}", reason="node back")
    assert AccessRequest.objects.get(key=key).status == "Pending"
    body = client.get(f"/access/{key}/").content.decode()
    assert "Failed → Pending" in body and "node back" in body and "otto" in body


def test_the_dashboard_counts_each_queue_by_state_with_its_pause(client, merritt, queue, people):
    request_in(merritt, "Failed")
    request_in(merritt, "Failed")
    request_in(merritt, "Completed", "large")
    merritt.pause("small")
    mirror_all(queue)
    client.force_login(people["viewer"])
    body = client.get("/").content.decode()
    panel = body[body.index('id="access-queue"') :].split("</section>")[0]
    assert 'href="/access/?queue=small&amp;status=Failed"' in panel
    small = panel[panel.index('data-queue="small"') :].split("</tr>")[0]
    assert 'data-status="Failed" data-count="2"' in small and "paused" in small
    large = panel[panel.index('data-queue="large"') :].split("</tr>")[0]
    assert 'data-status="Completed" data-count="1"' in large and "running" in large


def test_the_django_admin_lists_requests_read_only_and_routes_actions_to_confirmation(
    client, merritt, queue, django_user_model
):
    key = request_in(merritt, "Failed")
    mirror_all(queue)
    root = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(root)
    listing = client.get("/admin/access/accessrequest/")
    assert listing.status_code == 200 and key in listing.content.decode()
    row = AccessRequest.objects.get(key=key)
    moved = client.post(
        "/admin/access/accessrequest/",
        {"action": "confirm_access_requeue", "_selected_action": [row.pk]},
    )
    assert moved.status_code == 302 and moved.url.startswith("/actions/access.requeue/confirm?")
    assert client.get("/admin/access/accessrequest/add/").status_code == 403
    assert status_of(merritt, key) == "Failed"


def test_the_command_lists_shows_and_steers_with_a_dry_run(merritt, queue, people):
    key = request_in(merritt, "Failed")
    done = request_in(merritt, "Completed", "large")
    out = StringIO()
    call_command("access", "list", stdout=out)
    text = out.getvalue()
    assert "small queue: running" in text and key in text and "Failed" in text and done in text
    out = StringIO()
    call_command("access", "show", key, stdout=out)
    assert TOKEN["token"] in out.getvalue() and "assembly broke" in out.getvalue()
    out = StringIO()
    call_command("access", "requeue", key, "--user", "otto", "--dry-run", stdout=out)
    assert "applies" in out.getvalue() and "Dry run: nothing was changed." in out.getvalue()
    assert status_of(merritt, key) == "Failed" and not AdminAction.objects.exists()
    with pytest.raises(CommandError, match="--reason is required"):
        call_command("access", "requeue", key, "--user", "otto")
    with pytest.raises(CommandError, match="needs the operator role"):
        call_command("access", "requeue", key, "--user", "vera", "--reason", "x")
    out = StringIO()
    call_command("access", "requeue", key, "--user", "otto", "--reason", "retry", stdout=out)
    assert f"{key}: done" in out.getvalue() and status_of(merritt, key) == "Pending"
    call_command("access", "pause", "large", "--user", "otto", "--reason", "x", stdout=out)
    assert merritt.paused("large")
    call_command("access", "unpause", "large", "--user", "otto", "--reason", "x", stdout=out)
    assert not merritt.paused("large")
    out = StringIO()
    call_command(
        "access", "cleanup", "--older-than", "7d", "--user", "otto", "--reason", "x", stdout=out
    )
    assert "changed less than 7 days" in out.getvalue() and "Nothing to do." in out.getvalue()
    out = StringIO()
    call_command(
        "access", "cleanup", "--older-than", "0", "--user", "otto", "--reason", "x", stdout=out
    )
    assert f"{done}: done" in out.getvalue()
    assert merritt.list_jobs("large") == []


@pytest.mark.parametrize("days", ["800000", "1e11", "36501"])
def test_an_older_than_past_a_century_is_an_invalid_filter_not_an_error(
    client, merritt, queue, people, days
):
    failed = request_in(merritt, "Failed")
    mirror_all(queue)
    client.force_login(people["operator"])
    page = client.get(f"/access/?older_than={days}")
    assert page.status_code == 200 and f">{failed}<" not in page.content.decode()
    assert "36500" in page.content.decode()
    api = client.get(f"/api/v1/access?older_than={days}", **_auth(people["viewer"]))
    assert api.status_code == 400 and "36500" in json.dumps(api.json())
    confirm = client.get(f"/actions/access.cleanup/confirm?all=1&older_than={days}")
    assert confirm.status_code < 500


def _auth(user) -> dict:
    from batches.models import ApiToken

    return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(user, 'tests')[1]}"}
