"""/metrics counts Merritt's access requests by queue and state, and each queue's pause."""

from __future__ import annotations

import pytest

from merritt_queue.core import access
from mirror import access as mirror_access
from tests.merrittzk_access import MerrittAccess
from tests.pages.test_metrics_live import get, scrape


@pytest.fixture(autouse=True)
def loopback_allowed(settings):
    settings.MQ_METRICS_ALLOW = "127.0.0.0/8,::1/128"


TOKEN = {"status": 201, "token": "t", "cloud-content-byte": 1, "delivery-node": 7777}


@pytest.mark.django_db
def test_requests_by_queue_and_state_and_the_pauses(client, process_store, make_client, settings):
    settings.MQ_METRICS_TIMEOUT = 5.0
    merritt = MerrittAccess(make_client())
    merritt.create_assembly("small", TOKEN)
    merritt.create_assembly("small", TOKEN)
    failed = merritt.create_assembly("large", TOKEN)
    merritt.acquire_pending_assembly("large")
    merritt.set_status("large", failed, "Processing")
    merritt.set_status("large", failed, "Failed")
    merritt.zk.set(access.item_path("small", "qid0000000001") + "/status", b"junk")
    merritt.pause("large")
    mirror_access.refresh(process_store.client)
    samples = scrape(client)
    assert get(samples, "mq_access_items", queue="small", state="Pending") == 1
    assert get(samples, "mq_access_items", queue="small", state="unreadable") == 1
    assert get(samples, "mq_access_items", queue="large", state="Failed") == 1
    assert get(samples, "mq_access_items", queue="large", state="Completed") == 0
    assert get(samples, "mq_access_queue_paused", queue="large") == 1
    assert get(samples, "mq_access_queue_paused", queue="small") == 0
