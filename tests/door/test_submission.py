"""Submitting batches through the API, the form and ``manage.py submit``."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from batches.models import ApiToken, Profile
from door.rights import grant_depositor

URL = "/api/v1/batches"


@pytest.fixture
def queue(process_store):
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    return process_store


@pytest.fixture
def token(db):
    user = get_user_model().objects.create_user("depositor", password="pw")
    grant_depositor(user, ["demo"])
    return ApiToken.issue(user, "tests")[1]


def post(client, token, body, **extra):
    return client.post(
        URL,
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        **extra,
    )


# A single file: a manifest's link is read at the door (tests/door/test_submit_door.py).
GOOD = {
    "profile": "demo",
    "type": "file",
    "payload_url": "https://example.org/4blocks.jpg",
    "batchID": "b-1",
    "erc_what": "Motel Capri",
}


def test_a_json_submission_writes_one_pending_batch_and_answers_at_once(client, queue, token):
    response = post(client, token, GOOD)
    assert response.status_code == 201
    body = response.json()
    batch = queue.batches.get_batch(body["batch_id"])
    assert body == {"batch_id": batch.bid, "batchID": "b-1", "duplicate": False}
    assert batch.status == "Pending"
    assert batch.submission["submitter"] == "depositor"
    assert batch.submission["collection"] == "demo"
    assert batch.submission["payload_url"] == GOOD["payload_url"]
    # Its history's first entry names who submitted it.
    (created,) = batch.history.entries
    assert (created.version, created.to_status) == (0, "Pending")
    assert created.by == "submission:depositor"


def test_the_same_batch_id_twice_returns_the_first_batch_as_duplicate(client, queue, token):
    first = post(client, token, GOOD).json()
    again = post(client, token, GOOD | {"erc_what": "changed"})
    assert again.status_code == 200
    assert again.json() == first | {"duplicate": True, "status": "Pending", "rerun_possible": False}
    assert queue.batches.list_batch_ids() == [first["batch_id"]]


def test_a_bad_request_lists_every_problem_and_writes_nothing(client, queue, token):
    bad = {
        "profile": "nope",
        "type": "tarball",
        "payload_url": "ftp://example.org/x",
        "digest_type": "crc32",
        "batchID": "has/slash",
        "priority": 3,
        "erc_who": 7,
    }
    response = post(client, token, bad)
    assert response.status_code == 400
    problems = response.json()["errors"]
    for expected in (
        "unknown field 'priority'",
        "erc_who must be a string, not int",
        "profile 'nope' does not exist",
        "type 'tarball' is not one of",
        "payload_url must be an http or https URL, not 'ftp'",
        "digest_type and digest_value go together",
        "batchID may hold letters",
    ):
        assert any(expected in p for p in problems), (expected, problems)
    assert queue.batches.list_batch_ids() == []


@pytest.mark.parametrize(
    "body,problem",
    [
        ({"type": "file"}, "payload_url or an uploaded file is required"),
        (
            {"type": "object-manifest", "digest_type": "md5", "digest_value": "xyz"},
            "a digest applies to a single file",
        ),
        (
            {"type": "file", "digest_type": "md5", "digest_value": "abc"},
            "md5 digests are 32 hexadecimal characters",
        ),
        ({"submission_mode": "replace"}, "submission_mode must be add or update"),
        ({"payload_url": "https:///nohost"}, "payload_url has no host"),
    ],
)
def test_each_bad_field_is_refused_with_its_reason(client, queue, token, body, problem):
    data = GOOD | body
    if body.get("type") == "file" and "payload_url" not in body:
        data.pop("payload_url")
    response = post(client, token, data)
    assert response.status_code == 400
    assert any(problem in p for p in response.json()["errors"]), response.json()


def test_malformed_json_and_non_objects_are_refused(client, queue, token):
    response = client.post(
        URL, "{not json", content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 400 and "not valid JSON" in response.json()["errors"][0]
    assert post(client, token, ["a", "list"]).status_code == 400


def test_the_api_needs_a_valid_token(client, queue, token):
    assert post(client, "wrong", GOOD).status_code == 401
    assert client.post(URL, GOOD).status_code == 401
    ApiToken.objects.update(revoked=True)
    assert post(client, token, GOOD).status_code == 401
    assert queue.batches.list_batch_ids() == []


def test_only_post_is_accepted(client, queue, token):
    assert client.get(URL, HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 405


def test_a_multipart_upload_is_kept_under_the_work_dir(client, queue, token, settings):
    payload = io.BytesIO(b"hello preservation")
    payload.name = "../../etc/notes.txt"
    response = client.post(
        URL,
        {"profile": "demo", "type": "file", "file": payload},
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 201, response.json()
    batch = queue.batches.get_batch(response.json()["batch_id"])
    url = batch.submission["payload_url"]
    assert url.startswith(f"file://{settings.MQ_WORK_DIR}/uploads/")
    assert url.endswith("/notes.txt") and batch.submission["filename"] == "notes.txt"


def test_an_oversized_upload_is_refused(client, queue, token, settings):
    settings.MQ_MAX_UPLOAD_BYTES = 4
    payload = io.BytesIO(b"too large")
    payload.name = "big.bin"
    response = client.post(
        URL,
        {"profile": "demo", "type": "file", "file": payload},
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 400
    assert response.json()["errors"] == [
        "the uploaded file is 9 bytes, over the limit of 4 bytes (MQ_MAX_UPLOAD_BYTES)"
    ]


def test_the_submit_command_prints_the_batch_id(queue, capsys):
    call_command(
        "submit", profile="demo", submitter="me", type="file", payload_url="https://e.org/a.jpg"
    )
    bid = capsys.readouterr().out.strip()
    assert queue.batches.get_batch(bid).submission["type"] == "file"


def test_the_submit_command_lists_every_problem(queue):
    with pytest.raises(CommandError, match=r"nothing was submitted:\n  type is required") as e:
        call_command("submit", profile="demo", payload_url="https://e.org/a", digest_type="x")
    assert len(str(e.value).splitlines()) >= 3  # every problem, one a line


def test_the_submit_command_records_the_hosts_login_name_by_default(queue):
    import getpass

    out = io.StringIO()
    call_command("submit", profile="demo", type="file", payload_url="https://e.org/a", stdout=out)
    bid = out.getvalue().split()[0]
    assert queue.batches.get_batch(bid).submission["submitter"] == getpass.getuser()


def test_the_form_submits_for_a_logged_in_user(client, queue, django_user_model):
    user = django_user_model.objects.create_user("librarian", password="pw")
    grant_depositor(user, ["demo"])
    client.force_login(user)
    data = {
        "profile": "demo",
        "type": "file",
        "payload_url": "https://e.org/a.jpg",
        "submission_mode": "add",
    }
    response = client.post("/submit/", data, follow=True)
    assert b"submitted as bid" in response.content
    (bid,) = queue.batches.list_batch_ids()
    assert queue.batches.get_batch(bid).submission["submitter"] == "librarian"


def test_the_form_needs_a_login(client, queue):
    assert client.get("/submit/").status_code == 302
