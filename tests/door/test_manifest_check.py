"""Manifests judged as Merritt judges them: what its ingest accepts passes with a warning,
and the check (page, API, command) lists every error and warning without submitting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from batches.models import ApiToken
from door.rights import grant_depositor
from merritt_queue.deposit.manifest import ManifestError, parse_manifest
from merritt_queue.deposit.manifestcheck import VALUE_LIMIT, check_manifest

SAMPLES = Path(__file__).parents[1] / "fixtures" / "merritt-sample-files"
PROFILE = "http://uc3.cdlib.org/registry/ingest/manifest/"
FIELDS = "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileName"
BATCH = "#%fields | nfo:fileUrl | nfo:fileName | mrt:localIdentifier"
URL = "/api/v1/manifests/check"
pytest_plugins = ["tests.httpserver"]


def checkm(*rows, profile="mrt-ingest-manifest", fields=FIELDS, head="#%checkm_0.7", tail=""):
    lines = [head, f"#%profile | {PROFILE}{profile}", fields, *rows, "#%eof"]
    return "\n".join(line for line in lines if line is not None) + "\n" + tail


def warnings_of(data) -> list[tuple[int | None, str | None, str]]:
    report = check_manifest(data)
    assert report.valid, report.errors
    return [(w.line, w.field, w.message) for w in report.warnings]


# --- what Merritt's ingest accepts ----------------------------------------------------------


def test_no_checkm_declaration_is_accepted_with_a_warning():
    data = checkm("http://h.org/a.jpg", head=None)
    assert len(parse_manifest(data).rows) == 1
    [(line, _, message)] = warnings_of(data)
    assert line == 1 and message.startswith("no #%checkm_0.7 line")


def test_another_checkm_version_is_still_refused():
    with pytest.raises(ManifestError):
        parse_manifest(checkm("http://h.org/a.jpg", head="#%checkm_1.0"))


def test_no_fields_line_takes_the_object_profiles_standard_columns():
    row = f"http://h.org/a.jpg | md5 | {'a' * 32} | 5 | 2024-01-01 | b.jpg | image/jpeg"
    data = checkm(row, fields=None)
    manifest = parse_manifest(data)
    row = manifest.rows[0]
    assert (row.file_name, row.file_size, row.mime_type) == ("b.jpg", 5, "image/jpeg")
    assert manifest.fields[-1] == "mrt:mimeType"
    [(line, _, message)] = warnings_of(data)
    assert line is None and message.startswith("no #%fields line: the profile's standard")


def test_no_fields_line_takes_the_batch_columns():
    row = "http://h.org/a.checkm | | | | | a.checkm | ark:/1/2 | local-1 | Ann | A title | 2020"
    manifest = parse_manifest(checkm(row, profile="mrt-batch-manifest", fields=None))
    assert (manifest.rows[0].local_id, manifest.rows[0].title) == ("local-1", "A title")


def test_no_fields_line_without_a_profile_is_refused():
    data = checkm("http://h.org/a.jpg", fields=None).replace(f"#%profile | {PROFILE}", "#% x")
    report = check_manifest(data)
    assert "no #%fields line (it must list nfo:fileUrl)" in [e.message for e in report.errors]


# --- where Merritt's validator is stricter: warnings -------------------------------------


def test_columns_in_another_order_warn():
    data = checkm("a.jpg | http://h.org/a.jpg", fields="#%fields | nfo:fileName | nfo:fileUrl")
    [(line, field, message)] = warnings_of(data)
    assert line == 3 and "another order" in message


def test_host_without_a_dot_warns():
    [(line, field, message)] = warnings_of(checkm("http://fileserver/a.jpg"))
    assert (line, field) == (4, "nfo:fileUrl") and "'fileserver' has no dot" in message


def test_container_without_an_archive_extension_warns():
    data = checkm("http://h.org/c.bin | c.bin | c1", "http://h.org/d.zip | d.zip | d1",
                  profile="mrt-container-batch-manifest", fields=BATCH)  # fmt: skip
    [(line, field, message)] = warnings_of(data)
    assert (line, field) == (4, "nfo:fileName") and "archive extension" in message


def test_checkm_in_a_batch_of_files_warns():
    data = checkm("http://h.org/x.checkm | x.checkm | x1", profile="mrt-single-file-batch-manifest",
                  fields=BATCH)  # fmt: skip
    [(line, field, message)] = warnings_of(data)
    assert (line, field) == (4, "nfo:fileName") and ".checkm" in message


def test_blank_lines_after_eof_warn_and_text_after_eof_refuses():
    [(line, _, message)] = warnings_of(checkm("http://h.org/a.jpg", tail="\n\n"))
    assert line == 6 and message.startswith("blank lines after #%eof")
    assert warnings_of(checkm("http://h.org/a.jpg")) == []
    with pytest.raises(ManifestError, match="text after #%eof"):
        parse_manifest(checkm("http://h.org/a.jpg", tail="more\n"))


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.glob("*.checkm")))
def test_merritts_samples_have_no_errors_and_no_warnings(name):
    report = check_manifest((SAMPLES / name).read_bytes())
    assert report.valid and report.warnings == () and report.rows > 0


# --- encodings ---------------------------------------------------------------------------


def test_a_stray_nul_in_utf8_is_not_called_utf16():
    data = checkm("http://h.org/a.jpg").encode().replace(b"a.jpg", b"a\0.jpg")
    with pytest.raises(ManifestError) as caught:
        parse_manifest(data)
    [problem] = caught.value.problems
    offset = data.index(b"\0")
    assert problem.startswith(f"NUL byte at line 4, offset {offset}")
    assert "UTF-16" not in problem


def test_utf16_without_a_byte_order_mark_says_utf16():
    with pytest.raises(ManifestError, match="UTF-16 without a byte order mark"):
        parse_manifest(checkm("http://h.org/a.jpg").encode("utf-16-le"))


# --- the report ----------------------------------------------------------------------------


def test_report_has_line_field_value_and_redacts_credentials():
    long_name = "x" * 5000
    data = checkm("http://user:secret@h.org/a.jpg", f"http://h.org/a.jpg | | | big | {long_name}")
    body = check_manifest(data).as_json()
    assert body["valid"] is False and body["rows"] == 0
    assert body["profile"] == f"{PROFILE}mrt-ingest-manifest"
    by_line = {e["line"]: e for e in body["errors"]}
    assert by_line[4]["field"] == "nfo:fileUrl" and "secret" not in json.dumps(body)
    assert all(len(e["value"] or "") <= VALUE_LIMIT for e in body["errors"])


def test_no_message_or_value_quotes_a_password_whatever_the_url_s_fault():
    """A URL refused for having no host, or a whole line quoted as a value (extra '|'), kept
    its user:password; only a value that was one good URL was redacted."""
    data = checkm(
        "https://bob:hunter2@/b.txt",
        "a.txt | https://alice:s3cret@example.org/a.txt | | | x.txt | extra",
    )
    report = json.dumps(check_manifest(data).as_json())
    assert "hunter2" not in report and "s3cret" not in report
    with pytest.raises(ManifestError) as refused:
        parse_manifest(data)
    assert "hunter2" not in str(refused.value)


def test_a_name_the_disk_cannot_hold_is_refused_at_the_door():
    """A segment over NAME_MAX passed the manifest and failed the job later, before the disk."""
    name = "d/" + "x" * 300
    report = check_manifest(checkm(f"http://h.org/a.jpg | | | | {name}"))
    assert not report.valid and "over 255 bytes" in report.errors[0].message


# --- the API, the page and the command ----------------------------------------------------


@pytest.fixture
def person(db, django_user_model):
    user = django_user_model.objects.create_user("dee", password="pw")
    grant_depositor(user, ["demo"])
    return user


def api(client, key, data, **extra):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    return client.post(URL, data, content_type="text/plain", **headers, **extra)


def test_api_reports_valid_invalid_and_warnings(client, person):
    key = ApiToken.issue(person, "tests")[1]
    good = api(client, key, checkm("http://h.org/a.jpg"))
    assert good.status_code == 200
    assert good.json() == {"valid": True, "errors": [], "warnings": [],
                           "profile": f"{PROFILE}mrt-ingest-manifest", "rows": 1}  # fmt: skip
    bad = api(client, key, checkm("ftp://h.org/a.jpg")).json()
    assert bad["valid"] is False
    assert bad["errors"][0] | {"message": ""} == {
        "line": 4, "field": "nfo:fileUrl", "value": "ftp://h.org/a.jpg", "message": ""}  # fmt: skip
    warned = api(client, key, checkm("http://h.org/a.jpg", head=None)).json()
    assert warned["valid"] is True and warned["warnings"][0]["line"] == 1


def test_api_needs_a_token_of_someone_who_may_submit(client, django_user_model, person):
    assert api(client, None, checkm("http://h.org/a.jpg")).status_code == 401
    assert api(client, "nonsense", checkm("http://h.org/a.jpg")).status_code == 401
    reader = django_user_model.objects.create_user("reader")
    key = ApiToken.issue(reader, "tests")[1]
    assert api(client, key, checkm("http://h.org/a.jpg")).status_code == 403


def test_the_page_renders_a_report(client, person):
    client.force_login(person)
    assert client.get("/manifests/check/").status_code == 200
    page = client.post("/manifests/check/", {"text": checkm("http://fileserver/a.jpg")})
    html = page.content.decode()
    assert page.status_code == 200 and "Valid" in html and "has no dot" in html
    page = client.post("/manifests/check/", {"text": checkm("ftp://h.org/a.jpg")})
    html = page.content.decode()
    assert "Refused: 1 error to fix" in html and "nfo:fileUrl" in html
    # The text stays in the form, to be corrected and checked again.
    assert "ftp://h.org/a.jpg\n#%eof\n</textarea>" in html


def test_the_submit_page_links_to_the_check(client, person):
    client.force_login(person)
    assert 'href="/manifests/check/"' in client.get("/submit/").content.decode()


def test_the_page_needs_a_login(client):
    assert client.get("/manifests/check/").status_code == 302


def test_the_command_prints_findings_and_exits_1_on_errors(tmp_path, capsys):
    good = tmp_path / "good.checkm"
    good.write_text(checkm("http://fileserver/a.jpg"))
    call_command("check_manifest", str(good))
    out = capsys.readouterr().out
    assert "valid, 1 row(s), 0 error(s), 1 warning(s)" in out
    assert "warning: line 4 nfo:fileUrl 'http://fileserver/a.jpg': host name" in out
    bad = tmp_path / "bad.checkm"
    bad.write_text(checkm("ftp://h.org/a.jpg"))
    with pytest.raises(SystemExit) as caught:
        call_command("check_manifest", str(bad))
    assert caught.value.code == 1
    assert "error: line 4 nfo:fileUrl 'ftp://h.org/a.jpg'" in capsys.readouterr().out


def test_the_command_fetches_urls_under_the_network_policy_and_hides_credentials(settings):
    settings.MQ_ALLOW_LOOPBACK = False
    with pytest.raises(CommandError) as caught:
        call_command("check_manifest", "http://user:secret@127.0.0.1:9/m.checkm")
    assert "secret" not in str(caught.value) and "could not be fetched" in str(caught.value)


def test_the_command_fetches_a_served_manifest_only_where_the_network_policy_allows(
    http_server, settings, capsys
):
    """The test above is refused for the URL's password before the network policy speaks:
    here a real manifest on a local server is fetched, then refused as a loopback address."""
    (http_server.root / "m.checkm").write_text(checkm("http://h.org/a.jpg"))
    url = http_server.url_for("/m.checkm")
    settings.MQ_ALLOW_LOOPBACK = True
    call_command("check_manifest", url)
    assert "valid, 1 row(s)" in capsys.readouterr().out
    settings.MQ_ALLOW_LOOPBACK = False
    with pytest.raises(CommandError, match="loopback"):
        call_command("check_manifest", url)


def test_an_oversized_check_is_refused_by_its_headers_before_anything_reads_it(client, person):
    """The check's page and API pass the submission's door (door.middleware): a body over
    the manifest limit is refused unread, and a chunked one too; before, the CSRF check read
    a page's whole upload to disk before the view judged its size."""
    from django.conf import settings

    over = str(settings.MQ_MAX_MANIFEST_BYTES + 1024 * 1024)
    client.force_login(person)
    page = client.post("/manifests/check/", {"text": "x"}, CONTENT_LENGTH=over)
    assert page.status_code == 413 and "over the limit" in page.content.decode()
    key = ApiToken.issue(person, "tests")[1]
    assert api(client, key, "x", CONTENT_LENGTH=over).status_code == 413
    chunked = api(client, key, "x", HTTP_TRANSFER_ENCODING="chunked")
    assert chunked.status_code == 411 and "chunked" in chunked.json()["errors"][0]


def test_a_manifest_over_the_forms_memory_cap_is_still_checked(client, person, settings):
    """Django's cap on a form body in memory is not the manifest's limit."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    key = ApiToken.issue(person, "tests")[1]
    rows = [f"http://h.org/f{n:05}.jpg | | | | f{n:05}.jpg" for n in range(200)]
    response = api(client, key, checkm(*rows))
    assert response.status_code == 200 and response.json()["valid"] is True


def test_a_pasted_manifest_over_the_forms_memory_cap_is_refused_with_a_way_out(
    client, person, settings
):
    """Pasted text is a form field, which Django holds in memory under its own cap; past it,
    the page says to upload the manifest as a file (before: a bare 400 Bad Request)."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    client.force_login(person)
    rows = [f"http://h.org/f{n:05}.jpg | | | | f{n:05}.jpg" for n in range(200)]
    page = client.post("/manifests/check/", {"text": checkm(*rows)})
    assert page.status_code == 413 and "as a file" in page.content.decode()
