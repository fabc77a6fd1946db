"""Maintenance from the web: check_tree, reconcile --full and cleanup as audited admin actions,
started through a confirmation page and run by an RQ worker on mq-admin."""

from __future__ import annotations

import re
import socket
from datetime import timedelta

from django.core import signing
from django.utils import timezone

from jobs.models import Job, MirrorState
from merritt_queue.core import tree as t
from merritt_queue.project import runtime
from steering.maintenance import operations as maintenance
from steering.maintenance.views import SALT
from steering.models import AdminAction
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_pages import mirrored

queue, people, admin_queue = base.queue, base.people, base.admin_queue  # the same fixtures
job_in, work = base.job_in, base.work  # and helpers

PAYLOAD = re.compile(r'name="payload" value="([^"]+)"')


def confirm(client, name: str, query: str):
    page = client.get(f"/maintenance/{name}/confirm?{query}")
    assert page.status_code == 200, page.content
    return page


def start(client, name: str, query: str, reason="nightly check"):
    page = confirm(client, name, query)
    data = {"payload": PAYLOAD.search(page.content.decode()).group(1), "reason": reason}
    return client.post(f"/maintenance/{name}/start", data), data


def started(client, name, query, reason="nightly check") -> AdminAction:
    done, _ = start(client, name, query, reason)
    record = AdminAction.objects.get(action=name, finished__isnull=True)
    assert done.status_code == 302 and done.url == f"/actions/{record.pk}/"
    return record


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- who may ---------------------------------------------------------------------------------


def test_only_administrators_see_and_run_maintenance(client, queue, people, admin_queue):
    for who in ("viewer", "operator"):
        client.force_login(people[who])
        assert "/maintenance/" not in client.get("/actions/").content.decode()
        assert client.get("/maintenance/").status_code == 403
        for name, query in (
            ("check-tree", "repair=1"),
            ("reconcile-full", ""),
            ("cleanup", "older_than=1d"),
        ):
            assert client.get(f"/maintenance/{name}/confirm?{query}").status_code == 403
        # A confirmation signed for them (they are never shown one) is refused all the same.
        payload = signing.dumps(
            {
                "op": "check-tree",
                "user": people[who].pk,
                "params": {"repair": True, "lock_max_age": 1.0},
                "token": who,
            },
            salt=SALT,
        )
        response = client.post("/maintenance/check-tree/start", {"payload": payload, "reason": "x"})
        assert response.status_code == 403
    assert AdminAction.objects.count() == 0 and admin_queue.count == 0
    client.force_login(people["administrator"])
    page = client.get("/maintenance/").content.decode()
    assert 'href="/maintenance/"' in page
    assert "/maintenance/check-tree/confirm" in page and "/maintenance/cleanup/confirm" in page


# --- check_tree ------------------------------------------------------------------------------


def test_check_tree_reports_then_repairs_with_progress_to_100(
    client, queue, people, admin_queue, monkeypatch
):
    jid = job_in(queue, "Pending")
    missing = t.job_index("Pending", 5, jid)
    queue.client.delete(missing)
    seen: list[tuple[int, int]] = []
    meter = maintenance.Meter.__call__

    def spy(self, done, total):
        seen.append((done, total))
        meter(self, done, total)

    monkeypatch.setattr(maintenance.Meter, "__call__", spy)
    monkeypatch.setattr("merritt_queue.core.treecheck.checker.PROGRESS_EVERY", 1)
    client.force_login(people["administrator"])

    body = confirm(client, "check-tree", "repair=0&lock_max_age=3600").content.decode()
    assert "nothing is written" in body and 'name="reason"' in body
    record = started(client, "check-tree", "repair=0&lock_max_age=3600")
    assert record.params == {"repair": False, "lock_max_age": 3600.0}
    assert record.reason == "nightly check" and record.username == "ada"
    page = client.get(f"/actions/{record.pk}/").content.decode()
    assert "<progress" in page and 'http-equiv="refresh"' in page
    assert admin_queue.count == 1

    work(admin_queue)

    record.refresh_from_db()
    assert record.finished is not None and record.percent == 100 and record.total >= 2
    assert len(seen) >= record.total and seen[-1] == (record.total, record.total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)  # the bar only moves forward
    assert record.report["total"] == 1 and record.report["unrepaired"] == 1
    assert not queue.client.exists(missing)  # a report writes nothing
    page = client.get(f"/actions/{record.pk}/").content.decode()
    assert "missing-index" in page and "would repair" in page and '<progress max="100"' in page
    assert 'http-equiv="refresh"' not in page
    assert MirrorState.objects.get(name="consistency").detail["unrepaired"] == 1

    record = started(client, "check-tree", "repair=1&lock_max_age=3600", reason="mend it")
    work(admin_queue)
    record.refresh_from_db()
    assert record.report["repaired"] == 1 and record.report["findings"][0]["repaired"]
    assert queue.client.exists(missing)
    assert "-&gt; repaired: create" in client.get(f"/actions/{record.pk}/").content.decode()
    assert MirrorState.objects.get(name="consistency").detail["repaired"] == 1
    audit = client.get("/actions/?action=check-tree").content.decode()
    assert "nightly check" in audit and "mend it" in audit


def test_a_bad_lock_age_is_a_clear_error_and_nothing_starts(client, people, queue):
    client.force_login(people["administrator"])
    page = client.get("/maintenance/check-tree/confirm?repair=1&lock_max_age=soon")
    assert page.status_code == 400 and "give a number of seconds" in page.content.decode()
    page = client.get("/maintenance/cleanup/confirm?older_than=a+week")
    assert page.status_code == 400 and "e.g. 7d" in page.content.decode()
    assert 'name="payload"' not in page.content.decode() and AdminAction.objects.count() == 0


# --- reconcile --full ------------------------------------------------------------------------


def test_reconcile_full_rebuilds_the_mirror_and_reports_the_drift(
    client, queue, people, admin_queue
):
    jids = [job_in(queue, "Pending") for _ in range(3)]
    mirrored(queue, *jids)
    Job.objects.filter(jid=jids[0]).delete()  # the mirror lost a row
    client.force_login(people["administrator"])
    assert "mirror database is rebuilt" in confirm(client, "reconcile-full", "").content.decode()
    record = started(client, "reconcile-full", "", reason="mirror looks off")

    work(admin_queue)

    record.refresh_from_db()
    assert record.finished and record.percent == 100 and record.total == record.done >= 6
    assert record.report["added"] == 1 and jids[0] in record.report["ids"]["added"]
    assert Job.objects.filter(jid=jids[0]).exists()
    page = client.get(f"/actions/{record.pk}/").content.decode()
    assert "drift-report" in page and f"added: 1  {jids[0]}" in page


# --- cleanup ---------------------------------------------------------------------------------


def test_cleanup_dry_run_removes_nothing_and_the_real_one_shows_what_it_found(
    client, queue, people, admin_queue
):
    deleted, kept = job_in(queue, "Deleted"), job_in(queue, "Failed")
    client.force_login(people["administrator"])

    # A real cleanup is offered only after a dry run with the same age.
    body = confirm(client, "cleanup", "older_than=0s&mode=real").content.decode()
    assert "Dry run first" in body and 'name="payload"' not in body

    record = started(client, "cleanup", "older_than=0s&mode=dry", reason="look first")
    work(admin_queue)
    record.refresh_from_db()
    assert record.finished and record.params == {"older_than": "0s", "dry_run": True}
    assert record.report["counts"]["jobs"] == 1 and record.report["dry_run"] is True
    assert queue.jobs.get_job(deleted).status == "Deleted"  # nothing removed
    assert record.items.get(item_id=deleted).detail == "would remove"
    page = client.get(f"/actions/{record.pk}/").content.decode()
    assert "Dry run: would remove" in page and "mode=real" in page

    other_age = confirm(client, "cleanup", "older_than=1h&mode=real").content.decode()
    assert "Dry run first" in other_age  # that dry run was for another age

    body = confirm(client, "cleanup", "older_than=0s&mode=real").content.decode()
    assert "dry-run-found" in body and f'data-item="{deleted}"' in body
    assert re.search(r"<strong>1</strong> job", body) and "cannot be undone" in body
    real = started(client, "cleanup", "older_than=0s&mode=real", reason="disk is full")
    assert real.params["dry_run_of"] == record.pk
    work(admin_queue)
    real.refresh_from_db()
    assert real.finished and real.percent == 100 and real.report["counts"]["jobs"] == 1
    assert deleted not in queue.jobs.list_job_ids() and kept in queue.jobs.list_job_ids()
    assert real.items.get(item_id=deleted).detail == "removed"
    assert (
        "Removed <strong>0</strong> batches" in client.get(f"/actions/{real.pk}/").content.decode()
    )


# --- one at a time, once ---------------------------------------------------------------------


def test_a_double_submit_starts_one_run(client, queue, people, admin_queue):
    client.force_login(people["administrator"])
    first, data = start(client, "reconcile-full", "")
    assert first.status_code == 302
    again = client.post("/maintenance/reconcile-full/start", data)
    assert again.status_code == 409 and "already used" in again.content.decode()
    assert AdminAction.objects.count() == 1 and admin_queue.count == 1


def test_a_second_start_while_one_runs_says_so_and_links_to_it(client, queue, people, admin_queue):
    client.force_login(people["administrator"])
    running = started(client, "check-tree", "repair=0&lock_max_age=60")
    link = f'href="/actions/{running.pk}/"'
    assert link in client.get("/maintenance/").content.decode()
    page = confirm(client, "check-tree", "repair=1&lock_max_age=60").content.decode()
    assert "already running" in page and link in page and 'name="payload"' not in page
    # A confirmation shown before it started is refused too.
    record = AdminAction.objects.get()
    record.finished = timezone.now()
    record.save()
    shown = confirm(client, "check-tree", "repair=1&lock_max_age=60")
    record.finished = None
    record.save()
    data = {"payload": PAYLOAD.search(shown.content.decode()).group(1), "reason": "again"}
    response = client.post("/maintenance/check-tree/start", data)
    assert response.status_code == 409 and "already running" in response.content.decode()
    assert AdminAction.objects.count() == 1
    # Another kind may run beside it.
    assert start(client, "reconcile-full", "")[0].status_code == 302


def test_a_run_whose_worker_died_no_longer_blocks(client, queue, people, admin_queue):
    client.force_login(people["administrator"])
    record = started(client, "reconcile-full", "")
    admin_queue.empty()  # as if its job were lost with its worker
    AdminAction.objects.filter(pk=record.pk).update(started=timezone.now() - timedelta(hours=1))
    assert start(client, "reconcile-full", "")[0].status_code == 302
    record.refresh_from_db()
    assert record.finished and "worker stopped" in record.report["error"]


# --- dead services ---------------------------------------------------------------------------


def test_without_redis_the_action_fails_saying_so(client, queue, people, settings):
    settings.RQ_QUEUES = {"default": {"HOST": "127.0.0.1", "PORT": free_port(), "DB": 0}}
    client.force_login(people["administrator"])
    done, _ = start(client, "cleanup", "older_than=1d&mode=dry")
    record = AdminAction.objects.get()
    assert done.url == f"/actions/{record.pk}/" and record.finished is not None
    assert "Redis did not answer" in record.report["error"] and record.failed == 1
    page = client.get(done.url).content.decode()
    assert "It failed" in page and "Redis did not answer" in page


def test_without_zookeeper_the_action_fails_saying_so_and_removes_nothing(
    client, queue, people, admin_queue, settings
):
    deleted = job_in(queue, "Deleted")
    client.force_login(people["administrator"])
    dry = started(client, "cleanup", "older_than=0s&mode=dry")
    work(admin_queue)
    dry.refresh_from_db()
    assert dry.report["counts"]["jobs"] == 1
    record = started(client, "cleanup", "older_than=0s&mode=real")
    hosts = settings.ZK_HOSTS
    runtime.close()
    settings.ZK_HOSTS, settings.ZK_TIMEOUT = f"127.0.0.1:{free_port()}", 1
    try:
        work(admin_queue)
    finally:
        settings.ZK_HOSTS = hosts
        runtime.close()
    record.refresh_from_db()
    assert record.finished and "ZooKeeper" in record.report["error"], record.report
    assert record.items.count() == 0 and record.failed == 1
    assert "It failed" in client.get(f"/actions/{record.pk}/").content.decode()
    assert runtime.get_store().jobs.get_job(deleted).status == "Deleted"


def test_a_run_is_judged_again_when_it_runs(client, queue, people, admin_queue):
    from django.contrib.auth.models import Group

    admin = people["administrator"]
    client.force_login(admin)
    record = started(client, "reconcile-full", "")
    admin.groups.set(Group.objects.filter(name="operator"))  # demoted before a worker took it
    work(admin_queue)
    record.refresh_from_db()
    assert record.finished and "needs the administrator role" in record.report["error"]
    assert record.total == 0  # nothing was read, nothing rebuilt
