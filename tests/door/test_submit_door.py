"""The submission door judges a manifest as the check page does, shows no server path, and
answers a batchID already taken with what became of its batch and the way on (issue 32)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from batches.models import ApiToken, Batch, Profile
from door.rights import grant_depositor
from jobs.models import Job
from mirror import facade as mirror
from pipeline import batchhandlers as batch_handlers
from pipeline import services
from tests.door.test_manifest_check import checkm

pytest_plugins = ["tests.httpserver"]

BAD = checkm("https://h.example.org/a.jpg | md5 | xyz | | a.jpg")  # line 4: not hexadecimal
GOOD = checkm("https://h.example.org/a.jpg | md5 | " + "a" * 32 + " | | a.jpg")
FILES = checkm(
    "https://h.example.org/a.jpg | a.jpg | x",
    profile="mrt-single-file-batch-manifest",
    fields="#%fields | nfo:fileUrl | nfo:fileName | mrt:localIdentifier",
)


@pytest.fixture
def queue(process_store, settings):
    settings.MQ_ALLOW_LOOPBACK = True
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    return process_store


@pytest.fixture
def depositor(db):
    user = get_user_model().objects.create_user("depositor", password="pw")
    grant_depositor(user, ["demo"])
    return user


def upload(data: bytes | str, name: str = "m.checkm") -> io.BytesIO:
    f = io.BytesIO(data.encode() if isinstance(data, str) else data)
    f.name = name
    return f


FORM = {"profile": "demo", "type": "object-manifest", "submission_mode": "add"}


def test_the_form_refuses_an_uploaded_manifest_with_the_check_pages_table(client, queue, depositor):
    client.force_login(depositor)
    page = client.post("/submit/", FORM | {"file": upload(BAD)})
    text = page.content.decode()
    assert page.status_code == 400
    assert "Nothing was submitted" in text and 'class="findings"' in text
    assert "md5 value &#x27;xyz&#x27; is not hexadecimal" in text
    assert "<td>4</td><td>nfo:hashValue</td>" in text
    assert queue.batches.list_batch_ids() == []


def test_the_form_refuses_a_linked_manifest_and_one_it_cannot_read(
    client, queue, depositor, http_server
):
    client.force_login(depositor)
    (http_server.root / "bad.checkm").write_text(BAD)
    page = client.post("/submit/", FORM | {"payload_url": http_server.url_for("/bad.checkm")})
    assert page.status_code == 400 and "is not hexadecimal" in page.content.decode()
    gone = http_server.url_for("/gone.checkm")
    page = client.post("/submit/", FORM | {"payload_url": gone})
    text = page.content.decode()
    assert page.status_code == 400 and "cannot be read now" in text and "404" in text
    assert queue.batches.list_batch_ids() == []
    (http_server.root / "good.checkm").write_text(GOOD)
    page = client.post("/submit/", FORM | {"payload_url": http_server.url_for("/good.checkm")})
    assert page.status_code == 302 and len(queue.batches.list_batch_ids()) == 1


def test_linked_manifests_count_against_the_users_manifest_checks(
    client, queue, depositor, http_server, settings
):
    """Each linked manifest holds a web worker for up to the door's fetch time: a depositor
    who sends many at once is held to the manifest checks' rate, not let tie up the door."""
    settings.MQ_MANIFEST_CHECKS_PER_MINUTE = 2
    token = ApiToken.issue(depositor, "tests")[1]
    (http_server.root / "good.checkm").write_text(GOOD)
    url = http_server.url_for("/good.checkm")

    def send(n):
        body = {"profile": "demo", "type": "object-manifest", "payload_url": url}
        return client.post(
            "/api/v1/batches",
            json.dumps(body | {"batchID": f"linked-{n}"}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )

    answers = [send(n) for n in range(3)]
    assert [a.status_code for a in answers] == [201, 201, 429]
    refused = answers[-1]
    assert "MQ_MANIFEST_CHECKS_PER_MINUTE" in refused.json()["errors"][0]
    assert int(refused["Retry-After"]) >= 1
    assert len(queue.batches.list_batch_ids()) == 2
    fetched = [r for r in http_server.requests if r.path == "/good.checkm"]
    assert len(fetched) == 2  # the refused one was never fetched


def test_the_form_says_which_type_to_pick_for_a_manifest_of_another_kind(client, queue, depositor):
    client.force_login(depositor)
    page = client.post("/submit/", FORM | {"file": upload(FILES)})
    text = page.content.decode()
    assert page.status_code == 400 and "pick the type “A batch of files”" in text
    assert queue.batches.list_batch_ids() == []


def test_the_api_refuses_a_bad_manifest_with_the_check_apis_list(client, queue, depositor):
    token = ApiToken.issue(depositor, "tests")[1]
    response = client.post(
        "/api/v1/batches",
        {"profile": "demo", "type": "object-manifest", "file": upload(BAD)},
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["manifest"]["errors"] == [
        {
            "line": 4,
            "field": "nfo:hashValue",
            "value": "xyz",
            "message": "md5 value 'xyz' is not hexadecimal",
        }
    ]
    assert body["errors"] == ["line 4, nfo:hashValue: md5 value 'xyz' is not hexadecimal"]
    assert queue.batches.list_batch_ids() == []


def test_no_page_shows_an_uploads_server_path(client, queue, depositor, settings):
    client.force_login(depositor)
    page = client.post("/submit/", FORM | {"type": "file", "file": upload(b"bytes", "notes.txt")})
    assert page.status_code == 302
    (bid,) = queue.batches.list_batch_ids()
    assert batch_handlers.run_pending(services.get_services(), bid) == "processing"
    (jid,) = queue.jobs.list_job_ids()
    mirror.full_reconcile(queue)
    for url in (f"/batches/{bid}/", f"/jobs/{jid}/", f"/api/v1/batches/{bid}"):
        text = client.get(url).content.decode()
        assert "file://" not in text and settings.MQ_WORK_DIR not in text, url
    for url in (f"/batches/{bid}/", f"/jobs/{jid}/"):
        assert "uploaded file notes.txt" in client.get(url).content.decode(), url
    # Nor the Django admin's pages of the batch and the job.
    admin = get_user_model().objects.create_superuser("root", password="pw")
    client.force_login(admin)
    for url in (
        reverse("admin:batches_batch_change", args=[Batch.objects.get(bid=bid).pk]),
        reverse("admin:jobs_job_change", args=[Job.objects.get(jid=jid).pk]),
    ):
        page = client.get(url)
        text = page.content.decode()
        assert page.status_code == 200 and "uploaded file notes.txt" in text, url
        assert "file://" not in text and settings.MQ_WORK_DIR not in text, url


def failed_batch(queue, client, batch_id: str) -> str:
    page = client.post(
        "/submit/",
        FORM | {"type": "file", "batchID": batch_id, "payload_url": "https://example.org/a.jpg"},
    )
    assert page.status_code == 302
    bid = queue.batches.find_batch_by_uuid(batch_id)
    queue.batch_moves.transition_batch(bid, "Processing", "checking the submission")
    queue.batch_moves.transition_batch(bid, "Failed", "no jobs were created: line 4: bad")
    mirror.full_reconcile(queue)
    return bid


def test_a_taken_batch_id_says_what_became_of_its_batch_and_keeps_the_form(
    client, queue, depositor
):
    client.force_login(depositor)
    bid = failed_batch(queue, client, "b-9")
    data = FORM | {
        "type": "file",
        "batchID": "b-9",
        "erc_what": "Motel Capri",
        "file": upload(b"corrected", "a.jpg"),
    }
    page = client.post("/submit/", data)
    text = page.content.decode()
    assert page.status_code == 409
    assert f'href="/batches/{bid}/"' in text and "Failed" in text
    assert "no jobs were created: line 4: bad" in text
    assert 'value="Motel Capri"' in text and 'value="b-9"' in text  # the form kept
    assert "The file a.jpg is kept for your next try" in text
    assert "Run again" in text
    # Run again: a new batch of the failed batch's batchID, with the corrected upload.
    page = client.post("/submit/", data | {"rerun": "on", "file": upload(b"corrected", "b.jpg")})
    assert page.status_code == 302
    again = [b for b in queue.batches.list_batch_ids() if b != bid]
    assert len(again) == 1 and queue.batches.get_batch(again[0]).uuid == "b-9~rerun-1"
    assert queue.batches.get_batch(again[0]).submission["rerun_of"] == bid


def test_the_api_runs_a_failed_batch_id_again_when_asked(client, queue, depositor):
    client.force_login(depositor)
    bid = failed_batch(queue, client, "b-10")
    token = ApiToken.issue(depositor, "tests")[1]
    body = {"profile": "demo", "type": "file", "payload_url": "https://example.org/b.jpg"}
    response = client.post(
        "/api/v1/batches",
        json.dumps(body | {"batchID": "b-10", "rerun": True}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 201 and response.json()["batchID"] == "b-10~rerun-1"
    assert queue.batches.get_batch(response.json()["batch_id"]).submission["rerun_of"] == bid


def test_the_submit_page_has_a_title_its_only_profile_chosen_and_types_in_words(
    client, queue, depositor
):
    client.force_login(depositor)
    text = client.get("/submit/").content.decode()
    assert "<title>Submit a batch · Merritt queue</title>" in text
    assert '<option value="demo" selected>' in text
    assert ">A batch of files<" in text and ">single-file-batch-manifest<" not in text


def test_the_check_page_keeps_the_uploaded_file_and_says_which_type_to_pick(
    client, queue, depositor
):
    client.force_login(depositor)
    page = client.post("/manifests/check/", {"file": upload(FILES, "rows.checkm")})
    text = page.content.decode()
    assert "rows.checkm" in text and "mrt-single-file-batch-manifest" in text
    assert "https://h.example.org/a.jpg | a.jpg | x\n#%eof\n</textarea>" in text  # kept to correct
    assert "Submit it with the type “A batch of files”" in text
    page = client.post("/manifests/check/", {"file": upload(FILES), "type": "object-manifest"})
    text = page.content.decode()
    assert "not “One object, by its manifest”: pick the type “A batch of files”" in text
    assert "Refused: 1 error to fix" in text  # as a submission of that type is refused


def test_a_refused_upload_is_kept_for_the_next_try(client, queue, depositor):
    client.force_login(depositor)
    data = FORM | {"type": "file", "digest_type": "md5", "digest_value": "abc"}
    page = client.post("/submit/", data | {"file": upload(b"bytes", "notes.txt")})
    text = page.content.decode()
    assert page.status_code == 400 and "md5 digests are 32 hexadecimal characters" in text
    assert "The file notes.txt is kept for your next try" in text and 'value="abc"' in text
    assert queue.batches.list_batch_ids() == []


def test_an_upload_is_kept_for_the_retry_of_a_form_shown_again(client, queue, depositor):
    client.force_login(depositor)
    bid = failed_batch(queue, client, "b-11")
    data = FORM | {"type": "file", "batchID": "b-11"}
    page = client.post("/submit/", data | {"file": upload(b"corrected bytes", "a.jpg")})
    text = page.content.decode()
    assert page.status_code == 409 and 'name="use_kept"' in text
    assert "a.jpg is kept" in text and "kept-uploads" not in text and "file://" not in text
    # Run again without choosing the file again: the kept one is submitted.
    page = client.post("/submit/", data | {"rerun": "on", "use_kept": "on"})
    assert page.status_code == 302
    (again,) = [b for b in queue.batches.list_batch_ids() if b != bid]
    submission = queue.batches.get_batch(again).submission
    assert submission["filename"] == "a.jpg"
    saved = Path(url2pathname(urlsplit(submission["payload_url"]).path))
    assert saved.read_bytes() == b"corrected bytes"
    # Used once: it is gone from where it was kept, and not offered again.
    assert "is kept" not in client.get("/submit/").content.decode()
    refused = client.post("/submit/", data | {"batchID": "b-12", "use_kept": "on"})
    assert refused.status_code == 400 and "payload_url or an uploaded file is required" in (
        refused.content.decode()
    )


def test_a_kept_upload_is_another_sessions_to_use_never(client, queue, depositor):
    client.force_login(depositor)
    failed_batch(queue, client, "b-13")
    data = FORM | {"type": "file", "batchID": "b-13"}
    client.post("/submit/", data | {"file": upload(b"mine", "a.jpg")})
    client.logout()
    client.force_login(depositor)  # a new session: nothing kept for it
    page = client.post("/submit/", data | {"batchID": "b-14", "use_kept": "on"})
    assert page.status_code == 400 and len(queue.batches.list_batch_ids()) == 1
