"""The failed-rows manifest, pure: written as the batch's own checkm, read back by our reader,
its comments one line each; rows matched to failed jobs by the jid comment, else the local
id, and refused otherwise."""

from __future__ import annotations

from dataclasses import replace

from merritt_queue.core import jobparams
from merritt_queue.core.records import JobRecord
from merritt_queue.deposit import failedrows, rowmatch
from merritt_queue.deposit.manifest import parse_manifest

TYPE = "single-file-batch-manifest"


def job(jid, local, url="https://example.org/a.jpg", message="boom", **config) -> JobRecord:
    return JobRecord(
        jid=jid,
        bid="bid0000000001",
        priority=5,
        space_needed=0,
        configuration={
            "payload_url": url,
            "payload_type": "file",
            "filename": url.rsplit("/", 1)[-1],
            "local_id": local,
            "primary_id": "",
            **config,
        },
        status="Failed",
        last_successful_status="Provisioning",
        last_modified="",
        retry_count=0,
        message=message,
        status_version=3,
        identifiers={"primary_id": "", "local_id": [local]},
        metadata={"erc_what": "A | title"},
    )


def failed(j: JobRecord) -> failedrows.FailedJob:
    return failedrows.FailedJob(
        j.jid, j.last_successful_status, j.message, j.configuration, j.identifiers, j.metadata
    )


def test_the_manifest_parses_and_each_comment_is_one_line_without_bars():
    jobs = [
        job("jid0000000001", "r1", message="404 | not\nfound\x00 here"),
        job("jid0000000002", "r2", digest_type="md5", digest_value="a" * 32, file_size=12),
    ]
    text = failedrows.write(failedrows.standard_header(TYPE), [failed(j) for j in jobs])
    manifest = parse_manifest(text)
    assert manifest.kind == "files" and [r.local_id for r in manifest.rows] == ["r1", "r2"]
    assert manifest.rows[1].file_size == 12 and manifest.rows[1].hash_value == "a" * 32
    assert manifest.rows[0].title == "A / title"
    lines = text.splitlines()
    assert "# jid0000000001 failed at Downloading: 404 / not found here" in lines


def test_a_cell_keeps_its_inner_spaces_so_an_unchanged_row_changes_nothing():
    """A title with two spaces came back with one: the preview then listed a change nobody
    made."""
    j = replace(job("jid0000000003", "r3"), metadata={"erc_what": "Tumble Bug, Luna Park.  Sydney"})
    text = failedrows.write(failedrows.standard_header(TYPE), [failed(j)])
    assert parse_manifest(text).rows[0].title == "Tumble Bug, Luna Park.  Sydney"


def test_the_batch_manifest_header_is_kept_as_it_was():
    own = (
        "#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/"
        "mrt-container-batch-manifest\n#%prefix | nfo: | http://x#\n"
        "#%fields | nfo:fileUrl | nfo:fileName | mrt:localIdentifier\n"
        "https://e.org/a.zip | a.zip | a\n"
    )
    header = failedrows.header_of(own, "container-batch-manifest")
    assert header.fields == ("nfo:fileUrl", "nfo:fileName", "mrt:localIdentifier")
    assert "#%prefix | nfo: | http://x#" in header.lines
    # Another kind than the batch's: the standard header of its type instead.
    assert failedrows.header_of(own, TYPE) == failedrows.standard_header(TYPE)


def test_rows_match_by_jid_comment_then_local_id_and_are_refused_otherwise():
    a, b = job("jid0000000001", "r1"), job("jid0000000002", "r2")
    text = (
        failedrows.write(failedrows.standard_header(TYPE), [failed(a)]).replace("#%eof\n", "")
        + "https://example.org/b2.jpg |  |  |  |  | b2.jpg |  | r2 |  | T | \n"
        + "# jid0000000003 done\nhttps://example.org/c.jpg |  |  |  |  | c.jpg |  | r3 |  |  | \n"
        + "https://example.org/d.jpg |  |  |  |  | d.jpg |  | r9 |  |  | \n"
        + "# jid0000000001 again\nhttps://example.org/e.jpg |  |  |  |  | e.jpg |  | r8 |  |  | \n"
        + "#%eof\n"
    )
    manifest = parse_manifest(text)
    matched, refused = rowmatch.match(
        manifest, text, "bid0000000001", [a, b], {"jid0000000003": "Completed"}
    )
    assert [m.job.jid for m in matched] == ["jid0000000001", "jid0000000002"]
    assert matched[1].after["payload_url"] == "https://example.org/b2.jpg"
    assert matched[1].after["filename"] == "b2.jpg"
    whys = {r.line: r.why for r in refused}
    assert len(whys) == 3
    assert any("is Completed, not Failed" in w for w in whys.values())
    assert any("no failed job of this batch matches" in w for w in whys.values())
    assert any("corrected by line" in w for w in whys.values())


def test_a_corrected_size_and_name_are_job_parameters_restarting_early_enough():
    config = {"payload_url": "u", "filename": "a.jpg", "file_size": 5}
    edited = jobparams.edited(config, None, None, {"file_size": "7", "filename": "b.jpg"})
    assert edited.configuration["file_size"] == 7 and edited.configuration["filename"] == "b.jpg"
    assert jobparams.current(edited.configuration, None, None)["file_size"] == "7"
    assert jobparams.default_step("Provisioning", ["file_size"]) == "Estimating"
    assert jobparams.default_step("Provisioning", ["filename"]) == "Downloading"
    assert jobparams.default_step("Processing", ["erc_what"]) == "Processing"


def test_a_value_the_file_cannot_hold_is_not_changed_by_a_row_sent_back_untouched():
    """A ``|`` is written as ``/`` (it would split the row): the same row uploaded again
    must not change the title to what the file could hold."""
    a = job("jid0000000001", "r1")  # its title: "A | title"
    text = failedrows.write(failedrows.standard_header(TYPE), [failed(a)])
    matched, refused = rowmatch.match(parse_manifest(text), text, "bid0000000001", [a], {})
    before = jobparams.current(a.configuration, a.identifiers, a.metadata)
    assert not refused and matched[0].after["erc_what"] == before["erc_what"] == "A | title"
