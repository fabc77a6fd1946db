"""One cause, many jobs: a selection of failed jobs edited and resumed at once (a URL prefix
replaced, a digest algorithm set), each job previewed, confirmed with one reason, committed
with its own version check and recorded as one admin action over the jobs; and a resume of
jobs that failed the same way says so and offers that edit."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import Group

from jobs.models import Job
from mirror import facade as mirror
from steering.models import AdminAction
from tests.pages.test_steering_edit import failed_job, payload_of

EDIT = "job.edit_resume"
OLD, NEW = "http://127.0.0.1:9/old/", "http://127.0.0.1:9/moved/"


@pytest.fixture
def operator(django_user_model, settings):
    settings.MQ_ALLOW_LOOPBACK = True  # the URLs below are on loopback, as a test's server is
    user = django_user_model.objects.create_user("otto", password="pw")
    user.groups.set([Group.objects.get_or_create(name="operator")[0]])
    return user


def three_404s(store) -> list[str]:
    """Three jobs that failed fetching from one folder, and one from elsewhere."""
    jids = [failed_job(store, payload_url=f"{OLD}{name}.jpg") for name in ("a", "b", "c")]
    return jids + [failed_job(store, payload_url="http://127.0.0.1:9/other/d.jpg")]


def selection(jids) -> str:
    return f"/actions/{EDIT}/selection/?ids={','.join(jids)}&next=/jobs/"


def preview(client, jids, **form):
    return client.post(selection(jids), {"url_from": "", "url_to": "", "digest_type": ""} | form)


def test_a_moved_folder_is_fixed_for_every_job_in_one_edit(process_store, client, operator):
    jids = three_404s(process_store)
    client.force_login(operator)
    shown = client.get(selection(jids))
    assert shown.status_code == 200
    body = shown.content.decode()
    assert all(jid in body for jid in jids) and f"{OLD}a.jpg" in body
    assert 'name="url_from" value=' not in body  # they share no folder beyond the host
    shown = client.get(selection(jids[:3])).content.decode()
    assert f'name="url_from" value="{OLD}"' in shown

    page = preview(client, jids, url_from=OLD, url_to=NEW)
    body = page.content.decode()
    assert page.status_code == 200, body
    for name in ("a", "b", "c"):
        assert f"{OLD}{name}.jpg" in body and f"{NEW}{name}.jpg" in body
    left_out = re.search(rf'data-item="{jids[3]}">.*?</tr>', body, re.S).group(0)
    assert "does not start with" in left_out
    assert "Edit and resume 3 jobs" in body and body.count('name="reason"') == 1

    again = client.post(f"/actions/{EDIT}/execute", {"payload": payload_of(page), "reason": ""})
    assert again.status_code == 400 and "A reason is required" in again.content.decode()
    assert "Edit and resume 3 jobs" in again.content.decode()
    done = client.post(
        f"/actions/{EDIT}/execute", {"payload": payload_of(page), "reason": "the folder moved"}
    )
    record = AdminAction.objects.get(action=EDIT)
    assert done.status_code == 302 and done.url == f"/actions/{record.pk}/?next=%2Fjobs%2F"
    assert (record.total, record.done, record.skipped) == (3, 3, 0)
    assert record.reason == "the folder moved"
    assert record.params["bulk"] == {"payload_url_prefix": [OLD, NEW]}
    for name, jid in zip("abc", jids, strict=False):
        item = record.items.get(item_id=jid)
        assert (item.before_status, item.after_status) == ("Failed", "Estimating")
        assert f"'{OLD}{name}.jpg' -> '{NEW}{name}.jpg'" in item.detail
        job = process_store.jobs.get_job(jid)
        assert job.configuration["payload_url"] == f"{NEW}{name}.jpg" and job.retry_count == 1
        assert "the folder moved" in job.history.entries[-1].message
    assert process_store.jobs.get_job(jids[3]).status == "Failed"
    result = client.get(done.url).content.decode()
    assert "3 done" in result and "'each'" not in result and "payload_url_prefix" in result


def test_a_job_changed_meanwhile_is_skipped_and_said_so_the_others_are_edited(
    process_store, client, operator
):
    jids = three_404s(process_store)[:3]
    client.force_login(operator)
    page = preview(client, jids, url_from=OLD, url_to=NEW)
    process_store.edits.resume_job(jids[1])  # someone else resumed it meanwhile
    process_store.moves.transition_job(jids[1], "Failed", "again")
    client.post(f"/actions/{EDIT}/execute", {"payload": payload_of(page), "reason": "moved"})
    record = AdminAction.objects.get(action=EDIT)
    assert (record.done, record.skipped) == (2, 1)
    skipped = record.items.get(item_id=jids[1])
    assert skipped.result == "skipped" and "changed since the page was shown" in skipped.detail
    assert process_store.jobs.get_job(jids[1]).configuration["payload_url"] == f"{OLD}b.jpg"


def test_a_bad_prefix_is_refused_beside_its_field_and_the_url_meets_the_door(
    process_store, client, operator, settings
):
    jids = three_404s(process_store)[:2]
    client.force_login(operator)
    page = preview(client, jids, url_from="http://nowhere.example/", url_to=NEW)
    assert page.status_code == 400
    assert "starts with this" in page.context["form"].errors["url_from"][0]
    page = preview(client, jids, url_from=OLD)
    assert "url_to" in page.context["form"].errors
    # A replacement the door refuses leaves every job out, saying why.
    settings.MQ_ALLOW_LOOPBACK = False
    page = preview(client, jids, url_from=OLD, url_to="http://127.0.0.1:9/x/")
    assert page.status_code == 400 and "refused" in page.content.decode()
    page = preview(client, jids, url_from=OLD, url_to="file:///etc/")
    assert page.status_code == 400 and "http or https" in page.content.decode()
    assert not AdminAction.objects.exists()


def test_a_digest_algorithm_set_on_a_selection_keeps_each_value_checked_in_its_format(
    process_store, client, operator
):
    md5ish = [
        failed_job(process_store, digest_type="sha1", digest_value=f"{n}" * 32) for n in (1, 2)
    ]
    longer = failed_job(process_store, digest_type="sha1", digest_value="3" * 64)
    none = failed_job(process_store)
    client.force_login(operator)
    page = preview(client, [*md5ish, longer, none], digest_type="md5")
    body = page.content.decode()
    assert page.status_code == 200, body
    assert "Edit and resume 2 jobs" in body
    assert "32 hexadecimal" in re.search(rf'data-item="{longer}">.*?</tr>', body, re.S).group(0)
    assert "no digest value" in re.search(rf'data-item="{none}">.*?</tr>', body, re.S).group(0)
    client.post(f"/actions/{EDIT}/execute", {"payload": payload_of(page), "reason": "md5s"})
    assert [process_store.jobs.get_job(j).configuration["digest_type"] for j in md5ish] == [
        "md5"
    ] * 2
    assert process_store.jobs.get_job(longer).configuration["digest_type"] == "sha1"


def test_the_admin_and_the_list_lead_a_selection_to_the_bulk_edit(
    process_store, client, operator, django_user_model
):
    jids = three_404s(process_store)[:2]
    for jid in jids:
        mirror.apply_job(process_store.jobs.get_job(jid))
    client.force_login(operator)
    page = client.get(f"/actions/{EDIT}/confirm?ids={','.join(jids)}")
    assert page.status_code == 302 and page.url.startswith(f"/actions/{EDIT}/selection/?")
    assert parse_qs(urlsplit(page.url).query)["ids"] == [",".join(jids)]
    assert f'<option value="{EDIT}">' in client.get("/jobs/").content.decode()

    root = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(root)
    chosen = client.post(
        "/admin/jobs/job/",
        {
            "action": "confirm_job_edit_resume",
            "_selected_action": list(Job.objects.values_list("pk", flat=True)),
        },
    )
    assert chosen.status_code == 302
    followed = client.get(chosen.url)
    assert followed.status_code == 302 and "/selection/?" in followed.url
    assert client.get(followed.url).status_code == 200


def test_resuming_jobs_that_failed_the_same_way_warns_and_offers_the_edit(
    process_store, client, operator
):
    jids = three_404s(process_store)[:3]
    for jid in jids:
        job = process_store.jobs.get_job(jid)
        process_store.edits.resume_job(jid)
        process_store.moves.transition_job(
            jid, "Failed", f"HTTP 404 at {job.configuration['payload_url']}"
        )
        mirror.apply_job(process_store.jobs.get_job(jid))
    client.force_login(operator)
    body = client.get(f"/actions/job.resume/confirm?ids={','.join(jids)}").content.decode()
    assert "3 of these jobs failed the same way" in body and "HTTP 404 at" in body
    link = re.search(r'href="(/actions/job.edit_resume/selection/\?[^"]+)"', body).group(1)
    assert sorted(parse_qs(urlsplit(link.replace("&amp;", "&")).query)["ids"][0].split(",")) == (
        sorted(jids)
    )
    # All matching a filter: the offer selects the group by that filter and its cause.
    body = client.get("/actions/job.resume/confirm?all=1&status=Failed").content.decode()
    link = re.search(r'href="(/actions/job.edit_resume/selection/\?[^"]+)"', body).group(1)
    query = parse_qs(urlsplit(link.replace("&amp;", "&")).query)
    assert query["all"] == ["1"] and query["signature"] == ["HTTP <n> at <url>"]
    link = link.replace("&amp;", "&")
    assert client.get(link).status_code == 200
    form = {"url_from": OLD, "url_to": NEW, "digest_type": ""}
    page = client.post(link, form)
    client.post(f"/actions/{EDIT}/execute", {"payload": payload_of(page), "reason": "moved"})
    record = AdminAction.objects.get(action=EDIT)
    assert record.done == 3 and "signature=HTTP" in record.selection
    # One job alone, or jobs failed in different ways: no warning.
    assert (
        "failed the same way"
        not in client.get(f"/actions/job.resume/confirm?ids={jids[0]}").content.decode()
    )


def test_the_plan_of_a_bulk_resume_holds_all_its_page_shows(process_store, operator, rf):
    """The confirmation is a straight walk, view -> ``plans.build`` -> template: the plan
    alone holds the rows, what each job runs again and the groups that failed the same way
    (with their edit offer going back where the person came from)."""
    from steering.actions import plans
    from steering.actions.catalog import ACTIONS
    from steering.actions.selection import select

    jids = three_404s(process_store)[:3]
    for jid in jids:
        job = process_store.jobs.get_job(jid)
        process_store.edits.resume_job(jid)
        process_store.moves.transition_job(
            jid, "Failed", f"HTTP 404 at {job.configuration['payload_url']}"
        )
        mirror.apply_job(process_store.jobs.get_job(jid))
    action = ACTIONS["job.resume"]
    request = rf.get("/actions/job.resume/confirm", {"ids": ",".join(jids)})
    request.user = operator
    the_plan = plans.build(operator, action, select(request, action), back="/jobs/")
    assert [row["plan"].target.id for row in the_plan.rows] == [p.target.id for p in the_plan.items]
    assert all(row["again"] for row in the_plan.rows) and the_plan.along_count == 0
    (group,) = the_plan.same_causes
    assert group.count == 3 and "next=%2Fjobs%2F" in group.edit_url
