"""``merritt-api`` mode: a job's record of what its steps did names what Merritt storage and
inventory were sent and answered, for the operators; a depositor's view names neither."""

from __future__ import annotations

import json

import pytest

from merritt_queue.core import steprecord as sr
from tests.pipeline.test_pipeline_failures import only_job

pytest_plugins = ["tests.httpserver", "tests.pipelinerun", "tests.merrittinventory"]

pytestmark = pytest.mark.usefixtures("loopback_only")


def _entries(job, step: str, kind: str) -> list[dict]:
    return [
        e for a in job.steps.attempts if a["step"] == step for e in a["entries"] if e["k"] == kind
    ]


def test_storage_and_inventory_calls_are_kept_with_their_answers_and_hidden_from_depositors(
    pipeline, content, merritt_storage_server, merritt_api
):
    merritt_api.lose_replies = 1  # the first add gets no answer: its error is kept
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    assert pipeline.run(bid).status == "Completed"
    job = only_job(pipeline, bid)
    ark = job.identifiers["primary_id"]

    posts = [e for e in _entries(job, "Storing", "storage-call") if e["call"] == "POST"]
    (post,) = posts
    assert post["url"].startswith(merritt_storage_server.url) and post["http"] == 200
    assert post["excerpt"] and post["ms"] >= 0
    (stored,) = _entries(job, "Storing", "storage")
    assert stored["ark"] == ark and stored["version"] == 1

    adds = _entries(job, "Recording", "inventory-call")
    assert [a["url"] for a in adds] == [f"{merritt_api.url}/add"] * len(adds)
    assert adds[0].get("error") and adds[-1]["http"] == 200

    shown = json.dumps(sr.public(job.steps))
    # The depositor's URL is on the same test server: the services' own paths are not theirs.
    for internal in (post["url"], f"{merritt_api.url}/add", "storage-call", "excerpt", '"msg"'):
        assert internal not in shown
    assert ark in shown
