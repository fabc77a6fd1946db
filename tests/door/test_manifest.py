"""checkm manifests: Merritt's samples parse, and every broken manifest gets a precise refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from merritt_queue.deposit.digest import (
    Hashers,
    check_digest_format,
    file_digests,
    normalise_algorithm,
)
from merritt_queue.deposit.manifest import (
    Manifest,
    ManifestError,
    container_type,
    parse_manifest,
)
from merritt_queue.deposit.manifestvalues import rewrite_url

SAMPLES = Path(__file__).parents[1] / "fixtures" / "merritt-sample-files"
PUBLIC = "https://raw.githubusercontent.com/CDLUC3/mrt-doc/main/sampleFiles/"
LOCAL = "http://127.0.0.1:8765/"
PROFILE = "http://uc3.cdlib.org/registry/ingest/manifest/"
FIELDS = "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileName"
BATCH_FIELDS = "#%fields | nfo:fileUrl | nfo:fileName | mrt:localIdentifier | mrt:title"
MD5 = "0b21c6d48e815dd537d42dc1cfac0111"


def sample(name: str) -> Manifest:
    return parse_manifest((SAMPLES / name).read_bytes())


def checkm(*rows: str, profile="mrt-ingest-manifest", fields=FIELDS, eof=True) -> str:
    """A manifest whose first row is line 4."""
    lines = ["#%checkm_0.7", f"#%profile | {PROFILE}{profile}", fields, *rows]
    return "\n".join(lines + (["#%eof"] if eof else [])) + "\n"


def problems(data, **options) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(data, **options)
    return caught.value.problems


# --- Merritt's samples -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, kind, count",
    [
        ("4blocks.checkm", "object", 2),
        ("bigHunt.checkm", "object", 3),
        ("call911.checkm", "object", 2),
        ("sampleBatchOfFiles.checkm", "files", 3),
        ("sampleBatchOfManifests.checkm", "manifests", 3),
        ("sampleBatchOfContainers.checkm", "containers", 3),
    ],
)
def test_every_sample_parses_with_its_kind(name, kind, count):
    manifest = sample(name)
    assert (manifest.kind, len(manifest.rows)) == (kind, count)
    assert manifest.fields[0] == "nfo:fileUrl"
    assert all(row.url.startswith(PUBLIC) for row in manifest.rows)


def test_4blocks_rows_carry_md5_digests():
    manifest = sample("4blocks.checkm")
    assert manifest.profile == PROFILE + "mrt-ingest-manifest"
    first, second = manifest.rows
    assert (first.line, first.file_name, first.hash_algorithm) == (6, "4blocks.jpg", "md5")
    assert first.hash_value == MD5
    assert (second.file_name, second.hash_value) == (
        "4blocks.txt",
        "4dbac258aa1aab9fea0f57712385283d",
    )
    assert first.file_size is None and first.mime_type is None  # 6 cells for 7 fields


def test_4blocks_digests_match_the_sample_files():
    for row in sample("4blocks.checkm").rows:
        assert file_digests(SAMPLES / row.file_name, ["MD5"]) == {"md5": row.hash_value}


def test_bighunt_rows_carry_sizes_without_digests():
    rows = sample("bigHunt.checkm").rows
    assert [r.file_size for r in rows] == [76935, 55408, 33]
    assert [r.hash_algorithm for r in rows] == [None, None, None]
    assert [(SAMPLES / r.file_name).stat().st_size for r in rows] == [76935, 55408, 33]


def test_batch_of_files_carries_creators_titles_and_dates():
    rows = sample("sampleBatchOfFiles.checkm").rows
    assert [r.creator for r in rows] == ["Tracy Seneca", "Tracy Seneca", None]
    assert [r.title for r in rows] == [
        "Golden Dragon Restaurant Sign",
        "Tumble Bug, Luna Park.  Sydney",
        "General Drapery",
    ]
    assert [r.date for r in rows] == ["2009-09-01", None, None]
    assert [r.primary_id for r in rows] == [None, None, None]


def test_batch_of_files_digests_match_the_sample_files():
    for row in sample("sampleBatchOfFiles.checkm").rows[:2]:
        assert file_digests(SAMPLES / row.file_name, [row.hash_algorithm])["md5"] == row.hash_value


def test_batch_of_manifests_rows_are_object_manifests():
    rows = sample("sampleBatchOfManifests.checkm").rows
    assert [r.file_name for r in rows] == ["bigHunt.checkm", "4blocks.checkm", "call911.checkm"]
    assert [r.date for r in rows] == ["2009-09-01", "2009-09-01T00:00:00", "2009-09-01T00:00:00"]
    assert all(sample(r.file_name).kind == "object" for r in rows)


def test_batch_of_containers_rows_are_zips():
    rows = sample("sampleBatchOfContainers.checkm").rows
    assert [container_type(r.file_name) for r in rows] == ["zip", "zip", "zip"]
    assert [r.title for r in rows] == [
        "Husky Chicken",
        "The Outdoor Store, Portland OR",
        "SouvenirsLast Summer",
    ]
    assert [r.creator for r in rows] == ["Tracy Seneca", None, "Tracy Seneca"]


# --- URLs, names and helpers -------------------------------------------------------------


def test_rewrite_url_replaces_only_the_prefix():
    assert rewrite_url(PUBLIC + "4blocks.jpg", (PUBLIC, LOCAL)) == LOCAL + "4blocks.jpg"
    assert rewrite_url("https://example.org/a.jpg", (PUBLIC, LOCAL)) == "https://example.org/a.jpg"


def test_parse_applies_the_url_rewrite_to_every_row():
    data = (SAMPLES / "sampleBatchOfContainers.checkm").read_bytes()
    rows = parse_manifest(data, base_url_rewrite=(PUBLIC, LOCAL)).rows
    assert [r.url for r in rows] == [
        LOCAL + "huskyChicken.zip",
        LOCAL + "outdoorStore.zip",
        LOCAL + "souvenirs.zip",
    ]


def test_file_name_defaults_to_the_decoded_last_url_segment():
    (row,) = parse_manifest(checkm("http://h.org/dir/a%20b.jpg?x=1")).rows
    assert row.file_name == "a b.jpg"


def test_file_names_are_normalised():
    (row,) = parse_manifest(checkm("http://h.org/a | | | | ./dir//a.jpg")).rows
    assert row.file_name == "dir/a.jpg"


def test_digest_spellings_are_normalised():
    (row,) = parse_manifest(checkm(f"http://h.org/a | SHA-1 | {'AB' * 20}")).rows
    assert (row.hash_algorithm, row.hash_value) == ("sha1", "ab" * 20)


def test_fields_are_mapped_by_name_not_position():
    fields = "#%fields | nfo:fileName | nfo:fileSize | NFO:FILEURL"
    (row,) = parse_manifest(checkm("x.txt | 12 | http://h.org/y", fields=fields)).rows
    assert (row.url, row.file_name, row.file_size) == ("http://h.org/y", "x.txt", 12)


def test_comments_blank_lines_and_unknown_headers_are_ignored():
    data = checkm("# a comment", "", "#%future | whatever", f"http://h.org/a.jpg | md5 | {MD5}")
    assert [r.line for r in parse_manifest(data).rows] == [7]


def test_container_type_by_extension():
    names = ["a.ZIP", "a.tar", "a.Tar.Gz", "a.tgz", "a.gz", "a.jpg"]
    assert [container_type(n) for n in names] == ["zip", "tar", "tar.gz", "tar.gz", None, None]


def test_digest_helpers():
    assert [normalise_algorithm(a) for a in ("SHA-256", "sha-256", "SHA256", "Md5")] == [
        "sha256",
        "sha256",
        "sha256",
        "md5",
    ]
    assert check_digest_format("md5", MD5.upper()) is None
    hashers = Hashers(["md5", "sha-512"])
    hashers.update(b"abc")
    assert hashers.hexdigests()["md5"] == "900150983cd24fb0d6963f7d28e17f72"
    assert set(hashers.hexdigests()) == {"md5", "sha512"}


def test_unknown_algorithm_names_the_supported_ones():
    with pytest.raises(ValueError, match=r"^unknown digest algorithm 'crc32' \(supported: md5, "):
        normalise_algorithm("crc32")


# --- broken manifests, one problem each --------------------------------------------------


def test_wrong_header():
    data = checkm("http://h.org/a.jpg").replace("#%checkm_0.7", "#%checkm_0.6")
    assert problems(data) == ["line 1: not a checkm 0.7 manifest (first line must be #%checkm_0.7)"]


def test_missing_profile():
    data = checkm("http://h.org/a.jpg").replace(f"#%profile | {PROFILE}mrt-ingest-manifest\n", "")
    assert problems(data) == [
        "no #%profile line (expected one of: mrt-ingest-manifest, "
        "mrt-single-file-batch-manifest, mrt-batch-manifest, mrt-container-batch-manifest)"
    ]


def test_unknown_profile():
    assert problems(checkm("http://h.org/a.jpg", profile="mrt-magic-manifest")) == [
        f"line 2: unknown profile '{PROFILE}mrt-magic-manifest' (expected one of: "
        "mrt-ingest-manifest, mrt-single-file-batch-manifest, mrt-batch-manifest, "
        "mrt-container-batch-manifest)"
    ]


def test_missing_fields_without_a_profile():
    data = checkm("http://h.org/a.jpg").replace(FIELDS + "\n", "")
    data = data.replace(f"#%profile | {PROFILE}mrt-ingest-manifest\n", "")
    assert "no #%fields line (it must list nfo:fileUrl)" in problems(data)


def test_fields_without_file_url():
    data = checkm("a.jpg", fields="#%fields | nfo:fileName")
    assert problems(data) == ["line 3: #%fields does not list nfo:fileUrl"]


def test_extra_pipes():
    assert problems(checkm("http://h.org/a.jpg | | | | a.jpg | oops")) == [
        "line 4: 6 cells but #%fields lists 5 (extra '|')"
    ]


def test_crlf_and_cr_line_ends_are_accepted():
    for end in ("\r\n", "\r"):
        data = checkm(f"http://h.org/a.jpg | md5 | {MD5}", "http://h.org/b.jpg").replace("\n", end)
        manifest = parse_manifest(data.encode())
        assert [(r.line, r.file_name) for r in manifest.rows] == [(4, "a.jpg"), (5, "b.jpg")]


def test_bad_utf8_names_the_line_and_byte_offset():
    data = checkm("http://h.org/a.jpg | | | | caf\xe9.jpg").encode("latin-1")
    offset = data.index(b"\xe9")
    assert problems(data) == [f"line 4: not UTF-8: byte 0xe9 at offset {offset}"]


def test_bom_is_accepted():
    data = b"\xef\xbb\xbf" + checkm("http://h.org/a.jpg").encode()
    assert parse_manifest(data).rows[0].file_name == "a.jpg"


def test_unknown_digest_algorithm():
    assert problems(checkm("http://h.org/a.jpg | crc32 | 1234abcd")) == [
        "line 4: unknown digest algorithm 'crc32' (supported: md5, sha1, sha256, sha512)"
    ]


def test_digest_of_the_wrong_length():
    assert problems(checkm("http://h.org/a.jpg | sha256 | " + MD5)) == [
        f"line 4: sha256 digests are 64 hexadecimal characters, '{MD5}' has 32"
    ]


def test_digest_that_is_not_hex():
    assert problems(checkm("http://h.org/a.jpg | md5 | " + "z" * 32)) == [
        f"line 4: md5 value '{'z' * 32}' is not hexadecimal"
    ]


def test_digest_without_algorithm():
    assert problems(checkm(f"http://h.org/a.jpg |  | {MD5}")) == [
        "line 4: nfo:hashValue is given without nfo:hashAlgorithm"
    ]


def test_algorithm_without_digest():
    assert problems(checkm("http://h.org/a.jpg | md5 |  ")) == [
        "line 4: nfo:hashAlgorithm 'md5' is given without nfo:hashValue"
    ]


def test_ftp_url():
    assert problems(checkm("ftp://h.org/a.jpg")) == [
        "line 4: URL scheme 'ftp' is not allowed (allowed: http, https)"
    ]


def test_file_url():
    assert problems(checkm("file:///etc/passwd")) == [
        "line 4: URL scheme 'file' is not allowed (allowed: http, https)"
    ]


def test_url_without_host():
    assert problems(checkm("http:///a.jpg")) == ["line 4: URL 'http:///a.jpg' has no host"]


def test_url_without_scheme():
    assert problems(checkm("a.jpg")) == [
        "line 4: 'a.jpg' is not a URL (it has no scheme; allowed: http, https)"
    ]


def test_empty_url():
    assert problems(checkm(" | | | | a.jpg")) == ["line 4: empty nfo:fileUrl"]


def test_negative_size():
    assert problems(checkm("http://h.org/a.jpg | | | -5")) == [
        "line 4: nfo:fileSize '-5' is not a whole number of bytes (0 or more)"
    ]


def test_alphabetic_size():
    assert problems(checkm("http://h.org/a.jpg | | | 12kB")) == [
        "line 4: nfo:fileSize '12kB' is not a whole number of bytes (0 or more)"
    ]


def test_duplicate_file_names():
    data = checkm("http://h.org/a.jpg", "http://h.org/x/a.jpg", "http://h.org/A.jpg")
    assert problems(data) == ["line 5: duplicate file name 'a.jpg' (first on line 4)"]


def test_duplicate_local_ids_in_a_batch():
    rows = ["http://h.org/a.jpg | | id-1", "http://h.org/b.jpg | | id-1", "http://h.org/a.jpg"]
    data = checkm(*rows, profile="mrt-single-file-batch-manifest", fields=BATCH_FIELDS)
    assert problems(data) == ["line 5: duplicate mrt:localIdentifier 'id-1' (first on line 4)"]


def test_dot_dot_path():
    assert problems(checkm("http://h.org/a | | | | img/../../etc/passwd")) == [
        "line 4: file name 'img/../../etc/passwd' contains a '..' segment"
    ]


def test_absolute_path():
    assert problems(checkm("http://h.org/a | | | | /etc/passwd")) == [
        "line 4: file name '/etc/passwd' is absolute"
    ]


def test_backslash_in_name():
    assert problems(checkm("http://h.org/a | | | | img\\a.jpg")) == [
        "line 4: file name 'img\\\\a.jpg' contains a backslash"
    ]


def test_control_character_in_name():
    assert problems(checkm("http://h.org/a | | | | a\x01.jpg")) == [
        "line 4: file name 'a\\x01.jpg' contains control characters"
    ]


def test_name_empty_after_normalisation():
    assert problems(checkm("http://h.org/a | | | | ./")) == [
        "line 4: file name './' is empty once normalised"
    ]


def test_url_ending_with_a_slash_gives_no_name():
    assert problems(checkm("http://h.org/dir/")) == [
        "line 4: no file name: nfo:fileName is empty and the URL path ends with '/'"
    ]


def test_missing_eof():
    assert problems(checkm("http://h.org/a.jpg", eof=False)) == [
        "no #%eof line: the manifest looks truncated"
    ]


def test_text_after_eof():
    data = checkm("http://h.org/a.jpg") + "\nhttp://h.org/b.jpg\n"
    assert problems(data) == ["line 7: text after #%eof"]


def test_no_rows():
    assert problems(checkm()) == ["no rows: the manifest lists nothing to ingest"]


def test_empty_manifest():
    assert problems(b"\n \n") == ["the manifest is empty"]


def test_ten_megabytes_of_rows_are_refused_before_decoding():
    row = f"http://h.org/file.jpg | md5 | {MD5}\n".encode()
    body = checkm().encode().replace(b"#%eof\n", b"")
    data = b"\xff" + body + row * (10 * 1024 * 1024 // len(row) + 1) + b"#%eof\n"
    # The leading \xff would be reported if the bytes were decoded.
    assert problems(data) == [
        f"the manifest is {len(data)} bytes, over the limit of 10485760 bytes"
    ]


def test_too_many_rows():
    data = checkm("http://h.org/a.jpg", "http://h.org/b.jpg", "http://h.org/c.jpg")
    assert problems(data, max_rows=2) == ["line 6: more than 2 rows"]


def test_several_problems_are_all_listed_in_line_order():
    data = checkm(
        "ftp://h.org/a.jpg | crc32 | 1234",
        "http://h.org/b.jpg | | | big",
        "http://h.org/c.jpg | | | | ../c.jpg",
        eof=False,
    ).replace("#%checkm_0.7", "#%checkm")
    assert problems(data) == [
        "line 1: not a checkm 0.7 manifest (first line must be #%checkm_0.7)",
        "line 4: URL scheme 'ftp' is not allowed (allowed: http, https)",
        "line 4: unknown digest algorithm 'crc32' (supported: md5, sha1, sha256, sha512)",
        "line 5: nfo:fileSize 'big' is not a whole number of bytes (0 or more)",
        "line 6: file name '../c.jpg' contains a '..' segment",
        "no #%eof line: the manifest looks truncated",
    ]


def test_problems_are_capped_at_200():
    data = checkm(*[f"ftp://h.org/{i}.jpg" for i in range(250)])
    listed = problems(data)
    assert len(listed) == 201
    assert listed[-1] == "... and 50 more"


def test_manifest_error_is_a_value_error_whose_text_lists_the_problems():
    with pytest.raises(ValueError) as caught:
        parse_manifest(checkm("ftp://h.org/a.jpg", eof=False))
    assert str(caught.value) == (
        "line 4: URL scheme 'ftp' is not allowed (allowed: http, https)\n"
        "no #%eof line: the manifest looks truncated"
    )


def test_bad_utf8_line_is_counted_with_cr_line_ends():
    data = checkm("http://h.org/a.jpg", "http://h.org/\xff.jpg").replace("\n", "\r")
    offset = data.encode("latin-1").index(b"\xff")
    assert problems(data.encode("latin-1")) == [f"line 5: not UTF-8: byte 0xff at offset {offset}"]


def test_indented_header_lines_are_recognised():
    data = checkm("http://h.org/a.jpg").replace("#%eof", "   #%eof")
    assert len(parse_manifest(data).rows) == 1
