"""The access queue in the mirror: a full reconcile and the follower keep ``access``'s rows
and their history as Merritt's access service and our steering change the queues."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kazoo.client import KazooClient

from access.models import AccessEvent, AccessRequest
from inventory.models import InventoryObject
from merritt_queue.core import access
from mirror import access as mirror_access
from mirror import facade as mirror
from tests.merrittzk_access import MerrittAccess
from tests.mirrorlive import wait_for

pytest_plugins = ["tests.mirrorlive"]

TOKEN = {
    "status": 201,
    "token": "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa",
    "cloud-content-byte": 17079,
    "delivery-node": 7777,
}


def _row(key: str) -> AccessRequest:
    """The request's row; the follower may not have written it yet (wait_for goes on)."""
    return AccessRequest.objects.filter(key=key).first() or AccessRequest(key=key)


def _events(key: str) -> list[tuple]:
    rows = AccessEvent.objects.filter(key=key).order_by("status_version")
    return list(rows.values_list("status_version", "from_status", "to_status", "actor", "exact"))


def test_a_full_reconcile_mirrors_both_queues_and_their_history(store, make_client, db):
    merritt = MerrittAccess(make_client())
    small = merritt.create_assembly("small", TOKEN)
    large = merritt.create_assembly("large", {**TOKEN, "ark": "ark:/13030/m5abc"})
    InventoryObject.objects.create(ark="ark:/13030/m5abc", collection="demo")
    merritt.acquire_pending_assembly("small")
    merritt.set_status("small", small, "Processing")
    merritt.set_status("small", small, "Failed", "no space")
    merritt.unlock("small", small)
    access.requeue(store.client, "small", small, actor="admin:ops", reason="space again")
    drift = mirror.full_reconcile(store)
    assert sorted(drift.added) == [f"large/{large}", f"small/{small}"]
    row = AccessRequest.objects.get(key=f"small/{small}")
    assert (row.queue, row.qid, row.status, row.status_version) == ("small", small, "Pending", 3)
    assert (row.token, row.size, row.delivery_node, row.token_status) == (
        TOKEN["token"], 17079, 7777, "201",
    )  # fmt: skip
    assert row.created_at and row.status_changed_at and row.removed_at is None
    assert AccessRequest.objects.get(key=f"large/{large}").collection == "demo"
    # Versions 1 and 2 were Merritt's, before the mirror looked: version 3 is our entry, exact.
    assert _events(f"small/{small}") == [(3, "Failed", "Pending", "admin:ops", True)]
    assert _events(f"large/{large}") == [(0, "", "Pending", "Merritt access", True)]


def test_a_removed_request_keeps_its_row_marked(store, make_client, db):
    merritt = MerrittAccess(make_client())
    qid = merritt.create_assembly("small", TOKEN)
    merritt.acquire_pending_assembly("small")
    merritt.set_status("small", qid, "Processing")
    merritt.set_status("small", qid, "Completed")
    merritt.unlock("small", qid)
    mirror_access.refresh(store.client)
    later = datetime.now(UTC) + timedelta(days=2)
    assert access.remove_finished(store.client, timedelta(days=1), now=later).removed
    assert mirror_access.refresh(store.client, [f"small/{qid}"]).removed == [f"small/{qid}"]
    row = AccessRequest.objects.get(key=f"small/{qid}")
    assert row.removed_at is not None and row.status == "Completed"
    assert mirror.full_reconcile(store).count("removed") == 0


def test_the_follower_sees_merritt_s_requests_locks_and_our_steering(store, zk, follower):
    runner = follower()
    merritt = MerrittAccess(zk)
    qid = merritt.create_assembly("large", TOKEN)
    key = f"large/{qid}"
    wait_for(lambda: _row(key).status == "Pending")
    merritt.acquire_pending_assembly("large")
    wait_for(lambda: _row(key).locked)
    merritt.set_status("large", qid, "Processing")
    merritt.set_status("large", qid, "Failed", "boom")
    merritt.unlock("large", qid)
    wait_for(lambda: (r := _row(key)).status == "Failed" and not r.locked)
    assert _row(key).message == "boom"
    access.requeue(store.client, "large", qid, actor="admin:ops", reason="retry")
    wait_for(lambda: _row(key).status == "Pending")
    wait_for(lambda: _events(key)[-1] == (3, "Failed", "Pending", "admin:ops", True))
    merritt.acquire_pending_assembly("large")
    merritt.set_status("large", qid, "Processing")
    merritt.set_status("large", qid, "Completed")
    merritt.unlock("large", qid)
    merritt.delete("large", qid)
    wait_for(lambda: _row(key).removed_at is not None)
    assert runner.applied > 0


def test_the_follower_arms_each_watch_once_and_follows_a_lost_session(
    store, zk, zk_config, follower
):
    runner = follower()
    merritt = MerrittAccess(zk)
    qid = merritt.create_assembly("small", TOKEN)
    key = f"small/{qid}"
    wait_for(lambda: _row(key).status == "Pending")
    for _ in range(3):
        merritt.acquire_pending_assembly("small")
        merritt.unlock("small", qid)
    client = runner.store.client
    assert len(client._child_watchers.get(client.chroot + "/access/small", ())) == 1
    lost = client.client_id[0]
    twin = KazooClient(hosts=zk_config.hosts, client_id=client.client_id)
    twin.start(timeout=10)
    twin.stop()  # the follower's session closed under it: it starts a new one
    twin.close()
    wait_for(lambda: client.connected and client.client_id[0] != lost)
    merritt.acquire_pending_assembly("small")
    merritt.set_status("small", qid, "Processing")
    wait_for(lambda: _row(key).status == "Processing" and _row(key).locked)
    other = merritt.create_assembly("small", TOKEN)
    wait_for(lambda: _row(f"small/{other}").status == "Pending")


def test_the_follower_lets_go_of_a_removed_requests_watches(store, zk, follower):
    """A Failed request's lock is watched (it may be taken again); once it is Deleted and
    removed, nothing may keep that watch: it would never fire."""
    runner = follower()
    merritt = MerrittAccess(zk)
    qid = merritt.create_assembly("small", TOKEN)
    key = f"small/{qid}"
    merritt.acquire_pending_assembly("small")
    merritt.set_status("small", qid, "Processing")
    merritt.set_status("small", qid, "Failed", "boom")
    merritt.unlock("small", qid)
    wait_for(lambda: (r := _row(key)).status == "Failed" and not r.locked)
    lock = f"/access/small/{qid}/lock"
    client = runner.store.client
    wait_for(lambda: lock in runner.access._armed)
    merritt.admin_delete("small", qid)
    merritt.delete("small", qid)
    wait_for(lambda: _row(key).removed_at is not None)
    wait_for(lambda: not any(qid in path for path in runner.access._armed))
    assert not any(qid in path for path in client._data_watchers)
