"""``manage.py check_tree`` over the test's own chroot (no database needed)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

from merritt_queue.core import tree as t
from merritt_queue.project import runtime


@pytest.fixture
def settings_on_chroot(zk_config):
    with override_settings(ZK_HOSTS=zk_config.hosts, ZK_CHROOT=zk_config.chroot):
        yield
    runtime.close()


def run(*args) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("check_tree", *args, stdout=out)
    except SystemExit as e:
        return e.code, out.getvalue()
    return 0, out.getvalue()


def test_check_tree_command_reports_repairs_and_exits_by_what_is_left(store, settings_on_chroot):
    bid = store.new_batches.create_batch({"batchID": "uuid-1"}).id
    jid = store.new_jobs.create_job(bid, {})
    store.client.delete(t.job_index("Pending", 5, jid))
    store.client.create(f"{t.JOB_STATES}/pending/junk")
    missing = t.job_index("Pending", 5, jid)

    code, out = run()
    assert code == 1
    assert f"missing-index  {missing}  Job {jid}" in out
    assert f"-> would repair: create {missing}" in out
    assert "foreign-index" in out and "-> fix by hand" in out
    assert out.splitlines()[-1] == "2 finding(s), 0 repaired"
    assert not store.client.exists(missing)

    code, out = run("--json")
    assert code == 1
    assert {f["kind"] for f in json.loads(out)} == {"missing-index", "foreign-index"}

    code, out = run("--repair")
    assert code == 1  # the foreign name is left for a person
    assert f"-> repaired: create {missing}" in out
    assert out.splitlines()[-1] == "2 finding(s), 1 repaired"
    assert store.job_locks.acquire_job("Pending").jid == jid

    store.client.delete(f"{t.JOB_STATES}/pending/junk")
    assert run() == (0, "0 finding(s), 0 repaired\n")


def test_check_tree_command_reads_the_lock_age_from_settings_or_the_option(
    store, make_store, settings_on_chroot
):
    bid = store.new_batches.create_batch({}).id
    jid = store.new_jobs.create_job(bid, {})
    assert make_store().job_locks.lock_job(jid) is not None

    assert run()[0] == 0
    with override_settings(MQ_LOCK_STALE_SECONDS=-1):
        code, out = run()
    assert code == 1 and "stale-lock" in out
    code, out = run("--lock-max-age", "-1")
    assert code == 1 and "stale-lock" in out


def test_a_check_without_repair_writes_nothing_not_even_the_containers(store, zk_config):
    """An ensemble where nothing of the queue exists yet stays as it is after a check."""
    store.client.ensure_path("/untouched")
    with override_settings(ZK_HOSTS=zk_config.hosts, ZK_CHROOT=zk_config.chroot + "/untouched"):
        try:
            code, _ = run()
        finally:
            runtime.close()
    assert code == 0
    assert store.client.get_children("/untouched") == []
