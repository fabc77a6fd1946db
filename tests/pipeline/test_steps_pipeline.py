"""What each step did, kept by a real pipeline run (ZooKeeper, Redis, RQ workers, HTTP)."""

from __future__ import annotations

import hashlib
import json

from merritt_queue.core import steprecord as sr
from tests.pipelinerun import FIXTURES

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


def _by_step(job) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for attempt in job.steps.attempts:
        out.setdefault(attempt["step"], []).append(attempt)
    return out


def _entries(attempts, kind):
    return [e for a in attempts for e in a["entries"] if e["k"] == kind]


def test_a_run_keeps_downloads_digests_the_ark_storage_inventory_and_the_callback(
    pipeline, content
):
    data = (FIXTURES / "call911.jpg").read_bytes()
    md5 = hashlib.md5(data).hexdigest()
    # The HEAD and the first GET fail: the record says why the GET was tried again.
    url = content.behave("/flaky.jpg", body=data, failures=2, failure_status=503)
    pipeline.profile.callback_url = content.behave("/callback", body=b"thanks\n")
    pipeline.profile.save()
    bid = pipeline.submit(type="file", payload_url=url, digest_type="md5", digest_value=md5)
    assert pipeline.run(bid).status == "Completed"
    (job,) = pipeline.jobs(bid)
    assert job.status == "Completed"
    steps = _by_step(job)
    assert list(steps) == [
        "Pending",
        "Estimating",
        "Provisioning",
        "Downloading",
        "Processing",
        "Storing",
        "Recording",
        "Notify",
    ]
    assert all(
        a["outcome"] == "success" and a["by"].startswith("worker ") for a in job.steps.attempts
    )

    (head,) = _entries(steps["Estimating"], "head")
    assert head["url"] == url and head["http"] == 503

    first, second = _entries(steps["Downloading"], "get")
    assert (first["try"], first["http"], second["try"], second["http"]) == (1, 503, 2, 200)
    assert "503" in first["retry"] and "retry" not in second
    assert first["addr"] == second["addr"] == "127.0.0.1" and first["url"] == url
    assert second["bytes"] == len(data) and second["ms"] >= 0
    (digest,) = _entries(steps["Downloading"], "digest")
    assert digest == {
        "k": "digest",
        "file": "flaky.jpg",
        "expected": {"md5": md5},
        "computed": {"md5": md5},
        "ok": True,
    }

    ark = job.identifiers["primary_id"]
    assert _entries(steps["Processing"], "ark") == [{"k": "ark", "ark": ark, "how": "minted"}]
    (stored,) = _entries(steps["Storing"], "storage")
    assert stored["ark"] == ark and stored["version"] == 1 and stored["ok"]
    (recorded,) = _entries(steps["Recording"], "inventory")
    assert recorded == {"k": "inventory", "ark": ark, "version": 1, "ok": True}
    (called,) = _entries(steps["Notify"], "callback")
    assert called["http"] == 200 and called["ok"] and called["to"].endswith("/callback")

    # The depositor's view: their URL, statuses, bytes, digests and the ARK; no address.
    shown = sr.public(job.steps)
    text = json.dumps(shown)
    assert "127.0.0.1" not in text.replace(url, "") and "worker " not in text
    assert ark in text and md5 in text
    # The profile's callback is the site's, not the depositor's: its status only.
    (notify,) = [a for a in shown["attempts"] if a["step"] == "Notify"]
    assert notify["entries"] == [{"kind": "callback", "http": 200, "ok": True}]


def test_a_container_keeps_its_entries_unpacked(pipeline, content):
    bid = pipeline.submit(type="container", payload_url=f"{content.url}/huskyChicken.zip")
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    (unpacked,) = _entries(_by_step(job)["Downloading"], "unpacked")
    assert unpacked["file"] == "huskyChicken.zip" and unpacked["count"] == len(unpacked["names"])
    assert unpacked["count"] > 0 and unpacked["bytes"] > 0
