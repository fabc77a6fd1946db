"""The pre-flight summary of a submission (issue 36, part 1): what a batch would do, computed
before anything is queued, from the manifest, a HEAD of a sample of its URLs and the mirror.

Served content comes from the tests' local HTTP server, which the network policy lets through
only with MQ_ALLOW_LOOPBACK (as the download tests do); the breakers are off here (their own
test, with ZooKeeper, is test_preservation_preflight_breakers).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from batches.models import Batch, Profile
from batches.preflight import summarise
from inventory.models import InventoryObject, LocalIdentifier
from jobs.models import Job, JobEvent

pytest_plugins = ["tests.httpserver"]

PROFILE = "http://uc3.cdlib.org/registry/ingest/manifest/"
BATCH_FIELDS = "#%fields | nfo:fileUrl | nfo:fileSize | nfo:fileName | mrt:localIdentifier"
OBJECT_FIELDS = "#%fields | nfo:fileUrl | nfo:fileSize | nfo:fileName"


def checkm(*rows, profile="mrt-single-file-batch-manifest", fields=BATCH_FIELDS) -> bytes:
    lines = ["#%checkm_0.7", f"#%profile | {PROFILE}{profile}", fields, *rows, "#%eof"]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(autouse=True)
def _site(db, settings):
    settings.MQ_BREAKER_THRESHOLD = 0  # no ZooKeeper in this module
    settings.MQ_ALLOW_LOOPBACK = True
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    Profile.objects.create(name="other", collection="other", minter_shoulder="ark:/99999/fk4")


def job(jid, status, bid="bid0000000009", collection="demo", **kw) -> Job:
    return Job.objects.create(
        jid=jid, status=status, batch_id=bid, collection=collection, read_at=timezone.now(), **kw
    )


# --- rows and bytes ---------------------------------------------------------------------


def test_rows_declared_and_measured_bytes(http_server):
    (http_server.root / "a.txt").write_bytes(b"x" * 10)
    (http_server.root / "b.txt").write_bytes(b"y" * 7)
    data = checkm(
        f"{http_server.url_for('/a.txt')} | 10 | a.txt | a-1",
        f"{http_server.url_for('/b.txt')} | | b.txt | b-1",
    )
    s = summarise(data, profile="demo")
    assert (s["version"], s["kind"], s["rows"], s["jobs"]) == (1, "files", 2, 2)
    assert (s["declared_bytes"], s["rows_without_size"]) == (10, 1)
    assert s["measured_bytes"] == 17
    assert [(x["line"], x["status"], x["bytes"], x["error"]) for x in s["sample"]] == [
        (4, 200, 10, None),
        (5, 200, 7, None),
    ]
    assert all(isinstance(x["ms"], int) for x in s["sample"])
    assert s["problems"] == 0 and s["computed_at"]
    json.dumps(s)  # what the approval stores and the API returns


def test_a_missing_url_is_reported_not_raised(http_server):
    data = checkm(f"{http_server.url_for('/gone.txt')} | 5 | gone.txt | g-1")
    [row] = summarise(data, profile="demo")["sample"]
    assert row["status"] == 404 and row["bytes"] is None and "404" in row["error"]


def test_a_head_refused_by_the_judged_address_rule_connects_nowhere(http_server, settings):
    settings.MQ_ALLOW_LOOPBACK = False
    (http_server.root / "a.txt").write_bytes(b"x")
    data = checkm(f"{http_server.url_for('/a.txt')} | 1 | a.txt | a-1")
    [row] = summarise(data, profile="demo")["sample"]
    assert row["status"] is None and "loopback" in row["error"]
    assert http_server.requests_for("/a.txt") == []


def test_a_redirect_to_a_refused_address_is_judged_at_its_hop(http_server):
    http_server.behave("/moved", redirect="http://169.254.169.254/latest/meta-data/")
    data = checkm(f"{http_server.url_for('/moved')} | 1 | moved | m-1")
    [row] = summarise(data, profile="demo")["sample"]
    assert row["status"] is None and "link-local" in row["error"]


def test_the_sample_is_bounded_and_spread_over_the_manifest(http_server, settings):
    for i in range(30):
        (http_server.root / f"f{i}.txt").write_bytes(b"z")
    rows = [f"{http_server.url_for(f'/f{i}.txt')} | 1 | f{i}.txt | id-{i}" for i in range(30)]
    s = summarise(checkm(*rows), profile="demo", head_sample=3)
    assert [x["line"] for x in s["sample"]] == [4, 14, 24]
    settings.MQ_PREFLIGHT_HEAD_SAMPLE = 2
    assert len(summarise(checkm(*rows), profile="demo")["sample"]) == 2
    assert summarise(checkm(*rows), profile="demo", head_sample=0)["sample"] == []


def test_a_slow_host_costs_the_time_bound_not_more(http_server, settings):
    settings.MQ_PREFLIGHT_SECONDS = 1
    http_server.behave("/slow.txt", delay=5)
    data = checkm(f"{http_server.url_for('/slow.txt')} | 1 | slow.txt | s-1")
    began = timezone.now()
    [row] = summarise(data, profile="demo")["sample"]
    assert (timezone.now() - began).total_seconds() < 4
    assert row["status"] is None and "1 s" in row["error"]


def test_credentials_are_never_shown():
    # A URL with credentials is refused by the manifest check: it counts as a problem and
    # is never tried, so it cannot appear in the sample.
    data = checkm("http://user:secret@h.example.org/a.txt | 1 | a.txt | a-1")
    s = summarise(data, profile="demo")
    assert s["problems"] == 1 and s["rows"] == 0 and "secret" not in json.dumps(s)


# --- each kind of submission ----------------------------------------------------------------


def test_an_object_manifest_is_one_job_of_its_rows():
    data = checkm(
        "http://h.example.org/a | 3 | a", "http://h.example.org/b | 4 | b",
        profile="mrt-ingest-manifest", fields=OBJECT_FIELDS,
    )  # fmt: skip
    s = summarise(data, profile="demo", head_sample=0)
    assert (s["kind"], s["rows"], s["jobs"], s["declared_bytes"]) == ("object", 2, 1, 7)
    assert s["duplicate_local_ids"] == [] and s["updates"] == []


@pytest.mark.parametrize(
    "profile,kind",
    [
        ("mrt-batch-manifest", "manifests"),
        ("mrt-container-batch-manifest", "containers"),
        ("mrt-single-file-batch-manifest", "files"),
    ],
)
def test_batch_manifests_are_one_job_a_row(profile, kind):
    name = "o.checkm" if kind == "manifests" else "o.zip" if kind == "containers" else "o.txt"
    data = checkm(f"http://h.example.org/{name} | 9 | {name} | L-1", profile=profile)
    s = summarise(data, profile="demo", head_sample=0)
    assert (s["kind"], s["rows"], s["jobs"], s["declared_bytes"]) == (kind, 1, 1, 9)


def test_a_single_file_is_one_row_of_its_own_size():
    s = summarise(b"just a file's bytes\n", profile="demo")
    assert (s["kind"], s["rows"], s["jobs"]) == ("file", 1, 1)
    assert (s["declared_bytes"], s["measured_bytes"], s["rows_without_size"]) == (20, 20, 0)
    assert s["sample"] == [] and s["problems"] == 0


def test_problems_count_the_manifest_checks_errors():
    data = checkm("ftp://h.example.org/a | 1 | a | a-1", "http://h.example.org/b | x | b | b-1")
    s = summarise(data, profile="demo", head_sample=0)
    assert s["problems"] == 2 and s["rows"] == 0


def test_an_unknown_profile_is_refused():
    with pytest.raises(LookupError):
        summarise(checkm("http://h.example.org/a | 1 | a | a-1"), profile="nope")


# --- matches against the mirror ---------------------------------------------------------


def test_duplicate_local_ids():
    rows = [f"http://h.example.org/{n} | 1 | {n} | {lid}" for n, lid in
            [("a", "x"), ("b", "y"), ("c", "x"), ("d", "x")]]  # fmt: skip
    s = summarise(checkm(*rows), profile="demo", head_sample=0)
    assert s["duplicate_local_ids"] == [{"local_id": "x", "lines": [4, 6, 7]}]


def test_rows_that_would_update_an_object_of_the_collection():
    InventoryObject.objects.create(ark="ark:/99999/fk4one", collection="demo", title="One")
    LocalIdentifier.objects.create(collection="demo", local_id="L-1", ark="ark:/99999/fk4one")
    InventoryObject.objects.create(ark="ark:/99999/fk4two", collection="demo", title="Two")
    fields = "#%fields | nfo:fileUrl | nfo:fileName | mrt:primaryIdentifier | mrt:localIdentifier"
    data = checkm(
        "http://h.example.org/a | a | | L-1",
        "http://h.example.org/b | b | ark:/99999/fk4two | L-2",
        "http://h.example.org/c | c | | L-3",
        fields=fields,
    )
    s = summarise(data, profile="demo", head_sample=0)
    assert s["updates"] == [
        {"line": 4, "local_id": "L-1", "ark": "ark:/99999/fk4one", "title": "One"},
        {"line": 5, "local_id": "L-2", "ark": "ark:/99999/fk4two", "title": "Two"},
    ]
    assert s["counts"]["updates"] == 2


def test_another_collections_objects_and_jobs_are_never_shown():
    InventoryObject.objects.create(ark="ark:/99999/fk4their", collection="other", title="Secret")
    LocalIdentifier.objects.create(collection="other", local_id="L-1", ark="ark:/99999/fk4their")
    job("jid0000000001", "Downloading", collection="other", local_id="L-1",
        ark="ark:/99999/fk4their")  # fmt: skip
    fields = "#%fields | nfo:fileUrl | nfo:fileName | mrt:primaryIdentifier | mrt:localIdentifier"
    data = checkm(
        "http://h.example.org/a | a | | L-1",
        "http://h.example.org/b | b | ark:/99999/fk4their | L-2",
        fields=fields,
    )
    s = summarise(data, profile="demo", head_sample=0)
    assert s["updates"] == [] and s["in_flight"] == []
    assert "Secret" not in json.dumps(s) and "fk4their" not in json.dumps(s)


def test_objects_in_flight_in_other_batches():
    LocalIdentifier.objects.create(collection="demo", local_id="L-2", ark="ark:/99999/fk4two")
    job("jid0000000001", "Downloading", local_id="L-1")
    job("jid0000000002", "Held", ark="ark:/99999/fk4two", local_id="old-name")
    job("jid0000000003", "Completed", local_id="L-3")
    job("jid0000000004", "Failed", local_id="L-3")
    job("jid0000000005", "Pending", bid="bid0000000001", local_id="L-3")  # its own batch
    gone = job("jid0000000006", "Pending", local_id="L-3")
    Job.objects.filter(pk=gone.pk).update(removed_at=timezone.now())
    data = checkm(*(f"http://h.example.org/{i} | 1 | {i} | L-{i}" for i in (1, 2, 3)))
    s = summarise(data, profile="demo", exclude_bid="bid0000000001", head_sample=0)
    assert s["in_flight"] == [
        {"line": 4, "local_id": "L-1", "ark": "", "jid": "jid0000000001",
         "bid": "bid0000000009", "status": "Downloading"},
        {"line": 5, "local_id": "L-2", "ark": "ark:/99999/fk4two", "jid": "jid0000000002",
         "bid": "bid0000000009", "status": "Held"},
    ]  # fmt: skip
    with_own = summarise(data, profile="demo", head_sample=0)["in_flight"]
    assert "jid0000000005" in [x["jid"] for x in with_own]


def test_a_big_manifest_takes_a_bounded_number_of_queries():
    rows = [f"http://h.example.org/{i} | 1 | f{i} | L-{i}" for i in range(10_000)]
    LocalIdentifier.objects.create(collection="demo", local_id="L-9999", ark="ark:/99999/fk4z")
    InventoryObject.objects.create(ark="ark:/99999/fk4z", collection="demo", title="Z")
    job("jid0000000001", "Pending", local_id="L-5000")
    with CaptureQueriesContext(connection) as queries:
        s = summarise(checkm(*rows), profile="demo", head_sample=0)
    assert s["rows"] == 10_000 and s["jobs"] == 10_000
    assert [u["local_id"] for u in s["updates"]] == ["L-9999"]
    assert [x["jid"] for x in s["in_flight"]] == ["jid0000000001"]
    assert len(queries) <= 100, len(queries)


def test_long_lists_are_cut_and_counted():
    rows = [f"http://h.example.org/{i} | 1 | f{i} | dup" for i in range(500)]
    s = summarise(checkm(*rows), profile="demo", head_sample=0)
    [dup] = s["duplicate_local_ids"]
    assert len(dup["lines"]) == 500 and s["counts"]["duplicate_local_ids"] == 1


# --- the predicted finish ---------------------------------------------------------------


def test_no_forecast_without_a_measured_throughput():
    s = summarise(checkm("http://h.example.org/a | 1 | a | a-1"), profile="demo", head_sample=0)
    finish = s["predicted_finish"]
    assert finish["seconds"] is None and finish["at"] is None
    assert "no job finished in the last hour" in finish["basis"]


def test_the_finish_is_predicted_from_the_last_hours_throughput():
    from django.core.cache import cache

    cache.clear()
    now = timezone.now()
    for i in range(60):  # 60 finished in the last hour: one a minute
        JobEvent.objects.create(jid=f"jid{i:010d}", to_status="Completed", from_status="Notify",
                                at=now - timedelta(seconds=30 + i * 50))  # fmt: skip
    for i in range(9):
        job(f"jid9{i:09d}", "Pending", bid="bid0000000002")
    job("jid8000000001", "Pending", bid="bid0000000001")  # its own: not ahead of it
    Batch.objects.create(bid="bid0000000001", status="Pending", read_at=now)
    data = checkm("http://h.example.org/a | 1 | a | a-1")
    finish = summarise(data, profile="demo", exclude_bid="bid0000000001", head_sample=0)[
        "predicted_finish"
    ]
    assert finish["seconds"] == 600  # 9 ahead and 1 of its own, at 60 an hour
    assert finish["at"] and finish["jobs_ahead"] == 9 and finish["finished_last_hour"] == 60
    assert "9 jobs ahead" in finish["basis"]


# --- the template and the command -------------------------------------------------------


def test_the_include_renders_every_part_with_table_headers(http_server):
    from django.template.loader import render_to_string

    InventoryObject.objects.create(ark="ark:/99999/fk4one", collection="demo", title="One <b>")
    LocalIdentifier.objects.create(collection="demo", local_id="L-1", ark="ark:/99999/fk4one")
    job("jid0000000001", "Downloading", local_id="L-2")
    data = checkm(
        f"{http_server.url_for('/missing')} | 1 | a | L-1",
        "http://h.example.org/b | 1 | b | L-2",
        "http://h.example.org/c | 1 | c | L-2",
    )
    s = summarise(data, profile="demo", head_sample=1)
    html = render_to_string("batches/_preflight.html", {"preflight": s})
    for caption in ("URLs tried", "Local ids listed twice", "Would update", "Already in flight"):
        assert f"<caption>{caption}" in html
    assert html.count('<th scope="col">') >= 12
    assert "One &lt;b&gt;" in html and "404" in html and "jid0000000001" in html
    assert "not at the current rate" in html


def test_the_command_prints_text_and_json(tmp_path, capsys):
    path = tmp_path / "m.checkm"
    path.write_bytes(checkm("http://h.example.org/a | 5 | a | a-1"))
    call_command("preflight", str(path), "--profile", "demo", "--head-sample", "0")
    out = capsys.readouterr().out
    assert "1 row(s), 1 job(s)" in out and "declared 5 bytes" in out
    call_command("preflight", str(path), "--profile", "demo", "--json", "--head-sample", "0")
    assert json.loads(capsys.readouterr().out)["declared_bytes"] == 5
    with pytest.raises(CommandError, match="no profile 'nope'"):
        call_command("preflight", str(path), "--profile", "nope")


def test_the_command_fetches_a_manifest_under_the_network_policy(http_server, settings, capsys):
    (http_server.root / "m.checkm").write_bytes(checkm("http://h.example.org/a | 5 | a | a-1"))
    url = http_server.url_for("/m.checkm")
    call_command("preflight", url, "--profile", "demo", "--json", "--head-sample", "0")
    assert json.loads(capsys.readouterr().out)["rows"] == 1
    settings.MQ_ALLOW_LOOPBACK = False
    with pytest.raises(CommandError, match="loopback"):
        call_command("preflight", url, "--profile", "demo")


# --- a single-file submission's summary at arrival ----------------------------------------


def test_a_linked_single_file_is_one_row_headed_and_matched(http_server):
    from door import arrival

    InventoryObject.objects.create(ark="ark:/99999/fk4one", collection="demo", title="One")
    (http_server.root / "a.jpg").write_bytes(b"x" * 10)
    clean = {"profile": "demo", "collection": "demo", "type": "file"}
    url = http_server.url_for("/a.jpg")
    s = arrival.summary(clean | {"payload_url": url, "primary_id": "ark:/99999/fk4one"}, None)
    assert (s["kind"], s["rows"], s["jobs"]) == ("file", 1, 1)
    assert (s["declared_bytes"], s["rows_without_size"]) == (0, 1)
    assert (s["measured_bytes"], s["measured_rows"]) == (10, 1)
    assert [(x["status"], x["bytes"]) for x in s["sample"]] == [(200, 10)]
    assert [u["ark"] for u in s["updates"]] == ["ark:/99999/fk4one"]
    gone = arrival.summary(clean | {"payload_url": http_server.url_for("/gone.jpg")}, None)
    assert (gone["measured_bytes"], gone["measured_rows"]) == (0, 0)
    assert gone["sample"][0]["status"] == 404 and gone["updates"] == []


def test_an_uploaded_single_file_is_its_real_size_and_asks_no_url():
    import io

    from door import arrival
    from pipeline.submitted import Upload

    InventoryObject.objects.create(ark="ark:/99999/fk4one", collection="demo", title="One")
    LocalIdentifier.objects.create(collection="demo", local_id="L-1", ark="ark:/99999/fk4one")
    big = Upload("big.tar", io.BytesIO(b"#%checkm_0.7\n" + b"x" * 100), 2 * 1024**3)
    clean = {"profile": "demo", "collection": "demo", "type": "container", "local_id": "L-1"}
    s = arrival.summary(clean, big)
    assert (s["kind"], s["rows"], s["declared_bytes"], s["rows_without_size"]) == (
        "file",
        1,
        2 * 1024**3,
        0,
    )
    assert (s["measured_bytes"], s["measured_rows"], s["sample"]) == (0, 0, [])
    assert [u["local_id"] for u in s["updates"]] == ["L-1"]


def test_the_include_never_says_a_url_answered_when_none_was_asked():
    from django.template.loader import render_to_string

    from door import arrival
    from pipeline.submitted import Upload

    upload = Upload("a.jpg", __import__("io").BytesIO(b"x"), 1)
    s = arrival.summary({"profile": "demo", "collection": "demo", "type": "file"}, upload)
    page = render_to_string("batches/_preflight.html", {"preflight": s})
    assert "none: no URL was asked" in page and "that answered" not in page
