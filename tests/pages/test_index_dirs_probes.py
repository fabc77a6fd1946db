"""An index directory near the listing limit shows in check_tree, the system checks, /healthz
and /metrics from 70 %; the dispatcher's periodic hook removes what retention allows, audited,
and the mirror keeps the removed jobs' timelines."""

from __future__ import annotations

import time

import pytest
from django.core.management import call_command
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from jobs.models import Job, JobEvent
from merritt_queue.core import indexdirs
from merritt_queue.core import tree as t
from merritt_queue.project import checks as project_checks
from steering.maintenance import retention as site_retention
from steering.models import AdminAction
from tests.core.test_index_dirs_retention import batch_of

COMPLETED = t.job_state_dir("completed")


def limit_for(children: int, fraction: float) -> int:
    """A limit at which ``children`` completed entries are ``fraction`` of a listing."""
    return int(indexdirs.estimate_bytes(children, indexdirs.INDEX_WIDTH) / fraction)


@pytest.fixture
def filled(process_store):
    for _ in range(3):
        batch_of(process_store, "Completed", "Completed")
    return process_store


def retain_until_done(store, monkeypatch, days: float) -> None:
    """The periodic hook's retention, ``days`` from now, run until it has nothing left."""
    later = time.time() + days * 86400
    monkeypatch.setattr(site_retention, "now", lambda: later)
    while True:
        site_retention.run(store)
        if not site_retention.busy():
            break


@pytest.fixture(autouse=True)
def _fresh_retention():
    site_retention.forget()
    yield
    site_retention.forget()


@pytest.mark.django_db
def test_healthz_warns_from_seventy_percent(client, filled, settings):
    settings.MQ_ZK_MAXBUFFER = limit_for(6, 0.69) * 3  # /jobs too stays well under
    body = client.get("/healthz").json()
    assert body["index_dirs"]["warning"] is False
    settings.MQ_ZK_MAXBUFFER = limit_for(6, 0.71)
    body = client.get("/healthz").json()
    dirs = body["index_dirs"]
    assert body["ok"] and dirs["warning"] is True
    assert dirs["limit"] == settings.MQ_ZK_MAXBUFFER
    (warned,) = [d for d in dirs["largest"] if d["path"] == COMPLETED]
    assert warned["children"] == 6 and 70 <= warned["percent"] < 72
    assert any(COMPLETED in w for w in dirs["warnings"])


@pytest.mark.django_db
def test_metrics_give_each_directorys_listing_bytes_and_the_limit(client, filled, settings):
    settings.MQ_METRICS_ALLOW = "127.0.0.0/8,::1/128"
    settings.MQ_ZK_MAXBUFFER = limit_for(6, 0.71)
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    size = samples[("mq_zk_listing_bytes", (("path", COMPLETED),))]
    assert size == indexdirs.estimate_bytes(6, indexdirs.INDEX_WIDTH)
    assert samples[("mq_zk_listing_limit_bytes", ())] == settings.MQ_ZK_MAXBUFFER
    assert samples[("mq_zk_listing_ratio", (("path", COMPLETED),))] == pytest.approx(0.71, 0.01)


@pytest.mark.django_db
def test_check_tree_names_a_directory_past_seventy_percent(filled, settings, capsys):
    settings.MQ_ZK_MAXBUFFER = limit_for(6, 0.71)
    with pytest.raises(SystemExit):
        call_command("check_tree")
    out = capsys.readouterr().out
    assert "index-dir-near-limit" in out and COMPLETED in out and "MQ_ZK_MAXBUFFER" in out


def test_the_system_check_warns_when_the_queue_cap_lets_a_directory_pass_seventy_percent():
    fits = indexdirs.estimate_bytes(25_000, indexdirs.INDEX_WIDTH)
    with override_settings(MQ_MAX_QUEUE_JOBS=25_000, MQ_ZK_MAXBUFFER=int(fits / 0.69)):
        assert project_checks.check_index_dirs() == []
    with override_settings(MQ_MAX_QUEUE_JOBS=25_000, MQ_ZK_MAXBUFFER=int(fits / 0.71)):
        (warning,) = project_checks.check_index_dirs()
    assert warning.id == "mq.W091" and "MQ_MAX_QUEUE_JOBS" in warning.msg
    with override_settings(MQ_ZK_MAXBUFFER=100):
        assert [m.id for m in project_checks.check_index_dirs()] == ["mq.E091"]


@pytest.mark.django_db
def test_the_periodic_hook_removes_old_finished_items_audited_and_the_timeline_stays(
    filled, settings, monkeypatch
):
    store = filled
    kept, _ = batch_of(store, "Completed", "Failed")
    call_command("reconcile", "--full", verbosity=0)
    removed_jobs = list(Job.objects.exclude(batch_id=kept).values_list("jid", flat=True))
    events_before = JobEvent.objects.filter(jid__in=removed_jobs).count()
    assert len(removed_jobs) == 6 and events_before

    settings.MQ_CLEANUP_RETENTION_DAYS = 30
    assert site_retention.run(store) is not None
    assert AdminAction.objects.count() == 0  # nothing is old yet

    site_retention.forget()
    retain_until_done(store, monkeypatch, days=31)
    action = AdminAction.objects.get()
    assert (action.username, action.action, action.reason) == ("system", "cleanup", "retention")
    assert action.user is None and action.done == 3 and action.failed == 0
    assert all(i.detail.startswith("removed") for i in action.items.all())
    assert store.batches.list_batch_ids() == [kept]
    call_command("reconcile", "--full", verbosity=0)
    assert JobEvent.objects.filter(jid__in=removed_jobs).count() == events_before


@pytest.mark.django_db
def test_retention_off_removes_nothing(filled, settings, monkeypatch):
    settings.MQ_CLEANUP_AUTO = False
    settings.MQ_ZK_MAXBUFFER = limit_for(6, 0.9)
    monkeypatch.setattr(site_retention, "now", lambda: time.time() + 400 * 86400)
    assert site_retention.run(filled) is None
    assert len(filled.batches.list_batch_ids()) == 3 and not AdminAction.objects.exists()
