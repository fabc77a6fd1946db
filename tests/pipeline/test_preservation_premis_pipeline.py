"""The PREMIS export of an object the real pipeline made: a file whose bytes did not match the
depositor's digest failed the job; an operator resumed it once the content was mended, held
it and released it, each with a reason; the export, valid against the schema, tells all of
it with the people and reasons, and the digests, the ARK, the storage and the inventory."""

from __future__ import annotations

import uuid

from django.contrib.auth.models import Group, User

from inventory.models import InventoryObject
from inventory.premisxml import document
from inventory.provenance import object_history
from mirror import rebuild
from steering.actions.catalog import ACTIONS
from steering.actions.execution import execute
from tests.objectfixtures import md5_of, object_manifest
from tests.pages.test_preservation_premis import events, of_type, validated

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

GOOD, BAD = b"the first page\n", b"a page changed on the server\n"


def act(user, name: str, pipeline, jid: str, reason: str, **params) -> None:
    job = pipeline.store.jobs.get_job(jid)
    items = [(jid, job.status_version)]
    record = execute(user, ACTIONS[name], items, reason, token=uuid.uuid4().hex, params=params)
    assert record.done == 1, (name, record.items.values("result", "detail"))


def test_a_failed_resumed_held_and_released_deposit_exports_its_whole_history(pipeline, content):
    operator = User.objects.create_user("otto")
    operator.groups.add(Group.objects.get_or_create(name="operator")[0])
    url = object_manifest(content, "pages.checkm", {"page1.txt": GOOD, "page2.txt": b"two\n"})
    (content.root / "page1.txt").write_bytes(BAD)  # the depositor's digest is GOOD's
    bid = pipeline.submit(type="object-manifest", payload_url=url, erc_what="Pages")
    pipeline.run(bid, until=lambda b: [j.status for j in pipeline.jobs(bid)] == ["Failed"])
    (job,) = pipeline.jobs(bid)
    assert "page1.txt" in job.message

    (content.root / "page1.txt").write_bytes(GOOD)
    fixed = "the depositor fixed the file on their server"
    act(operator, "job.resume", pipeline, job.jid, fixed, step="Pending")
    act(operator, "job.hold", pipeline, job.jid, "waiting for the rights statement")
    act(operator, "job.release", pipeline, job.jid, "the rights statement arrived")
    # The batch, Failed with its job, is reported again once the job ends (store.followups).
    pipeline.run(bid, until=lambda b: [j.status for j in pipeline.jobs(bid)] == ["Completed"])
    rebuild.full_reconcile(pipeline.store)

    (job,) = pipeline.jobs(bid)
    ark = job.identifiers["primary_id"]
    obj = InventoryObject.objects.get(ark=ark)
    doc = validated(document(object_history(obj)))
    kinds = {e["type"] for e in events(doc)}
    assert {
        "ingestion start",
        "message digest calculation",
        "fixity check",
        "identifier assignment",
        "accession",
        "inventory recording",
        "failure",
        "resume",
        "hold",
        "release",
        "ingestion",
    } <= kinds

    checks = {(tuple(e["objects"]), e["outcome"], e["note"]) for e in of_type(doc, "fixity check")}
    page1 = f"{ark}/v1/producer/page1.txt"
    assert (
        (page1,),
        "failure",
        f"expected md5 {md5_of(GOOD)}; computed md5 {md5_of(BAD)}",
    ) in checks
    assert any(o == (page1,) and c == "success" for o, c, n in checks)
    for kind, reason in (
        ("resume", "the depositor fixed the file on their server"),
        ("hold", "waiting for the rights statement"),
        ("release", "the rights statement arrived"),
    ):
        (event,) = of_type(doc, kind)
        assert ("user", "otto", "implementer") in event["agents"]
        assert reason in event["detail"]
    (failure,) = of_type(doc, "failure")
    assert "page1.txt" in failure["note"] and failure["outcome"] == "failure"
    (minted,) = of_type(doc, "identifier assignment")
    assert minted["objects"] == [ark] and "minted" in minted["detail"]
    (start,) = of_type(doc, "ingestion start")
    assert ("depositor", "tester", "submitter") in start["agents"]
