"""An object's history as PREMIS 3.0 XML: from the object page, the API and ``manage.py
premis``; valid against the Library of Congress schema; every kind of event its history has;
the admin and the reason behind each hold, release, edit, resume and deletion; and only for
who may read the object's collection.

The history is mirror rows, as the pipeline and the mirror leave them (tests/pipeline has
the same export of an object the real pipeline made)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from lxml import etree

from batches.models import ApiToken
from door.rights import grant_depositor
from inventory.premisxml import NS, SCHEMA
from inventory.recorder import LocalInventory
from jobs.models import JobEvent, JobSteps
from steering.models import AdminAction, AdminActionItem
from tests.pages.test_objects_pages import ARK, TIFS, V1_JOB, V2_JOB, record_brain
from tests.pages.test_pages_batches_jobs import make_job
from tests.roles import viewer

pytestmark = pytest.mark.django_db

LOC = "http://id.loc.gov/vocabulary/preservation/eventType/"
T0 = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
DELETED_JOB = "jid0000000009"
P = {"p": NS}


def validated(body: bytes):
    """The document, parsed and checked against the PREMIS 3.0 schema kept in the project."""
    doc = etree.fromstring(body)
    schema = etree.XMLSchema(etree.parse(str(SCHEMA)))
    assert schema.validate(doc), schema.error_log
    return doc


def events(doc) -> list[dict]:
    found = []
    for e in doc.findall("p:event", P):
        kind = e.find("p:eventType", P)
        found.append(
            {
                "id": e.findtext("p:eventIdentifier/p:eventIdentifierValue", namespaces=P),
                "type": kind.text,
                "uri": kind.get("valueURI"),
                "detail": e.findtext("p:eventDetailInformation/p:eventDetail", namespaces=P),
                "outcome": e.findtext("p:eventOutcomeInformation/p:eventOutcome", namespaces=P),
                "note": e.findtext(
                    "p:eventOutcomeInformation/p:eventOutcomeDetail/p:eventOutcomeDetailNote",
                    namespaces=P,
                ),
                "agents": [
                    (
                        a.findtext("p:linkingAgentIdentifierType", namespaces=P),
                        a.findtext("p:linkingAgentIdentifierValue", namespaces=P),
                        a.findtext("p:linkingAgentRole", namespaces=P),
                    )
                    for a in e.findall("p:linkingAgentIdentifier", P)
                ],
                "objects": [
                    a.findtext("p:linkingObjectIdentifierValue", namespaces=P)
                    for a in e.findall("p:linkingObjectIdentifier", P)
                ],
            }
        )
    return found


def of_type(doc, kind: str) -> list[dict]:
    return [e for e in events(doc) if e["type"] == kind]


def timeline(jid: str, moves: list[tuple[str, str, str, str]]) -> None:
    """``moves``: (from, to, actor, message), one status version each, a minute apart."""
    for n, (old, new, actor, message) in enumerate(moves):
        JobEvent.objects.create(
            jid=jid,
            bid="bid0000000001",
            from_status=old,
            to_status=new,
            at=T0 + timedelta(minutes=n),
            message=message,
            status_version=n,
            actor=actor,
            exact=True,
        )


def admin_did(action: str, username: str, reason: str, jid: str, after: int) -> None:
    record = AdminAction.objects.create(
        username=username,
        action=action,
        scope="job",
        reason=reason,
        token=f"t-{action}-{jid}-{after}",
        total=1,
        done=1,
    )
    AdminActionItem.objects.create(
        admin_action=record,
        item_id=jid,
        collection="demo",
        after_version=after,
        before_version=after - 1,
        result="done",
    )


def attempt(step: str, token: str, at: str, entries: list[dict], outcome="success") -> dict:
    told = {"step": step, "attempt": token, "at": at, "by": "worker w:1", "outcome": outcome}
    return told | {"entries": entries, "took": 1.0, "to": "", "msg": "", "more": 0, "v": 1}


def steps(jid: str, attempts: list[dict]) -> None:
    record = {"format": 1, "dropped": 0, "dropped_entries": 0, "attempts": attempts}
    JobSteps.objects.create(jid=jid, record=record, read_at=T0)


BAD_MD5, GOOD_MD5, FIXED_MD5 = "0" * 32, "a" * 32, "b" * 32


@pytest.fixture
def history():
    """Brain: v1 by job 1 (minted, stored); v2 by job 2, held and released, failed on a
    digest, edited and resumed; and job 9, of the same ARK, failed and deleted."""
    record_brain(LocalInventory())
    make_job(1, "Completed", ark=ARK)
    make_job(2, "Completed", ark=ARK)
    make_job(9, "Deleted", ark=ARK)
    timeline(
        V1_JOB,
        [
            ("", "Pending", "submission:dana", ""),
            ("Pending", "Estimating", "worker w:1", ""),
            ("Notify", "Completed", "worker w:1", "stored"),
        ],
    )
    steps(
        V1_JOB,
        [
            attempt(
                "Downloading",
                "a1",
                "2026-03-10 09:01:00 +0000",
                [{"k": "digest", "file": TIFS[0], "computed": {"md5": GOOD_MD5}, "ok": None}],
            ),
            attempt(
                "Processing",
                "a2",
                "2026-03-10 09:01:10 +0000",
                [{"k": "ark", "ark": ARK, "how": "minted"}, {"k": "minter", "ark": ARK}],
            ),
            attempt(
                "Storing",
                "a3",
                "2026-03-10 09:01:20 +0000",
                [{"k": "storage", "ark": ARK, "version": 1, "files": 5, "ok": True}],
            ),
        ],
    )
    timeline(
        V2_JOB,
        [
            ("", "Pending", "submission:dana", ""),
            ("Pending", "Held", "admin:olivia", "held by an admin"),
            ("Held", "Pending", "admin:olivia", "released by an admin"),
            ("Pending", "Downloading", "worker w:1", ""),
            ("Downloading", "Failed", "worker w:1", f"md5 mismatch for brain.tif: {BAD_MD5}"),
            ("Failed", "Downloading", "admin:olivia", "edited and resumed"),
            ("Downloading", "Failed", "worker w:1", "connection reset"),
            ("Failed", "Downloading", "admin:ravi", "resumed"),
            ("Notify", "Completed", "worker w:1", "stored"),
        ],
    )
    admin_did("job.hold", "olivia", "checking the deposit's rights first", V2_JOB, 1)
    admin_did("job.release", "olivia", "the rights are cleared", V2_JOB, 2)
    admin_did("job.edit_resume", "olivia", "the depositor sent the right digest", V2_JOB, 5)
    admin_did("job.resume", "ravi", "the content server is back", V2_JOB, 7)
    bad = {"k": "digest", "file": "brain.tif", "expected": {"md5": BAD_MD5}}
    good = {"k": "digest", "file": "brain.tif", "expected": {"md5": FIXED_MD5}}
    steps(
        V2_JOB,
        [
            attempt(
                "Downloading",
                "b1",
                "2026-03-10 09:04:00 +0000",
                [bad | {"computed": {"md5": FIXED_MD5}, "ok": False}],
                outcome="fail",
            ),
            attempt(
                "Downloading",
                "b2",
                "2026-03-10 09:08:00 +0000",
                [good | {"computed": {"md5": FIXED_MD5}, "ok": True}],
            ),
            attempt(
                "Storing",
                "b3",
                "2026-03-10 09:08:30 +0000",
                [{"k": "storage", "ark": ARK, "version": 2, "files": 5, "ok": True}],
            ),
        ],
    )
    timeline(
        DELETED_JOB,
        [
            ("", "Pending", "submission:dana", ""),
            ("Pending", "Failed", "worker w:1", "no such file"),
            ("Failed", "Deleted", "admin:ravi", "deleted by an admin"),
        ],
    )
    admin_did("job.delete", "ravi", "a duplicate of job 2", DELETED_JOB, 2)


@pytest.fixture
def librarian(client):
    client.force_login(viewer(User.objects.create_user("librarian")))
    return client


def test_the_object_export_is_valid_premis_with_the_entity_versions_and_files(librarian, history):
    response = librarian.get(f"/objects/{ARK}/premis.xml")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/xml")
    doc = validated(response.content)
    kinds = {
        o.get("{http://www.w3.org/2001/XMLSchema-instance}type"): o
        for o in doc.findall("p:object", P)
    }
    assert {"premis:intellectualEntity", "premis:representation", "premis:file"} <= set(kinds)
    ids = [o.findtext("p:objectIdentifier/p:objectIdentifierValue", namespaces=P) for o in doc]
    assert ARK in ids and f"{ARK}/v1" in ids and f"{ARK}/v2" in ids
    assert f"{ARK}/v2/producer/brain.tif" in ids and f"{ARK}/v1/producer/notes.txt" in ids
    brain = next(
        o
        for o in doc.findall("p:object", P)
        if o.findtext("p:objectIdentifier/p:objectIdentifierValue", namespaces=P)
        == f"{ARK}/v2/producer/brain.tif"
    )
    chars = brain.find("p:objectCharacteristics", P)
    assert chars.findtext("p:fixity/p:messageDigestAlgorithm", namespaces=P) == "SHA-256"
    assert (
        chars.findtext("p:fixity/p:messageDigest", namespaces=P)
        == f"{len('producer/brain.tif'):064x}"
    )
    assert chars.findtext("p:size", namespaces=P) == "600"
    agents = {
        a.findtext("p:agentIdentifier/p:agentIdentifierValue", namespaces=P): a.findtext(
            "p:agentType", namespaces=P
        )
        for a in doc.findall("p:agent", P)
    }
    assert agents["olivia"] == "person" and agents["ravi"] == "person"
    assert agents["dana"] == "person"
    software = [a for a, kind in agents.items() if kind == "software"]
    assert software and software[0].startswith("merritt-queue ")


def test_every_kind_of_event_the_history_has_is_exported(librarian, history):
    doc = validated(librarian.get(f"/objects/{ARK}/premis.xml").content)
    found = {e["type"]: e["uri"] for e in events(doc)}
    assert found == {
        "ingestion start": LOC + "ins",
        "message digest calculation": LOC + "mes",
        "fixity check": LOC + "fix",
        "identifier assignment": None,
        "accession": LOC + "acc",
        "inventory recording": None,
        "hold": None,
        "release": None,
        "failure": None,
        "metadata modification": LOC + "mem",
        "resume": None,
        "deletion": LOC + "del",
        "ingestion": LOC + "ing",
    }
    (minted,) = of_type(doc, "identifier assignment")
    assert minted["objects"] == [ARK] and "minted" in minted["detail"]
    assert {e["outcome"] for e in of_type(doc, "ingestion")} == {"success"}
    ids = [e["id"] for e in events(doc)]
    assert len(ids) == len(set(ids))
    again = validated(librarian.get(f"/objects/{ARK}/premis.xml").content)
    assert [e["id"] for e in events(again)] == ids  # the same history, the same identifiers


def test_a_fixity_check_against_the_depositors_digest_says_what_was_compared(librarian, history):
    doc = validated(librarian.get(f"/objects/{ARK}/premis.xml").content)
    failed, passed = of_type(doc, "fixity check")
    assert failed["outcome"] == "failure" and passed["outcome"] == "success"
    assert failed["note"] == f"expected md5 {BAD_MD5}; computed md5 {FIXED_MD5}"
    assert passed["objects"] == [f"{ARK}/v2/producer/brain.tif"]
    digests = of_type(doc, "message digest calculation")
    assert f"md5 {GOOD_MD5}" in {d["note"] for d in digests}
    assert [f"{ARK}/v1/{TIFS[0]}"] in [d["objects"] for d in digests]


def test_holds_releases_edits_resumes_and_failures_name_the_admin_and_the_reason(
    librarian, history
):
    doc = validated(librarian.get(f"/objects/{ARK}/premis.xml").content)
    (hold,) = of_type(doc, "hold")
    (release,) = of_type(doc, "release")
    (edit,) = of_type(doc, "metadata modification")
    (resume,) = of_type(doc, "resume")
    for event, who, reason in (
        (hold, "olivia", "checking the deposit's rights first"),
        (release, "olivia", "the rights are cleared"),
        (edit, "olivia", "the depositor sent the right digest"),
        (resume, "ravi", "the content server is back"),
    ):
        assert ("user", who, "implementer") in event["agents"]
        assert reason in event["detail"] and who in event["detail"]
        assert ARK in event["objects"] and f"{ARK}/v2" in event["objects"]
    failures = of_type(doc, "failure")
    assert sorted(f["note"] for f in failures) == [
        "connection reset",
        f"md5 mismatch for brain.tif: {BAD_MD5}",
        "no such file",
    ]
    assert {f["outcome"] for f in failures} == {"failure"}
    (deletion,) = of_type(doc, "deletion")
    assert ("user", "ravi", "implementer") in deletion["agents"]
    assert "a duplicate of job 2" in deletion["detail"] and DELETED_JOB in deletion["detail"]
    (start, *_) = of_type(doc, "ingestion start")
    assert ("depositor", "dana", "submitter") in start["agents"]


def test_a_version_export_has_that_version_and_its_jobs_events_only(librarian, history):
    doc = validated(librarian.get(f"/objects/{ARK}/versions/1/premis.xml").content)
    ids = [o.findtext("p:objectIdentifier/p:objectIdentifierValue", namespaces=P) for o in doc]
    assert f"{ARK}/v1" in ids and f"{ARK}/v2" not in ids
    assert not [i for i in ids if i and i.startswith(f"{ARK}/v2/")]
    assert {e["id"].split("/")[0] for e in events(doc) if e["id"].startswith("jid")} == {V1_JOB}
    assert not of_type(doc, "hold") and not of_type(doc, "deletion")
    assert librarian.get(f"/objects/{ARK}/versions/7/premis.xml").status_code == 404


def test_the_object_page_links_the_export_of_the_object_and_of_each_version(librarian, history):
    page = librarian.get(f"/objects/{ARK}/").content.decode()
    assert f'href="/objects/{ARK}/premis.xml"' in page
    assert f'href="/objects/{ARK}/versions/2/premis.xml"' in page
    assert f'href="/objects/{ARK}/versions/1/premis.xml"' in page
    assert "PREMIS (XML)" in page


def test_only_who_may_read_the_collection_may_export(client, history):
    olga = User.objects.create_user("olga")
    grant_depositor(olga, ["other"])
    dana = User.objects.create_user("dana")
    grant_depositor(dana, ["demo"])
    for url in (f"/objects/{ARK}/premis.xml", f"/objects/{ARK}/versions/1/premis.xml"):
        anonymous = client.get(url)
        assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
        client.force_login(olga)
        refused = client.get(url)
        assert refused.status_code == 404 and b"premis" not in refused.content.lower()
        client.force_login(dana)
        validated(client.get(url).content)
        client.logout()
    nobody = User.objects.create_user("nobody")  # signed in, but given no role (ui.no_role)
    client.force_login(nobody)
    assert client.get(f"/objects/{ARK}/premis.xml").status_code == 403


def test_the_api_exports_for_a_token_within_its_users_collections(client, history):
    olga = User.objects.create_user("olga")
    grant_depositor(olga, ["other"])
    dana = User.objects.create_user("dana")
    grant_depositor(dana, ["demo"])
    url = f"/api/v1/objects/{ARK}/premis.xml"
    assert client.get(url).status_code == 401
    headers = {"Authorization": f"Bearer {ApiToken.issue(dana, 'tests')[1]}"}
    response = client.get(url, headers=headers)
    assert response.status_code == 200
    assert of_type(validated(response.content), "hold")
    version = client.get(f"/api/v1/objects/{ARK}/versions/2/premis.xml", headers=headers)
    assert of_type(validated(version.content), "resume")
    stranger = {"Authorization": f"Bearer {ApiToken.issue(olga, 'tests')[1]}"}
    refused = client.get(url, headers=stranger)
    unknown = client.get("/api/v1/objects/ark:/99999/fk4nothing/premis.xml", headers=stranger)
    assert refused.status_code == unknown.status_code == 404
    assert refused.json()["errors"][0].replace(ARK, "X") == unknown.json()["errors"][0].replace(
        "ark:/99999/fk4nothing", "X"
    )


def test_the_command_writes_the_export_to_a_file_or_the_output(history, tmp_path):
    out = tmp_path / "brain.xml"
    call_command("premis", ARK, "--version", "2", "-o", str(out), stderr=io.StringIO())
    doc = validated(out.read_bytes())
    assert of_type(doc, "metadata modification") and not of_type(doc, "deletion")
    printed = io.StringIO()
    call_command("premis", ARK, stdout=printed)
    assert of_type(validated(printed.getvalue().encode()), "deletion")
    with pytest.raises(CommandError, match="no object"):
        call_command("premis", "ark:/99999/fk4nothing", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no version 7"):
        call_command("premis", ARK, "--version", "7", stdout=io.StringIO())


def test_text_xml_cannot_hold_is_left_out_not_a_broken_document(librarian, history):
    JobEvent.objects.filter(jid=DELETED_JOB, to_status="Failed").update(
        message="bad \x00 byte\x1b[31m and <tags> & such"
    )
    doc = validated(librarian.get(f"/objects/{ARK}/premis.xml").content)
    assert "bad  byte[31m and <tags> & such" in [f["note"] for f in of_type(doc, "failure")]
