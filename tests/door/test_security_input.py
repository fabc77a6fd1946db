"""Issue 29, what a depositor sends judged at the door by the rules of what later uses it.

Finding 6: a value the door accepted (a local id with a private-use or control character, a
file name that the ``.part`` suffix pushes past the file system's limit, an ARK too long once
escaped for storage) failed its job later as an internal error. The door now refuses it
naming the field, the row and the rule, and the workers refuse it again by the same rule.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from django.contrib.auth.models import Group

from batches.models import ApiToken, Profile
from merritt_queue.core import tree
from merritt_queue.core.errors import InvalidData
from merritt_queue.deposit.manifest import ManifestError, parse_manifest
from merritt_queue.deposit.safepath import UnsafePath, inside
from merritt_queue.services.errors import StorageError
from merritt_queue.services.storage import LocalStorage, escape_ark
from steering.models import CollectionScope
from tests.pipeline.test_security_disk import only_job, tree_batch

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

URL = "/api/v1/batches"
GOOD = {"profile": "demo", "type": "file", "payload_url": "https://example.org/a.txt"}
PRIVATE = "\ue000"
LONG_NAME = "n" * 251 + ".txt"  # 255 bytes: the file system's limit before ".part"
PERCENT_ARK = "ark:/99999/fk4" + "%" * 240  # 254 characters, 740 bytes once escaped


@pytest.fixture
def queue(process_store):
    Profile.objects.create(
        name="demo",
        collection="demo",
        minter_shoulder="ark:/99999/fk4",
        allow_external_ids=True,
        external_shoulders="ark:/99999/fk4",
        owner_ark="ark:/99999/fk4owner",  # local ids are judged, not refused for want of it
    )
    return process_store


@pytest.fixture
def key(django_user_model, db):
    user = django_user_model.objects.create_user("dep", password="pw")
    user.groups.add(Group.objects.get_or_create(name="depositor")[0])
    CollectionScope.objects.create(user=user, collections=["demo"])
    return ApiToken.issue(user, "tests")[1]


def post(client, key, body):
    return client.post(
        URL, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )


def batch_manifest(row: str) -> str:
    return (
        "#%checkm_0.7\n"
        "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-single-file-batch-manifest\n"
        "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | "
        "nfo:fileLastModified | nfo:fileName | mrt:primaryIdentifier | mrt:localIdentifier | "
        "mrt:creator | mrt:title | mrt:date\n"
        f"{row}\n"
        "#%eof\n"
    )


# --- 6: at the door --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"local_id": f"a{PRIVATE}b"}, "local_id holds U+E000, a private-use character"),
        ({"local_id": "a\U0001f600"}, "local_id holds U+1F600, a character ZooKeeper refuses"),
        ({"local_id": "a\U000e0080"}, "local_id holds U+E0080, an unassigned code point"),
        ({"filename": LONG_NAME}, "ends in a name over 250 bytes"),
        ({"filename": f"a{PRIVATE}.txt"}, "holds U+E000, a private-use character"),
        ({"primary_id": PERCENT_ARK}, "is too long once escaped for storage: 745 bytes"),
        ({"primary_id": f"ark:/99999/fk4{PRIVATE}"}, "holds U+E000, a private-use character"),
    ],
)
def test_the_api_refuses_what_a_worker_could_not_use_naming_field_and_rule(
    client, queue, key, fields, rule
):
    response = post(client, key, GOOD | fields)
    assert response.status_code == 400, response.content
    (problem,) = response.json()["errors"]
    assert rule in problem and next(iter(fields)) in problem
    assert queue.batches.list_batch_ids() == []


def test_a_file_name_of_250_bytes_and_an_ark_that_just_fits_are_accepted(client, queue, key):
    ark = "ark:/99999/fk4ab" + "%" * 76
    assert len(escape_ark(ark) + ".lock") == 255
    response = post(client, key, GOOD | {"filename": "n" * 246 + ".txt", "primary_id": ark})
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    ("cells", "field", "rule"),
    [
        ("| | a\x01b", "mrt:localIdentifier", "holds U+0001, a control character"),
        (f"| | a{PRIVATE}b", "mrt:localIdentifier", "holds U+E000, a private-use character"),
        (f"| {PERCENT_ARK} | x", "mrt:primaryIdentifier", "too long once escaped for storage"),
    ],
)
def test_a_manifest_row_is_refused_naming_line_field_and_rule(cells, field, rule):
    row = f"https://example.org/a.txt | | | | | a.txt {cells} | | |"
    with pytest.raises(ManifestError) as caught:
        parse_manifest(batch_manifest(row))
    (finding,) = caught.value.findings
    assert finding.line == 4 and finding.field == field and rule in finding.text


def test_a_manifest_file_name_that_the_part_suffix_pushes_over_the_limit_is_refused():
    row = f"https://example.org/a.txt | | | | | {LONG_NAME} | | x | | |"
    with pytest.raises(ManifestError, match=r"line 4: .*ends in a name over 250 bytes"):
        parse_manifest(batch_manifest(row))


# --- 6: the workers judge again --------------------------------------------------------


def test_storage_refuses_an_ark_too_long_once_escaped_before_touching_the_disk(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("a")
    storage = LocalStorage(tmp_path / "store")
    with pytest.raises(StorageError, match="too long once escaped for storage"):
        storage.store_version(PERCENT_ARK, tmp_path / "src", None, token="jid0000000001")
    assert not (tmp_path / "store").exists()


def test_a_lock_is_not_named_after_a_value_zookeeper_refuses():
    with pytest.raises(InvalidData, match="U\\+E000, a character ZooKeeper refuses"):
        tree.localid_lock(f"a{PRIVATE}_demo")


def test_the_workers_refuse_a_name_the_part_suffix_pushes_over_the_limit(tmp_path):
    with pytest.raises(UnsafePath, match="ends in a name over 250 bytes"):
        inside(tmp_path, f"producer/{LONG_NAME}")


def test_zookeeper_itself_refuses_the_characters_the_rule_names(process_store):
    """The rule is ZooKeeper's: a node named with them is refused by the server."""
    from kazoo.exceptions import BadArgumentsError

    client = process_store.client
    for ch in (PRIVATE, "\x01", "\U0001f600"):
        with pytest.raises(BadArgumentsError):
            client.create(f"/locks/localid/a{ch}b", makepath=True)
    client.create("/locks/localid/a\u00e9b", makepath=True)


@pytest.mark.parametrize(
    ("configuration", "rule"),
    [
        ({"local_id": f"a{PRIVATE}b"}, "a character ZooKeeper refuses in a node's name"),
        ({"filename": LONG_NAME}, "ends in a name over 250 bytes"),
    ],
)
def test_a_job_written_past_the_door_fails_with_the_rule_not_an_internal_error(
    pipeline, content, configuration, rule
):
    bid = tree_batch(
        pipeline,
        {"payload_type": "file", "payload_url": f"{content.url}/call911.jpg"} | configuration,
    )
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed"
    assert "internal error" not in job.message and rule in job.message


# --- 7: a download of undeclared size reserves disk -------------------------------------


RESERVED = re.compile(r"(\d+) bytes reserved for each")


def test_an_undeclared_size_reserves_the_room_under_the_threshold_and_goes_on(
    pipeline, http_server, settings
):
    """A cap larger than any disk reserves half the room left under the threshold, which
    Provisioning can grant: the job is not left waiting for a share the disk never has."""
    settings.MQ_MAX_DOWNLOAD_BYTES = 1 << 60
    url = http_server.behave("/unsized.bin", body=b"x" * 5000, no_length=True)
    bid = pipeline.submit(type="file", payload_url=url)
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert job.status == "Completed", job.message
    messages = [e.message for e in job.history.entries]
    (reserved,) = [int(m[1]) for m in map(RESERVED.search, messages) if m]
    st = os.statvfs(pipeline.root)
    assert 5000 < reserved <= st.f_blocks * st.f_frsize * settings.MQ_DISK_THRESHOLD // 200


def test_an_undeclared_size_waits_in_estimating_while_the_disk_is_at_its_threshold(
    pipeline, http_server, settings
):
    settings.MQ_DISK_THRESHOLD = 0.001
    url = http_server.behave("/unsized.bin", body=b"x" * 5000, no_length=True)
    bid = pipeline.submit(type="file", payload_url=url)

    def waiting(_batch):
        return any("waiting for disk space" in job.message for job in pipeline.jobs(bid))

    pipeline.run(bid, until=waiting)
    (job,) = pipeline.jobs(bid)
    assert job.status == "Estimating"
    assert "nothing can be reserved for 1 file(s) of undeclared size" in job.message


def test_the_reservation_is_half_the_room_under_the_threshold_shared_and_capped(tmp_path):
    from merritt_queue.deposit.reserve import undeclared_each, undeclared_reserve

    st = os.statvfs(tmp_path)
    total = st.f_blocks * st.f_frsize
    half = (total * 99 // 100 - (total - st.f_bavail * st.f_frsize)) // 2
    assert undeclared_reserve(tmp_path, 1000, 99, 1) == 1000
    assert abs(undeclared_reserve(tmp_path, 1 << 60, 99, 1) - half) < (1 << 24)
    assert abs(undeclared_reserve(tmp_path, 0, 99, 4) - half // 4) < (1 << 24)
    assert undeclared_reserve(tmp_path, 1 << 60, 0, 1) == 0
    # Downloading takes the figure back from what Estimating saved.
    assert undeclared_each(100 + 2 * 700, [100, None, None]) == 700
    assert undeclared_each(100, [100, None]) is None
    assert undeclared_each(100, [100]) is None


def test_a_download_of_undeclared_size_stops_at_what_was_reserved(
    pipeline, http_server, settings, monkeypatch
):
    """Estimating reserves and Downloading stops at one figure, whatever the cap."""
    settings.MQ_MAX_DOWNLOAD_BYTES = 1 << 60
    monkeypatch.setattr("pipeline.download.undeclared_reserve", lambda *_: 1000)
    url = http_server.behave("/unsized.bin", body=b"x" * 50_000, no_length=True)
    bid = pipeline.submit(type="file", payload_url=url)
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert job.status == "Failed" and job.last_successful_status == "Provisioning"
    assert job.message == (
        f"1 of 1 downloads failed:\n- {url} sent more than the 1000 bytes reserved for a "
        "file of undeclared size (the room under MQ_DISK_THRESHOLD when the job was "
        "estimated, at most MQ_MAX_DOWNLOAD_BYTES); stopped"
    )


def test_a_download_cap_larger_than_the_work_disk_is_a_warning(settings, tmp_path):
    from django.core import checks as django_checks

    from merritt_queue.project import checks

    settings.MQ_WORK_DIR = str(tmp_path / "work")
    settings.MQ_MAX_DOWNLOAD_BYTES = 1 << 60
    (warning,) = [m for m in checks.check_download_limits() if m.id == "mq.W024"]
    assert isinstance(warning, django_checks.Warning) and "MQ_MAX_DOWNLOAD_BYTES" in warning.msg
    settings.MQ_MAX_DOWNLOAD_BYTES = 1000
    assert [m.id for m in checks.check_download_limits()] == []


# --- a taken batchID, another collection's ARK: nothing of the other collection --------


@pytest.fixture
def two_collections(queue, django_user_model):
    Profile.objects.create(name="other", collection="other", minter_shoulder="ark:/99999/fk4")

    def depositor(name, collection):
        user = django_user_model.objects.create_user(name, password="pw")
        user.groups.add(Group.objects.get_or_create(name="depositor")[0])
        CollectionScope.objects.create(user=user, collections=[collection])
        return ApiToken.issue(user, "tests")[1]

    return depositor


def test_a_batch_id_taken_elsewhere_gets_one_answer_naming_nobody(client, two_collections):
    mine, same_collection = two_collections("a", "demo"), two_collections("b", "demo")
    elsewhere = two_collections("c", "other")
    first = post(client, mine, GOOD | {"batchID": "taken"})
    assert first.status_code == 201
    refusals = [
        post(client, same_collection, GOOD | {"batchID": "taken"}),
        post(client, elsewhere, GOOD | {"profile": "other", "batchID": "taken"}),
        post(client, mine, GOOD | {"profile": "demo", "batchID": "taken"} | {"erc_what": "x"}),
    ]
    assert refusals[2].status_code == 200  # the same depositor, the same collection
    for response in refusals[:2]:
        assert response.status_code == 409
        assert response.json() == {"errors": ["batchID 'taken' is not available; choose another"]}


def test_the_same_depositor_in_another_collection_is_not_handed_the_first_batch(
    client, two_collections
):
    both = two_collections("a", "demo")
    CollectionScope.objects.filter(user__username="a").update(collections=["demo", "other"])
    first = post(client, both, GOOD | {"batchID": "mine"}).json()["batch_id"]
    response = post(client, both, GOOD | {"profile": "other", "batchID": "mine"})
    assert response.status_code == 409 and first not in response.content.decode()


def test_another_collections_ark_is_refused_without_naming_its_collection(queue):
    from inventory.models import InventoryObject
    from pipeline.objects import change_refusal

    InventoryObject.objects.create(ark="ark:/99999/fk4theirs", collection="secretcoll")
    refusal = change_refusal("demo", "ark:/99999/fk4theirs", Profile.objects.get(name="demo"))
    assert refusal.other_collection and "secretcoll" not in refusal
    assert "ark:/99999/fk4theirs belongs to another collection" in refusal


# --- check a manifest: the batch's row limit, a rate per user ---------------------------


def rows_manifest(rows: int) -> bytes:
    row = "https://example.org/{n}.txt | | | | | {n}.txt | | id{n} | | |\n"
    return batch_manifest("".join(row.format(n=n) for n in range(rows)).rstrip("\n")).encode()


def test_check_a_manifest_refuses_what_a_batch_would_refuse(settings, db):
    from merritt_queue.deposit.manifestcheck import check_manifest
    from pipeline.capacity import batch_row_limit

    settings.MQ_MAX_BATCH_JOBS = 20
    assert batch_row_limit() == 20
    assert check_manifest(rows_manifest(20), max_batch_rows=batch_row_limit()).valid
    report = check_manifest(rows_manifest(21), max_batch_rows=batch_row_limit())
    assert not report.valid
    (error,) = report.errors
    assert error.line == 24 and "a batch may have at most 20 (MQ_MAX_BATCH_JOBS)" in error.message


def test_check_a_manifest_stops_parsing_at_the_limit(settings, monkeypatch):
    from merritt_queue.deposit import manifest
    from merritt_queue.deposit.manifestcheck import check_manifest

    parsed = []
    real = manifest._row
    monkeypatch.setattr(manifest, "_row", lambda n, *a: parsed.append(n) or real(n, *a))
    check_manifest(rows_manifest(500), max_batch_rows=20)
    assert len(parsed) <= 20


def test_the_check_api_is_rate_limited_per_user(client, queue, key, settings):
    settings.MQ_MANIFEST_CHECKS_PER_MINUTE = 3
    body = rows_manifest(2)

    def check(key):
        return client.post(
            "/api/v1/manifests/check",
            body,
            content_type="text/plain",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )

    assert [check(key).status_code for _ in range(4)] == [200, 200, 200, 429]
    refused = check(key)
    assert (
        refused.status_code == 429
        and "MQ_MANIFEST_CHECKS_PER_MINUTE" in refused.json()["errors"][0]
    )
    assert "Retry-After" in refused


# --- notify_emails: mailboxes only ------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    ["x@[127.0.0.1]", "x@[IPv6:::1]", "x@localhost", "x@10.0.0.1", "x@intranet"],
)
def test_notify_emails_takes_mailboxes_only(queue, address):
    from door.submission import SubmissionError, prepare

    with pytest.raises(SubmissionError) as caught:
        prepare(GOOD | {"submitter": "t", "notify_emails": f"ok@example.org, {address}"})
    assert caught.value.problems == [
        f"notify_emails: {address!r} is not a mailbox address (name@domain.example)"
    ]


def test_a_profiles_addresses_are_held_to_the_same_rule(db):
    from django.core.exceptions import ValidationError

    profile = Profile(
        name="p",
        collection="p",
        minter_shoulder="ark:/99999/fk4",
        notification_emails="x@[127.0.0.1]",
    )
    with pytest.raises(ValidationError, match="is not a mailbox address"):
        profile.full_clean()
