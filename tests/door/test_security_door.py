"""Issue 11, the submission door: names, identity, roles, READ_ONLY, error reports, uploads.

Users are made here with plain Groups and CollectionScope rows (not through door.rights),
so each test states the rights it relies on.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.test import Client, RequestFactory
from django.views.debug import technical_500_response

from batches.models import ApiToken, Batch, Collection, Profile
from harness.procs import REPO
from merritt_queue.core import planning
from steering.actions.catalog import ACTIONS
from steering.actions.execution import execute
from steering.models import AdminAction, AdminActionItem, CollectionScope

URL = "/api/v1/batches"
GOOD = {"profile": "demo", "type": "file", "payload_url": "https://example.org/a.txt"}


@pytest.fixture
def queue(process_store):
    # An owner's ARK, so a local id is judged for what it holds, not refused for want of it.
    owner = {"owner_ark": "ark:/99999/fk4owner"}
    Profile.objects.create(
        name="demo", collection="demo", minter_shoulder="ark:/99999/fk4", **owner
    )
    Profile.objects.create(name="other", collection="other", minter_shoulder="ark:/99999/fk4")
    return process_store


@pytest.fixture
def person(django_user_model, db):
    def make(name, *groups, collections=None, **fields):
        user = django_user_model.objects.create_user(name, password="pw", **fields)
        for group in groups:
            user.groups.add(Group.objects.get_or_create(name=group)[0])
        if collections is not None:
            CollectionScope.objects.create(user=user, collections=list(collections))
        return user

    return make


@pytest.fixture
def depositor(person):
    return person("dep", "depositor", collections=["demo"])


def key_of(user) -> str:
    return ApiToken.issue(user, "tests")[1]


def post(client, key, body):
    return client.post(
        URL, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )


def nothing_written(queue) -> bool:
    return queue.batches.list_batch_ids() == []


# --- 1: filename is one safe name -----------------------------------------------------

BAD_NAMES = [
    "/tmp/x/pwned.txt",
    "../../../../tmp/x/pwned.txt",
    "sub/dir.txt",
    "..",
    "tab\there.txt",
    "\u00e9" * 200,  # 200 characters, 400 bytes: more than a file system's name
]


@pytest.mark.parametrize("kind", ["file", "container"])
@pytest.mark.parametrize("name", BAD_NAMES)
def test_the_api_refuses_a_filename_that_is_not_one_safe_name(client, queue, depositor, kind, name):
    response = post(client, key_of(depositor), GOOD | {"type": kind, "filename": name})
    assert response.status_code == 400, response.content
    assert any(e.startswith("filename") for e in response.json()["errors"]), response.json()
    assert nothing_written(queue)


def test_a_multipart_filename_field_is_held_to_the_same_rule(client, queue, depositor):
    payload = io.BytesIO(b"bytes")
    payload.name = "fine.txt"
    response = client.post(
        URL,
        {"profile": "demo", "type": "file", "filename": "../../etc/cron.d/x", "file": payload},
        HTTP_AUTHORIZATION=f"Bearer {key_of(depositor)}",
    )
    assert response.status_code == 400
    assert "contains a '..' segment" in response.json()["errors"][0]
    assert nothing_written(queue)
    assert not list(Path(queue_work_dir()).glob("uploads/*"))


def queue_work_dir() -> str:
    from django.conf import settings

    return settings.MQ_WORK_DIR


def test_the_submit_command_refuses_an_unsafe_filename(queue):
    with pytest.raises(CommandError, match=r"filename: file name '/tmp/x/pwned.txt' is absolute"):
        call_command(
            "submit",
            *"--profile demo --submitter me --type file".split(),
            "--payload-url=https://e.org/a",
            "--filename=/tmp/x/pwned.txt",
        )
    assert nothing_written(queue)


def test_the_submit_command_refuses_an_upload_whose_own_name_is_unsafe(queue, tmp_path):
    path = tmp_path / "line\nbreak.txt"
    path.write_bytes(b"payload")
    with pytest.raises(CommandError, match="the uploaded file's name: .* control characters"):
        call_command("submit", "--profile=demo", "--submitter=me", "--type=file", f"--file={path}")
    assert nothing_written(queue)
    assert not list(Path(queue_work_dir()).glob("uploads/*"))


# --- low: control characters and other text that would fail later ------------------------


@pytest.mark.parametrize("field", ["erc_what", "local_id", "erc_who"])
def test_control_characters_in_any_field_are_refused_with_the_rule(client, queue, depositor, field):
    response = post(client, key_of(depositor), GOOD | {field: "a\x1bb"})
    assert response.status_code == 400
    assert response.json()["errors"] == [
        f"{field} contains a control character (tab, line break, NUL ...); "
        "submitted fields are single lines of printable text"
    ]
    assert nothing_written(queue)


# --- 6: READ_ONLY refuses every change ---------------------------------------------------


def test_read_only_refuses_api_submissions_with_503(client, queue, depositor, settings):
    settings.READ_ONLY = True
    response = post(client, key_of(depositor), GOOD)
    assert response.status_code == 503
    assert "read-only at the moment" in response.json()["errors"][0]
    assert nothing_written(queue)


def test_read_only_refuses_the_form_and_says_so(client, queue, depositor, settings):
    settings.READ_ONLY = True
    client.force_login(depositor)
    assert "read-only at the moment" in client.get("/submit/").content.decode()
    response = client.post("/submit/", GOOD | {"submission_mode": "add"})
    assert response.status_code == 503
    assert "read-only at the moment" in response.content.decode()
    assert nothing_written(queue)


def test_read_only_refuses_the_submit_command(queue, settings):
    settings.READ_ONLY = True
    with pytest.raises(CommandError, match="read-only at the moment"):
        call_command(
            "submit",
            "--profile=demo",
            "--submitter=me",
            "--type=file",
            "--payload-url=https://e.org/a",
        )
    assert nothing_written(queue)


def test_read_only_refuses_django_admin_edits(client, queue, django_user_model, settings):
    admin = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    profile = Profile.objects.get(name="demo")
    token, _ = ApiToken.issue(admin, "t")
    settings.READ_ONLY = True
    assert client.get("/admin/batches/profile/add/").status_code == 403
    change = client.post(
        f"/admin/batches/profile/{profile.pk}/change/",
        {
            "name": "demo",
            "collection": "changed",
            "minter_shoulder": "ark:/99999/fk4",
            "default_priority": 5,
            "storage_node": "local",
        },
    )
    assert change.status_code == 403
    assert (
        client.post(f"/admin/batches/profile/{profile.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    client.post("/admin/batches/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    assert client.get("/admin/auth/user/add/").status_code == 403
    assert Profile.objects.get(pk=profile.pk).collection == "demo"
    assert not ApiToken.objects.get(pk=token.pk).revoked
    assert client.get(f"/admin/batches/profile/{profile.pk}/change/").status_code == 200


# --- 7: who may submit --------------------------------------------------------------------


def test_a_deactivated_users_token_is_refused(client, queue, depositor):
    key = key_of(depositor)
    depositor.is_active = False
    depositor.save()
    assert post(client, key, GOOD).status_code == 401
    assert nothing_written(queue)


@pytest.mark.parametrize(
    "groups, collections",
    [
        ((), None),
        (("viewer",), None),
        (("operator",), ["demo"]),
        (("depositor",), None),
        (("depositor",), []),
        (("depositor",), ["other"]),
    ],
)
def test_a_token_without_the_right_to_submit_here_is_refused(
    client, queue, person, groups, collections
):
    key = key_of(person("someone", *groups, collections=collections))
    response = post(client, key, GOOD)
    assert response.status_code == 403, response.content
    assert "someone may not submit" in response.json()["errors"][0]
    assert nothing_written(queue)


def test_an_administrator_submits_anywhere_and_a_depositor_in_scope(
    client, queue, person, depositor
):
    admin = person("boss", "administrator")
    assert post(client, key_of(admin), GOOD | {"profile": "other"}).status_code == 201
    assert post(client, key_of(depositor), GOOD).status_code == 201


def test_a_token_is_only_as_good_as_its_users_rights_now(client, queue, depositor):
    key = key_of(depositor)
    assert post(client, key, GOOD).status_code == 201
    depositor.groups.clear()
    assert post(client, key, GOOD).status_code == 403
    depositor.groups.add(Group.objects.get(name="depositor"))
    CollectionScope.objects.filter(user=depositor).update(collections=["other"])
    assert post(client, key, GOOD).status_code == 403
    assert len(queue.batches.list_batch_ids()) == 1


def test_the_form_refuses_a_user_who_may_not_submit(client, queue, person):
    client.force_login(person("reader", "viewer"))
    response = client.post("/submit/", GOOD | {"submission_mode": "add"})
    assert response.status_code == 403
    assert "submitting needs the depositor role" in response.content.decode()
    assert nothing_written(queue)


def test_the_submit_page_tells_a_viewer_up_front_and_the_navigation_hides_it(client, queue, person):
    client.force_login(person("v", "viewer"))
    page = client.get("/submit/")
    text = page.content.decode()
    assert page.status_code == 403
    assert "You cannot submit here: v may not submit: submitting needs the depositor role" in text
    assert '<form method="post" enctype' not in text
    assert 'href="/submit/"' not in client.get("/batches/").content.decode()


def test_the_submit_form_offers_only_the_depositors_own_profiles(client, queue, depositor):
    client.force_login(depositor)
    text = client.get("/submit/").content.decode()
    # Their only profile, so shown chosen (issue 32).
    assert '<option value="demo" selected>' in text and '<option value="other"' not in text
    assert 'href="/submit/"' in text


def test_a_depositor_group_exists_after_migrating(db):
    assert Group.objects.filter(name="depositor").exists()


def test_an_administrator_lists_revokes_and_rotates_tokens(client, queue, depositor, person):
    admin = person("root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    first, first_key = ApiToken.issue(depositor, "first")
    second, second_key = ApiToken.issue(depositor, "second")
    assert first.key_hash == hashlib.sha256(first_key.encode()).hexdigest()
    page = client.get("/admin/batches/apitoken/").content.decode()
    assert "first" in page and "second" in page and first_key not in page

    client.post("/admin/batches/apitoken/", {"action": "revoke", "_selected_action": [first.pk]})
    assert post(Client(), first_key, GOOD).status_code == 401

    rotated = client.post(
        "/admin/batches/apitoken/",
        {"action": "rotate", "_selected_action": [second.pk]},
        follow=True,
    )
    shown = [str(m) for m in rotated.context["messages"] if "not shown again" in str(m)]
    assert len(shown) == 1
    new_key = shown[0].split(" is ", 1)[1].split(" ", 1)[0]
    assert post(Client(), second_key, GOOD).status_code == 401
    assert post(Client(), new_key, GOOD).status_code == 201
    assert new_key not in client.get("/admin/batches/apitoken/").content.decode()
    assert (
        ApiToken.objects.get(pk=second.pk).key_hash == hashlib.sha256(new_key.encode()).hexdigest()
    )


# --- 8: the submitter is who signed in -----------------------------------------------------


@pytest.mark.parametrize("field", ["submitter", "on_behalf_of"])
def test_a_depositor_cannot_submit_as_someone_else(client, queue, depositor, person, field):
    person("admin", "administrator")
    response = post(client, key_of(depositor), GOOD | {field: "admin"})
    assert response.status_code == 403
    assert "dep may submit only as themselves, not as 'admin'" in response.json()["errors"][0]
    assert nothing_written(queue)


def test_the_submitter_is_the_token_user(client, queue, depositor):
    response = post(client, key_of(depositor), GOOD)
    submission = queue.batches.get_batch(response.json()["batch_id"]).submission
    assert (submission["submitter"], submission["submitted_by"]) == ("dep", "dep")


def test_an_administrator_submits_on_behalf_explicitly_and_both_are_recorded(
    client, queue, depositor, person
):
    admin = person("boss", "administrator", is_staff=True)
    response = post(client, key_of(admin), GOOD | {"on_behalf_of": "dep"})
    assert response.status_code == 201, response.content
    bid = response.json()["batch_id"]
    submission = queue.batches.get_batch(bid).submission
    assert (submission["submitter"], submission["submitted_by"]) == ("dep", "boss")
    assert "submitted_by" in planning.INHERITED  # each job's configuration carries both
    mirrored = Batch.objects.get(bid=bid)
    assert mirrored.submitter == "dep" and mirrored.submission["submitted_by"] == "boss"
    client.force_login(admin)
    page = client.get(f"/batches/{bid}/").content.decode()
    assert "submitted_by" in page and "boss" in page and "dep" in page
    unknown = post(client, key_of(admin), GOOD | {"on_behalf_of": "nobody"})
    assert unknown.status_code == 403 and "not an active user" in unknown.json()["errors"][0]


def test_the_form_records_the_signed_in_user(client, queue, depositor):
    client.force_login(depositor)
    client.post("/submit/", GOOD | {"submission_mode": "add"})
    (bid,) = queue.batches.list_batch_ids()
    submission = queue.batches.get_batch(bid).submission
    assert (submission["submitter"], submission["submitted_by"]) == ("dep", "dep")


def test_the_submit_command_names_the_submitter_and_records_itself(queue, person, capsys):
    call_command(
        "submit", "--profile=demo", "--submitter=me", "--type=file", "--payload-url=https://e.org/a"
    )
    bid = capsys.readouterr().out.strip()
    submission = queue.batches.get_batch(bid).submission
    assert (submission["submitter"], submission["submitted_by"]) == ("me", "manage.py submit")
    person("reader", "viewer")
    with pytest.raises(CommandError, match="submitting needs the depositor role"):
        call_command(
            "submit",
            "--as-user=reader",
            "--profile=demo",
            "--type=file",
            "--payload-url=https://e.org/a",
        )
    assert queue.batches.list_batch_ids() == [bid]


# --- 9: DEBUG off by default, credentials masked, the development key an error -------------


def clean_env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    return env | {
        "MQ_WORK_DIR": str(tmp_path / "work"),
        "DJANGO_SETTINGS_MODULE": "merritt_queue.project.settings",
    }


def test_debug_is_off_by_default_and_the_development_key_is_then_an_error(tmp_path):
    env = clean_env(tmp_path)
    check = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode != 0 and "mq.E030" in check.stderr, (check.stdout, check.stderr)
    show = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"
    done = subprocess.run(
        [sys.executable, "-c", show],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == "False", done.stderr


def hidden(suffix: str) -> str:
    """A credential that neither this file's source lines nor its locals show."""
    return "s3" + "cret" + suffix


def test_error_reports_mask_credentials_in_urls(settings):
    settings.DEBUG = True
    settings.REDIS_URL = f"redis://:{hidden('-redis')}@127.0.0.1:6379/0"
    settings.DATABASE_URL = f"postgres://mq:{hidden('-db')}@db.example.org/mq"
    settings.RQ_QUEUES = {"default": {"URL": settings.REDIS_URL}}
    settings.UPSTREAM = f"see https://user:{hidden('-upstream')}@example.org/x"
    request = RequestFactory().get(
        "/boom",
        REDIS_URL=f"redis://:{hidden('-env')}@127.0.0.1/0",
        HTTP_X_NOTE=f"ftp://a:{hidden('-meta')}@h/",
    )
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        page = technical_500_response(request, *sys.exc_info()).content.decode()
    assert "boom" in page and "UPSTREAM" in page and "user:*****" in page
    assert hidden("") not in page


# --- 10: an upload is refused before its body is read --------------------------------------


def raw_post(
    live_server, path: str, headers: dict, body: bytes = b"x" * 100, wait: float = 20
) -> tuple[int, str, float]:
    """Send headers announcing a huge body but only ``body`` of it; (status, headers,
    seconds). A server that waits for the rest answers nothing: the socket's timeout (``wait``)
    fails the test instead of hanging it."""
    host, port = live_server.url.removeprefix("http://").split(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=wait) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        sock.sendall(head.encode() + body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)  # a socket.timeout here: the server waits for the body
            if not chunk:
                break
            answer += chunk
    status_line, _, rest = answer.decode("latin-1").partition("\r\n")
    return int(status_line.split()[1]), rest, time.monotonic() - started


# Anyone gets a CSRF cookie from the login page; with one, the CSRF check reads the body.
CSRF = "csrftoken=" + "a" * 32
HUGE = {
    "Content-Type": "multipart/form-data; boundary=xyz",
    "Content-Length": str(3 * 1024**3),
    "Cookie": CSRF,
}


@pytest.fixture
def upload_tmp(settings, tmp_path):
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "upload-tmp")
    Path(settings.FILE_UPLOAD_TEMP_DIR).mkdir()
    return Path(settings.FILE_UPLOAD_TEMP_DIR)


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}; {CSRF}"


@pytest.mark.django_db(transaction=True)
def test_an_anonymous_upload_is_sent_to_login_unread(live_server, upload_tmp):
    status, headers, _ = raw_post(live_server, "/submit/", HUGE)
    assert status == 302 and "/accounts/login/" in headers
    assert list(upload_tmp.iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_an_oversized_upload_is_refused_by_its_length_unread(live_server, upload_tmp, person):
    user = person("dep", "depositor", collections=["demo"])
    status, _, _ = raw_post(live_server, "/submit/", HUGE | {"Cookie": session_cookie(user)})
    assert status == 413
    key = ApiToken.issue(user, "t")[1]
    status, _, _ = raw_post(live_server, URL, HUGE | {"Authorization": f"Bearer {key}"})
    assert status == 413
    assert list(upload_tmp.iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_a_signed_in_user_who_may_not_submit_is_refused_unread(live_server, upload_tmp, person):
    user = person("reader", "viewer")
    status, _, _ = raw_post(live_server, "/submit/", HUGE | {"Cookie": session_cookie(user)})
    assert status == 403
    assert list(upload_tmp.iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_a_chunked_upload_is_refused(live_server, upload_tmp, person):
    user = person("dep", "depositor", collections=["demo"])
    headers = {
        "Content-Type": "multipart/form-data; boundary=xyz",
        "Transfer-Encoding": "chunked",
        "Cookie": session_cookie(user),
    }
    status, _, _ = raw_post(live_server, "/submit/", headers, b"64\r\n" + b"x" * 100 + b"\r\n")
    assert status == 411
    assert list(upload_tmp.iterdir()) == []


# --- low: collection mnemonics, the audit CSV ------------------------------------------------


@pytest.mark.parametrize("mnemonic", [".", "..", "a/b", "UPPER"])
def test_a_bad_collection_mnemonic_is_refused_and_nothing_is_left_running(
    queue, person, client, mnemonic
):
    admin = person("boss", "administrator")
    client.force_login(admin)
    page = client.get("/actions/collection.hold/confirm", {"ids": mnemonic}).content.decode()
    assert "is not a collection mnemonic" in page
    record = execute(admin, ACTIONS["collection.hold"], [(mnemonic, None)], "why", token="t1")
    assert record.finished is not None and (record.done, record.skipped) == (0, 1)
    assert "is not a collection mnemonic" in record.items.get().detail
    assert queue.holds.held_collections() == []


def test_the_audit_csv_neutralises_every_cell(client, person):
    admin = person("=HYPERLINK(1)", "administrator")
    record = AdminAction.objects.create(
        user=admin, username=admin.username, action="job.hold", scope="job", reason="ok", token="x"
    )
    AdminActionItem.objects.create(admin_action=record, item_id="jid1", result="done", detail="@x")
    client.force_login(admin)
    rows = list(csv.reader(io.StringIO(client.get("/actions/export.csv").content.decode())))
    assert rows[1][1] == "'=HYPERLINK(1)"
    assert rows[1][-1] == "'@x"


def test_a_collection_scope_takes_only_mnemonics(client, person):
    """Ticked among the collections the queue knows (issue 32): nothing else is taken."""
    Collection.objects.create(mnemonic="demo")
    admin = person("root", is_staff=True, is_superuser=True)
    dep = person("dep", "depositor")
    client.force_login(admin)
    response = client.post(
        "/admin/steering/collectionscope/add/", {"user": dep.pk, "collections": ["demo", ".."]}
    )
    assert response.status_code == 200 and "is not one of the available choices" in (
        response.content.decode()
    )
    assert not CollectionScope.objects.exists()
    client.post("/admin/steering/collectionscope/add/", {"user": dep.pk, "collections": ["demo"]})
    assert CollectionScope.objects.get().collections == ["demo"]


def test_another_depositors_batch_id_is_refused_without_naming_their_batch(
    client, queue, depositor, person
):
    first = post(client, key_of(depositor), GOOD | {"batchID": "mine"}).json()["batch_id"]
    again = post(client, key_of(depositor), GOOD | {"batchID": "mine"})
    assert again.status_code == 200 and again.json()["batch_id"] == first
    other = person("dep2", "depositor", collections=["demo"])
    response = post(client, key_of(other), GOOD | {"batchID": "mine"})
    assert response.status_code == 409 and first not in response.content.decode()
    assert response.json()["errors"] == ["batchID 'mine' is not available; choose another"]
