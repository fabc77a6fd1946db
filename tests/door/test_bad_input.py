"""The bad-input corpus: every broken input is refused with its exact message, nothing written.

Inputs come from ``tests/fixtures/bad/`` (written by its ``make_corpus.py``) or, when large,
are generated here. Each table row is one input and the one message a librarian or depositor
sees. "Nothing written" means, where the input reaches them: no znode beyond what the
refusal itself must record (a refused batch manifest leaves its Failed batch, never a job),
no mirror row, and no file in the working directory.

Everything runs against real components: ZooKeeper and the Django mirror (``make test``),
and a real HTTP server on 127.0.0.1. Tests that need that server allow loopback explicitly;
the refusal tests run with it disallowed.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
import socket
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core import mail

from batches.models import ApiToken, Batch, Profile
from door.rights import grant_depositor
from door.submission import submit
from jobs.models import Job
from merritt_queue.deposit.containers import ContainerError, unpack
from merritt_queue.deposit.manifest import ManifestError, parse_manifest
from merritt_queue.project import runtime
from merritt_queue.services.errors import FetchError
from merritt_queue.services.fetch import Fetcher
from merritt_queue.services.netpolicy import check_url
from pipeline import batchhandlers as batch_handlers
from pipeline import services

pytest_plugins = ["tests.httpserver"]

BAD = Path(__file__).parents[1] / "fixtures" / "bad"
PROFILE = "http://uc3.cdlib.org/registry/ingest/manifest/"
PROFILES = (
    "mrt-ingest-manifest, mrt-single-file-batch-manifest, mrt-batch-manifest, "
    "mrt-container-batch-manifest"
)
ANY_SCHEME = "(allowed: http, https)"
MANIFEST_LIMIT = 10 * 1024 * 1024


def znodes(client, path: str = "/") -> set[str]:
    """Every znode under the client's chroot."""
    found = set()
    for child in client.get_children(path):
        child_path = f"{path.rstrip('/')}/{child}"
        found |= {child_path} | znodes(client, child_path)
    return found


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir())


@pytest.fixture
def queue(zk_config, settings, tmp_path, db):
    """A real queue (ZooKeeper chroot, mirror DB, working dir) with one profile."""
    settings.ZK_HOSTS, settings.ZK_CHROOT = zk_config.hosts, zk_config.chroot
    settings.MQ_WORK_DIR = str(tmp_path / "work")
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    runtime.close()
    services.reset()
    store = runtime.get_store()
    store.init()
    Profile.objects.create(
        name="demo",
        collection="demo",
        minter_shoulder="ark:/99999/fk4",
        notification_emails="depositor@example.org",
    )
    yield store
    runtime.close()
    services.reset()


# --- manifests -------------------------------------------------------------------------

# (corpus file, submission type, the problems exactly as listed to the librarian)
MANIFESTS = [
    ("empty.checkm", "object-manifest", ["the manifest is empty"]),
    ("blank-lines-only.checkm", "object-manifest", ["the manifest is empty"]),
    (
        "wrong-header.checkm",
        "object-manifest",
        ["line 1: not a checkm 0.7 manifest (first line must be #%checkm_0.7)"],
    ),
    (
        "html-page.checkm",
        "object-manifest",
        [
            "line 1: this is an HTML or XML document, not a checkm manifest "
            "(the URL may lead to a web page, a login or an error page)"
        ],
    ),
    (
        "unknown-profile.checkm",
        "object-manifest",
        [
            f"line 2: unknown profile '{PROFILE}mrt-everything-manifest' "
            f"(expected one of: {PROFILES})"
        ],
    ),
    (
        "fields-without-file-url.checkm",
        "object-manifest",
        ["line 3: #%fields does not list nfo:fileUrl"],
    ),
    (
        "extra-pipes.checkm",
        "object-manifest",
        ["line 4: 7 cells but #%fields lists 5 (extra '|')"],
    ),
    (
        # CRLF line ends are fine; the line numbers still count lines, not '\r's.
        "crlf-with-extra-pipes.checkm",
        "object-manifest",
        ["line 5: 6 cells but #%fields lists 5 (extra '|')"],
    ),
    (
        # A UTF-8 byte order mark is accepted and does not shift the line numbers.
        "utf8-bom-with-bad-row.checkm",
        "object-manifest",
        [f"line 4: URL scheme 'ftp' is not allowed {ANY_SCHEME}"],
    ),
    ("latin1.checkm", "object-manifest", ["line 4: not UTF-8: byte 0xe9 at offset 219"]),
    (
        "utf16.checkm",
        "object-manifest",
        ["the manifest is UTF-16 (it starts with a UTF-16 byte order mark); save it as UTF-8"],
    ),
    (
        "utf16-without-bom.checkm",
        "object-manifest",
        [
            "line 1: NUL byte at offset 1: the manifest is not a text file "
            "(UTF-16 without a byte order mark, or binary); save it as UTF-8"
        ],
    ),
    (
        "unknown-digest-algorithm.checkm",
        "object-manifest",
        ["line 4: unknown digest algorithm 'crc32' (supported: md5, sha1, sha256, sha512)"],
    ),
    (
        "digest-too-short.checkm",
        "object-manifest",
        [
            "line 4: md5 digests are 32 hexadecimal characters, "
            "'0b21c6d48e815dd537d42dc1cfac011' has 31"
        ],
    ),
    (
        "digest-not-hex.checkm",
        "object-manifest",
        [f"line 4: sha1 value '{'z' * 40}' is not hexadecimal"],
    ),
    (
        "digest-without-algorithm.checkm",
        "object-manifest",
        ["line 4: nfo:hashValue is given without nfo:hashAlgorithm"],
    ),
    (
        "ftp-url.checkm",
        "object-manifest",
        [f"line 4: URL scheme 'ftp' is not allowed {ANY_SCHEME}"],
    ),
    (
        "file-url.checkm",
        "object-manifest",
        [f"line 4: URL scheme 'file' is not allowed {ANY_SCHEME}"],
    ),
    (
        "gopher-url.checkm",
        "object-manifest",
        [f"line 4: URL scheme 'gopher' is not allowed {ANY_SCHEME}"],
    ),
    (
        "relative-url.checkm",
        "object-manifest",
        [f"line 4: 'a.jpg' is not a URL (it has no scheme; {ANY_SCHEME[1:]}"],
    ),
    (
        # The password is not repeated in the message (it ends up in e-mails and the UI).
        "url-with-credentials.checkm",
        "object-manifest",
        [
            "line 4: URL 'http://***@example.org/a.jpg' holds a user name or password "
            "(user:password@host); credentials in URLs are not accepted"
        ],
    ),
    (
        "duplicate-file-names.checkm",
        "object-manifest",
        ["line 5: duplicate file name 'a.jpg' (first on line 4)"],
    ),
    (
        "duplicate-local-ids.checkm",
        "single-file-batch-manifest",
        ["line 5: duplicate mrt:localIdentifier 'local-1' (first on line 4)"],
    ),
    (
        "dot-dot-path.checkm",
        "object-manifest",
        ["line 4: file name '../../etc/passwd' contains a '..' segment"],
    ),
    ("absolute-path.checkm", "object-manifest", ["line 4: file name '/etc/passwd' is absolute"]),
    (
        "size-not-a-number.checkm",
        "object-manifest",
        ["line 4: nfo:fileSize '-5' is not a whole number of bytes (0 or more)"],
    ),
    ("no-rows.checkm", "object-manifest", ["no rows: the manifest lists nothing to ingest"]),
    ("no-eof.checkm", "object-manifest", ["no #%eof line: the manifest looks truncated"]),
    ("text-after-eof.checkm", "object-manifest", ["line 6: text after #%eof"]),
    (
        # Valid in itself, but its profile says one object and the submission says a batch.
        "object-profile.checkm",
        "batch-manifest",
        [
            "the submission type is batch-manifest, but the manifest's profile "
            f"{PROFILE}mrt-ingest-manifest is for one object"
        ],
    ),
]


def test_the_corpus_and_the_table_agree():
    assert sorted(name for name, _, _ in MANIFESTS) == sorted(
        p.name for p in (BAD / "manifests").iterdir()
    )


@pytest.mark.parametrize("name, kind, expected", MANIFESTS, ids=[m[0] for m in MANIFESTS])
def test_each_broken_manifest_fails_its_batch_with_the_exact_problems_and_no_job(
    queue, http_server, settings, name, kind, expected
):
    data = (BAD / "manifests" / name).read_bytes()
    if name != "object-profile.checkm":
        with pytest.raises(ManifestError) as caught:
            parse_manifest(data)
        assert caught.value.problems == expected
    (http_server.root / name).write_bytes(data)
    message = run_manifest_batch(queue, http_server, settings, name, kind)
    assert message == "no jobs were created: " + "\n".join(expected)


def run_manifest_batch(queue, http_server, settings, name: str, kind: str) -> str:
    """Submit the served manifest, run the batch handler once; the failed batch's message."""
    settings.MQ_ALLOW_LOOPBACK = True  # the manifest is served by the local test server
    before = znodes(queue.client)
    bid = submit(
        {
            "profile": "demo",
            "submitter": "tester",
            "type": kind,
            "payload_url": http_server.url_for(f"/{name}"),
        }
    ).bid
    assert batch_handlers.run_pending(services.get_services(), bid) == "failed"
    batch = queue.batches.get_batch(bid)
    assert batch.status == "Failed"
    assert not batch.locked
    # The refusal is recorded on the batch alone: no job, no other znode.
    assert all(p.startswith(f"/batches/{bid}") for p in znodes(queue.client) - before)
    assert queue.jobs.list_job_ids() == []
    assert Job.objects.count() == 0
    assert Batch.objects.get(bid=bid).status == "Failed"
    assert files_under(Path(settings.MQ_WORK_DIR)) == []
    (message,) = mail.outbox
    assert message.subject == f"Batch {bid} failed" and message.body == batch.message
    return batch.message


def test_ten_megabytes_of_rows_are_refused_before_parsing(tmp_path):
    row = b"http://example.org/a.jpg | md5 | 0b21c6d48e815dd537d42dc1cfac0111 | 5 | a.jpg\n"
    big = b"#%checkm_0.7\n" + row * (MANIFEST_LIMIT // len(row) + 1)
    with pytest.raises(ManifestError) as caught:
        parse_manifest(big)
    assert caught.value.problems == [
        f"the manifest is {len(big)} bytes, over the limit of {MANIFEST_LIMIT} bytes"
    ]


def test_a_ten_megabyte_manifest_is_refused_while_downloading(queue, http_server, settings):
    row = b"http://example.org/a.jpg |  |  |  | a.jpg\n"
    big = row * (MANIFEST_LIMIT // len(row) + 1)
    (http_server.root / "big.checkm").write_bytes(big)
    message = run_manifest_batch(queue, http_server, settings, "big.checkm", "object-manifest")
    url = http_server.url_for("/big.checkm")
    assert message == (
        f"no jobs were created: {url} is {len(big)} bytes, more than the limit of "
        f"{MANIFEST_LIMIT} bytes"
    )


def test_a_manifest_url_on_loopback_is_refused_when_loopback_is_not_allowed(
    queue, http_server, settings
):
    settings.MQ_ALLOW_LOOPBACK = False
    url = http_server.url_for("/any.checkm")
    bid = submit(
        {"profile": "demo", "submitter": "t", "type": "object-manifest", "payload_url": url}
    ).bid
    assert batch_handlers.run_pending(services.get_services(), bid) == "failed"
    assert queue.batches.get_batch(bid).message == (
        f"no jobs were created: refused {url}: host 127.0.0.1 resolves to a loopback "
        "address 127.0.0.1"
    )
    assert http_server.requests == []
    assert queue.jobs.list_job_ids() == [] and files_under(Path(settings.MQ_WORK_DIR)) == []


# --- containers ------------------------------------------------------------------------

ONLY = "only files and directories are accepted"
CONTAINERS = [
    ("zip-slip.zip", "entry '../../evil.txt' would escape the working directory"),
    ("zip-slip-backslash.zip", "entry '..\\\\..\\\\evil.txt' would escape the working directory"),
    ("zip-absolute.zip", "entry '/tmp/evil.txt' would escape the working directory"),
    ("zip-drive-letter.zip", "entry 'C:/evil.txt' would escape the working directory"),
    ("zip-symlink.zip", f"entry 'link' is a symbolic link; {ONLY}"),
    ("zip-crc-mismatch.zip", "entry 'ok.txt' is corrupt (Bad CRC-32 for file 'ok.txt')"),
    ("zip-truncated.zip", "corrupt zip archive (File is not a zip file)"),
    ("zip-empty.zip", "the archive holds no files"),
    ("not-an-archive.zip", "corrupt zip archive (File is not a zip file)"),
    ("tar-slip.tar", "entry 'dir/../../evil.txt' would escape the working directory"),
    ("tar-absolute.tar", "entry '/etc/cron.d/evil' would escape the working directory"),
    ("tar-symlink.tar", f"entry 'link' is a symbolic link; {ONLY}"),
    ("tar-hardlink.tar", f"entry 'hard' is a hard link; {ONLY}"),
    ("tar-char-device.tar", f"entry 'null' is a character device; {ONLY}"),
    ("tar-block-device.tar", f"entry 'sda' is a block device; {ONLY}"),
    ("tar-fifo.tar", f"entry 'pipe' is a fifo; {ONLY}"),
    ("tar-duplicate-names.tar", "entry 'ok.txt' appears more than once"),
    (
        "tar-gz-truncated.tar.gz",
        "corrupt tar.gz archive "
        "(Compressed file ended before the end-of-stream marker was reached)",
    ),
]


def test_the_container_corpus_and_the_table_agree():
    assert sorted(name for name, _ in CONTAINERS) == sorted(
        p.name for p in (BAD / "containers").iterdir()
    )


@pytest.fixture
def workdir(tmp_path) -> Path:
    """A job's working directory: the archive beside the directory it unpacks into."""
    work = tmp_path / "job"
    work.mkdir()
    return work


def refused_unpack(archive: Path, workdir: Path, **limits) -> str:
    """Unpack into ``producer``; the refusal's message, after checking nothing was left."""
    before = files_under(workdir)
    with pytest.raises(ContainerError) as caught:
        unpack(archive, workdir / "producer", **limits)
    assert files_under(workdir) == before
    assert sorted(p.name for p in workdir.iterdir()) == [archive.name]
    return str(caught.value)


@pytest.mark.parametrize("name, expected", CONTAINERS, ids=[c[0] for c in CONTAINERS])
def test_each_unsafe_or_broken_container_is_refused_and_nothing_is_unpacked(
    workdir, name, expected
):
    archive = workdir / name
    shutil.copyfile(BAD / "containers" / name, archive)
    assert refused_unpack(archive, workdir) == f"{name}: {expected}"


def zip_of(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


def test_a_zip_bomb_is_refused_by_its_ratio_before_a_byte_is_written(workdir):
    bomb = zip_of(workdir / "bomb.zip", {"zeros.bin": bytes(64 * 1024 * 1024)})
    ratio = (64 * 1024 * 1024) / zipfile.ZipFile(bomb).getinfo("zeros.bin").compress_size
    assert refused_unpack(bomb, workdir) == (
        f"bomb.zip: entry 'zeros.bin' expands {ratio:.0f} times (the limit is 200); "
        "refused as a possible decompression bomb"
    )


def test_a_tar_gz_bomb_is_refused_while_it_expands(workdir):
    bomb = workdir / "bomb.tar.gz"
    size = 64 * 1024 * 1024
    with tarfile.open(bomb, "w:gz") as t:
        info = tarfile.TarInfo("zeros.bin")
        info.size = size
        t.addfile(info, io.BytesIO(bytes(size)))
    message = refused_unpack(bomb, workdir)
    assert re.fullmatch(
        r"bomb\.tar\.gz: the archive expands \d+ times \(the limit is 200\); "
        r"refused as a possible decompression bomb",
        message,
    ), message


def test_too_many_members_are_refused(workdir):
    archive = zip_of(workdir / "many.zip", {f"f{i}.txt": b"x" for i in range(6)})
    assert refused_unpack(archive, workdir, max_files=5) == (
        "many.zip: more than 5 entries (the limit)"
    )


def test_the_total_unpacked_size_limit_is_enforced(workdir):
    archive = zip_of(workdir / "big.zip", {"a.bin": b"a" * 600, "b.bin": b"b" * 600})
    assert refused_unpack(archive, workdir, max_total_bytes=1000) == (
        "big.zip: unpacks to more than 1000 bytes (the limit)"
    )


# --- the submission API ----------------------------------------------------------------

API = "/api/v1/batches"
GOOD = {
    "profile": "demo",
    "type": "object-manifest",
    "payload_url": "https://example.org/4blocks.checkm",
    "batchID": "b-1",
}


@pytest.fixture
def api(client, queue, settings):
    """POST to the API with a valid token; afterwards, check that nothing was written."""
    user = get_user_model().objects.create_user("depositor", password="pw")
    grant_depositor(user, ["demo"])
    token = ApiToken.issue(user, "tests")[1]
    before = znodes(queue.client)

    def post(body, content_type="application/json", **extra):
        return client.post(
            API, body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {token}", **extra
        )

    yield post
    assert znodes(queue.client) == before
    assert Batch.objects.count() == 0 and Job.objects.count() == 0
    assert files_under(Path(settings.MQ_WORK_DIR)) == []


def as_json(data) -> bytes:
    return json.dumps(data).encode()


# (what is sent, the status, the errors exactly)
API_CASES = {
    "batchID as a number": (
        as_json(GOOD | {"batchID": 17}),
        400,
        ["batchID must be a string, not int"],
    ),
    "fields of other types": (
        as_json(GOOD | {"erc_who": ["a", "b"], "erc_what": {"x": 1}, "local_id": True}),
        400,
        [
            "erc_who must be a string, not list",
            "erc_what must be a string, not dict",
            "local_id must be a string, not bool",
        ],
    ),
    "missing fields": (
        as_json({"batchID": "b-2"}),
        400,
        [
            "profile is required",
            "type is required",
            "payload_url or an uploaded file is required",
        ],
    ),
    "unknown fields": (
        as_json(GOOD | {"priority": 1, "callback": "https://e.org/"}),
        400,
        ["unknown field 'priority'", "unknown field 'callback'"],
    ),
    "a file inside JSON": (
        as_json(GOOD | {"file": "aGVsbG8="}),
        400,
        ["file is accepted only as a multipart/form-data upload, not in JSON"],
    ),
    "a list instead of an object": (
        as_json([GOOD]),
        400,
        ["the request body must be an object of fields"],
    ),
    "JSON null": (b"null", 400, ["the request body must be an object of fields"]),
    "invalid JSON": (
        b'{"profile": demo}',
        400,
        ["the body is not valid JSON: Expecting value: line 1 column 13 (char 12)"],
    ),
    "a body that is not UTF-8": (
        b'{"profile": "d\xe9mo"}',
        400,
        ["the body is not UTF-8: byte 0xe9 at offset 14"],
    ),
    "credentials in payload_url": (
        as_json(GOOD | {"payload_url": "https://me:secret@example.org/a.checkm"}),
        400,
        [
            "payload_url holds a user name or password (user:password@host); "
            "credentials in URLs are not accepted"
        ],
    ),
    "a non-http payload_url": (
        as_json(GOOD | {"payload_url": "gopher://example.org/1/a"}),
        400,
        ["payload_url must be an http or https URL, not 'gopher'"],
    ),
}


@pytest.mark.parametrize("case", list(API_CASES))
def test_each_bad_api_request_is_refused_with_its_errors_and_writes_nothing(api, case):
    body, status, errors = API_CASES[case]
    response = api(body)
    assert (response.status_code, response.json()) == (status, {"errors": errors})


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", ""])
def test_a_wrong_content_type_is_refused_before_the_body_is_read(api, content_type):
    response = api(as_json(GOOD), content_type=content_type)
    assert response.status_code == 415
    shown = content_type or "(none)"
    assert response.json() == {
        "errors": [
            f"unsupported Content-Type {shown!r}: send application/json, or "
            "multipart/form-data with the payload in the field 'file'"
        ]
    }


def test_a_json_body_over_django_limit_is_refused_by_its_length(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    body = as_json(GOOD | {"erc_what": "x" * 200})
    response = api(body)
    assert response.status_code == 413
    assert response.json() == {
        "errors": [f"the JSON body is {len(body)} bytes, over the limit of 100 bytes"]
    }


def multipart(fields: list[tuple[str, str]], files: list[tuple[str, str, bytes]]):
    """A multipart/form-data body built by hand, so a field may appear twice."""
    boundary = "corpus-boundary"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields
    ]
    parts += [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"; filename="{name}"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n".encode()
        + data
        + b"\r\n"
        for k, name, data in files
    ]
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), (
        f"multipart/form-data; boundary={boundary}"
    )


FORM = [("profile", "demo"), ("type", "file")]


def test_an_upload_over_the_limit_is_refused_by_its_length_before_it_is_read(api, settings):
    settings.MQ_MAX_UPLOAD_BYTES = 10
    body, content_type = multipart(FORM, [("file", "big.bin", b"x" * (2 * 1024 * 1024))])
    response = api(body, content_type=content_type)
    assert response.status_code == 413
    assert response.json() == {
        "errors": [
            f"the request body is {len(body)} bytes; uploads are limited to 10 bytes "
            "(MQ_MAX_UPLOAD_BYTES)"
        ]
    }


def test_an_upload_over_the_limit_within_the_form_allowance_is_refused_by_its_size(api, settings):
    settings.MQ_MAX_UPLOAD_BYTES = 10
    body, content_type = multipart(FORM, [("file", "big.bin", b"x" * 11)])
    response = api(body, content_type=content_type)
    assert response.status_code == 400
    assert response.json() == {
        "errors": [
            "the uploaded file is 11 bytes, over the limit of 10 bytes (MQ_MAX_UPLOAD_BYTES)"
        ]
    }


def test_the_web_form_refuses_an_oversized_upload_by_its_length(
    client, queue, settings, django_user_model
):
    settings.MQ_MAX_UPLOAD_BYTES = 10
    librarian = django_user_model.objects.create_user("librarian", password="pw")
    grant_depositor(librarian, ["demo"])
    client.force_login(librarian)
    before = znodes(queue.client)
    body, content_type = multipart(FORM, [("file", "big.bin", b"x" * (2 * 1024 * 1024))])
    response = client.post("/submit/", body, content_type=content_type)
    assert response.status_code == 413
    assert response.context["refused"] == (
        f"the request body is {len(body)} bytes; uploads are limited to 10 bytes "
        "(MQ_MAX_UPLOAD_BYTES)"
    )
    assert "Nothing was submitted: the request body is" in response.content.decode()
    assert znodes(queue.client) == before and Batch.objects.count() == 0
    assert files_under(Path(settings.MQ_WORK_DIR)) == []


def test_repeated_form_fields_two_files_and_stray_uploads_are_refused(api):
    body, content_type = multipart(
        [*FORM, ("type", "container")],
        [("file", "a.txt", b"a"), ("file", "b.txt", b"b"), ("manifest", "m.checkm", b"m")],
    )
    response = api(body, content_type=content_type)
    assert response.status_code == 400
    assert response.json() == {
        "errors": [
            "field 'type' is given 2 times; give it once",
            "2 files were uploaded; a submission takes one",
            "unknown upload field 'manifest' (the payload goes in 'file')",
        ]
    }


def test_a_malformed_multipart_body_is_refused(api):
    response = api(b"garbage", content_type="multipart/form-data")
    assert response.status_code == 400
    assert response.json() == {
        "errors": ["the multipart body is malformed: Invalid boundary in multipart: None"]
    }


# --- downloads -------------------------------------------------------------------------

CONTENT = b"preservation " * 100


@pytest.fixture
def out(tmp_path) -> Path:
    directory = tmp_path / "downloads"
    directory.mkdir()
    return directory


@pytest.fixture
def fetcher(session_factory, loopback_only):
    """Fetchers whose every connection attempt off 127.0.0.1 fails the test."""

    def make(**kwargs) -> Fetcher:
        options = {"backoff": 0.01, "retries": 1, "session_factory": session_factory}
        return Fetcher(**(options | kwargs))

    return make


def refused_download(fetcher: Fetcher, url: str, out: Path, **kwargs) -> FetchError:
    with pytest.raises(FetchError) as caught:
        fetcher.download(url, out / "payload", **kwargs)
    assert files_under(out) == []
    return caught.value


# URLs refused by the network policy before any connection (loopback not allowed).
POLICY = [
    ("file:///etc/passwd", "scheme 'file' is not allowed (only http, https)"),
    ("ftp://127.0.0.1/a.jpg", "scheme 'ftp' is not allowed (only http, https)"),
    ("gopher://127.0.0.1/1/a", "scheme 'gopher' is not allowed (only http, https)"),
    (
        "http://me:secret@127.0.0.1/a.jpg",
        "the URL holds a user name or password (user:password@host); "
        "credentials in URLs are not accepted",
    ),
    ("http://[::1]/a.jpg", "host ::1 resolves to a loopback address ::1"),
    ("http://2130706433/a.jpg", "host 2130706433 resolves to a loopback address 127.0.0.1"),
    ("http://0177.0.0.1/a.jpg", "host 0177.0.0.1 resolves to a loopback address 127.0.0.1"),
    ("http://0x7f000001/a.jpg", "host 0x7f000001 resolves to a loopback address 127.0.0.1"),
    ("http://127.1/a.jpg", "host 127.1 resolves to a loopback address 127.0.0.1"),
    ("http://10.1.2.3/a.jpg", "host 10.1.2.3 resolves to a private address 10.1.2.3"),
    (
        "http://169.254.169.254/latest/meta-data/",
        "host 169.254.169.254 resolves to a link-local address 169.254.169.254",
    ),
]


@pytest.mark.parametrize("url, reason", POLICY, ids=[u for u, _ in POLICY])
def test_urls_outside_the_network_policy_are_refused_before_connecting(
    fetcher, out, loopback_only, url, reason
):
    error = refused_download(fetcher(), url, out)
    shown = url.replace("me:secret@", "***@")
    assert str(error) == f"refused {shown}: {reason}"
    assert error.retryable is False
    assert loopback_only == []  # not even a connection attempt


def test_a_dns_name_resolving_to_loopback_is_refused_when_loopback_is_not_allowed(
    fetcher, out, loopback_only, http_server
):
    url = f"http://localhost:{http_server.port}/a.jpg"
    error = refused_download(fetcher(), url, out)
    assert re.fullmatch(
        rf"refused {re.escape(url)}: host localhost resolves to a loopback address "
        r"(127\.0\.0\.1|::1)",
        str(error),
    ), error
    assert loopback_only == [] and http_server.requests == []


def test_a_redirect_to_another_allowed_host_is_followed(fetcher, out, http_server):
    (http_server.root / "a.txt").write_bytes(CONTENT)
    other = f"http://localhost:{http_server.port}/a.txt"
    url = http_server.behave("/moved", redirect=other, redirect_status=301)
    result = fetcher(allow_loopback=True).download(url, out / "a.txt")
    assert result.size == len(CONTENT) and files_under(out) == ["a.txt"]


@pytest.mark.parametrize(
    "target, reason",
    [
        (
            "http://169.254.169.254/latest/meta-data/",
            "host 169.254.169.254 resolves to a link-local address 169.254.169.254",
        ),
        ("http://10.0.0.7/admin", "host 10.0.0.7 resolves to a private address 10.0.0.7"),
        ("file:///etc/passwd", "scheme 'file' is not allowed (only http, https)"),
    ],
)
def test_a_redirect_is_checked_like_the_first_url(
    fetcher, out, loopback_only, http_server, target, reason
):
    url = http_server.behave("/bounce", redirect=target)
    error = refused_download(fetcher(allow_loopback=True), url, out)
    assert str(error) == f"refused {target}: {reason}"
    assert set(loopback_only) == {"127.0.0.1"}  # only the first hop was contacted


@pytest.mark.parametrize(
    "target, address",
    [("http://127.0.0.1:8000/admin", "127.0.0.1"), ("http://10.0.0.7/", "10.0.0.7")],
)
def test_a_public_host_may_not_redirect_to_a_local_one_even_when_that_is_allowed(target, address):
    # The redirect hop's policy; the public first hop itself is never contacted in tests.
    with pytest.raises(FetchError) as caught:
        check_url(target, allow_loopback=True, allow_private=True, from_public=True)
    host = target.split("/")[2].split(":")[0]
    assert str(caught.value) == (
        f"refused {target}: a public host redirected to {host}, which resolves to the "
        f"non-public address {address}; a redirect from a public host must stay public"
    )


def test_the_number_of_redirect_hops_is_limited(fetcher, out, http_server):
    url = http_server.behave("/a", redirect="/b")
    http_server.behave("/b", redirect="/a")
    error = refused_download(fetcher(allow_loopback=True, max_redirects=3), url, out)
    assert str(error) == f"{url}: more than 3 redirects; gave up"
    assert len(http_server.requests) == 4


@pytest.mark.parametrize(
    "status, text, retryable", [(404, "404 Not Found", False), (500, "500", True)]
)
def test_error_statuses_are_refused_with_the_status(
    fetcher, out, http_server, status, text, retryable
):
    url = http_server.behave("/broken", status=status)
    error = refused_download(fetcher(allow_loopback=True), url, out)
    if retryable:
        assert str(error) == (
            f"GET {url} failed after 1 attempt: {url} returned 500 Internal Server Error"
        )
    else:
        assert str(error) == f"{url} returned {text}"
    assert error.retryable is retryable


def test_fewer_bytes_than_announced_is_a_truncated_download(fetcher, out, http_server):
    url = http_server.behave("/short", body=CONTENT, announce=len(CONTENT) + 500)
    error = refused_download(fetcher(allow_loopback=True), url, out)
    assert str(error) == (
        f"GET {url} failed after 1 attempt: {url}: server sent {len(CONTENT)} bytes, "
        f"announced {len(CONTENT) + 500}"
    )
    assert error.retryable is True


def test_more_bytes_than_announced_is_caught_by_the_expected_size(fetcher, out, http_server):
    # An HTTP/1.1 client reads exactly the announced length: the manifest's size catches it.
    url = http_server.behave("/long", body=CONTENT, announce=100)
    error = refused_download(fetcher(allow_loopback=True), url, out, expected_size=len(CONTENT))
    assert str(error) == (
        f"size mismatch for {url}: expected {len(CONTENT)} bytes, got 100 (announced by the server)"
    )


def test_more_bytes_than_announced_is_a_failed_download(fetcher, out, http_server):
    import hashlib

    url = http_server.behave("/long", body=CONTENT, announce=100)
    md5 = hashlib.md5(CONTENT).hexdigest()
    error = refused_download(fetcher(allow_loopback=True), url, out, digest=("md5", md5))
    assert str(error) == (
        f"{url}: the server sent more bytes than the 100 of its Content-Length; "
        "the response is not trusted and nothing was kept"
    )


def test_a_server_that_never_answers_hits_the_connect_timeout(fetcher, out, loopback_only):
    # A listening socket whose accept queue is full: the kernel drops further SYNs.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            url = f"http://127.0.0.1:{port}/a.jpg"
            started = time.monotonic()
            error = refused_download(fetcher(allow_loopback=True, timeout=(0.3, 5)), url, out)
    assert time.monotonic() - started < 30
    assert str(error) == f"GET {url} failed after 1 attempt: {url}: connection timed out"
    assert error.retryable is True


def test_a_server_slow_to_answer_hits_the_read_timeout(fetcher, out, http_server):
    url = http_server.behave("/sleepy", body=CONTENT, delay=10)
    error = refused_download(fetcher(allow_loopback=True, timeout=0.3), url, out)
    assert str(error) == f"GET {url} failed after 1 attempt: {url}: read timed out"


def test_a_server_that_trickles_bytes_forever_hits_the_deadline(fetcher, out, http_server):
    url = http_server.behave("/trickle", body=b"", announce=10**9, trickle=0.05)
    started = time.monotonic()
    error = refused_download(fetcher(allow_loopback=True, timeout=1, deadline=1.0), url, out)
    assert time.monotonic() - started < 30
    assert re.fullmatch(
        rf"{re.escape(url)}: still downloading after 1 s, the download deadline "
        r"\(MQ_FETCH_DEADLINE\); stopped after \d+ bytes",
        str(error),
    ), error
    received = int(str(error).rsplit(" ", 2)[-2])
    assert received > 0  # it was sending: no read timeout could have ended it
    assert error.retryable is True


def test_a_compressed_body_is_stored_as_sent_not_inflated(fetcher, out, http_server):
    # Content-Encoding is ignored: the digest of what the server holds is what is checked.
    packed = gzip.compress(CONTENT)
    url = http_server.behave("/gz", body=packed, headers={"Content-Encoding": "gzip"})
    result = fetcher(allow_loopback=True).download(url, out / "payload")
    assert result.size == len(packed) and (out / "payload").read_bytes() == packed
