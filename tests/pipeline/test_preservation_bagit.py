"""A container that is a BagIt bag, through the real pipeline (ZooKeeper, Redis, RQ, HTTP).

The bags are made by LoC's bagit library in the test's temp dir, packed as the depositor
would pack them, and served by the test content server. A valid bag is stored as its payload
with its tag files as system files and its bag-info filling what the depositor left empty;
an invalid one fails in Downloading, naming what does not match, before an ARK is minted or
anything stored.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import bagit
import pytest

from merritt_queue.core import steprecord as sr
from merritt_queue.services.storage import LocalStorage

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

PAYLOAD = {
    "letter.txt": b"Dear colleague,\nthe minutes are attached.\n",
    "images/scan 1.tif": b"II*\x00" + bytes(range(256)) * 8,
}
INFO = {
    "Source-Organization": "University Archives",
    "Contact-Name": "Ada Lovelace",
    "External-Description": "Minutes of the\x07 board, 1843",
    "External-Identifier": "minutes-1843",
    "Bagging-Date": "2024-05-01",
}


def make_bag(tmp_path: Path, name: str = "minutes", info=None, algorithms=None) -> Path:
    bag_dir = tmp_path / "bags" / name
    for rel, data in PAYLOAD.items():
        target = bag_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    bagit.make_bag(str(bag_dir), dict(INFO if info is None else info), checksums=algorithms)
    return bag_dir


def pack(bag_dir: Path, kind: str) -> bytes:
    """The bag as one top-level folder in a zip or tar.gz, as a depositor zips a folder."""
    files = sorted(p for p in bag_dir.rglob("*") if p.is_file())
    buf = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for p in files:
                z.write(p, f"{bag_dir.name}/{p.relative_to(bag_dir).as_posix()}")
    else:
        with tarfile.open(fileobj=buf, mode="w:gz") as t:
            for p in files:
                t.add(p, f"{bag_dir.name}/{p.relative_to(bag_dir).as_posix()}")
    return buf.getvalue()


def serve(content, name: str, data: bytes) -> str:
    (content.root / name).write_bytes(data)
    return f"{content.url}/{name}"


def entries(job, step: str, kind: str) -> list[dict]:
    return [
        e for a in job.steps.attempts if a["step"] == step for e in a["entries"] if e["k"] == kind
    ]


def assert_nothing_minted_or_stored(pipeline, job) -> None:
    assert job.status == "Failed" and job.last_successful_status == "Provisioning"
    assert not (job.identifiers or {}).get("primary_id")
    minted = [p for p in (pipeline.root / "minter").rglob("*") if p.is_file()]
    assert minted == []
    storage = pipeline.root / "storage"
    assert not storage.exists() or not any(storage.iterdir())


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_a_valid_bag_stores_its_payload_and_fills_the_metadata(pipeline, content, tmp_path, kind):
    bag_dir = make_bag(tmp_path, algorithms=["md5", "sha256"])
    tags = {p.name: p.read_bytes() for p in bag_dir.iterdir() if p.is_file()}
    url = serve(content, f"minutes.{kind}", pack(bag_dir, kind))
    bid = pipeline.submit(type="container", payload_url=url, erc_when="1843")
    batch = pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert batch.status == "Completed" and job.status == "Completed", job.message
    # The depositor's date wins; the rest comes from bag-info.txt, control characters gone.
    assert job.metadata == {
        "erc_what": "Minutes of the board, 1843",
        "erc_who": "Ada Lovelace",
        "erc_when": "1843",
    }
    assert job.identifiers["local_id"] == ["minutes-1843"]
    ark = job.identifiers["primary_id"]
    version = LocalStorage(pipeline.root / "storage").get_version(ark, 1)
    stored = {f.name: f for f in version.files}
    producer = {n for n in stored if n.startswith("producer/")}
    assert producer == {f"producer/{n}" for n in PAYLOAD}
    for name, data in PAYLOAD.items():
        assert stored[f"producer/{name}"].digests["md5"] == hashlib.md5(data).hexdigest()
    for name, data in tags.items():
        assert stored[f"system/bag/{name}"].digests["md5"] == hashlib.md5(data).hexdigest()
    assert {"bagit.txt", "bag-info.txt", "manifest-md5.txt", "manifest-sha256.txt"} <= set(tags)
    (bag,) = entries(job, "Downloading", "bag")
    assert bag["valid"] is True and bag["algorithms"] == ["md5", "sha256"]


def test_a_bag_at_the_archive_root_is_a_bag_too(pipeline, content, tmp_path):
    bag_dir = make_bag(tmp_path)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted(bag_dir.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(bag_dir).as_posix())
    bid = pipeline.submit(
        type="container", payload_url=serve(content, "root.zip", buf.getvalue()), erc_what="Mine"
    )
    assert pipeline.run(bid).status == "Completed"
    (job,) = pipeline.jobs(bid)
    assert job.metadata["erc_what"] == "Mine"
    assert job.metadata["erc_who"] == "Ada Lovelace"


def test_a_corrupted_file_fails_the_job_naming_it_before_any_ark(pipeline, content, tmp_path):
    bag_dir = make_bag(tmp_path, algorithms=["md5", "sha512"])
    (bag_dir / "data" / "letter.txt").write_bytes(b"Dear colleague,\nthe minutes are lost.\n")
    url = serve(content, "corrupt.zip", pack(bag_dir, "zip"))
    bid = pipeline.submit(type="container", payload_url=url)
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    good = hashlib.md5(PAYLOAD["letter.txt"]).hexdigest()
    bad = hashlib.md5(b"Dear colleague,\nthe minutes are lost.\n").hexdigest()
    assert job.message.startswith("corrupt.zip: the bag does not check (2 digest mismatch(es)")
    assert f"data/letter.txt: md5 expected {good}, got {bad}" in job.message
    assert "data/letter.txt: sha512 expected " in job.message
    assert "Payload-Oxum validation failed" in job.message
    assert len(job.message) <= 500
    assert_nothing_minted_or_stored(pipeline, job)
    digests = entries(job, "Downloading", "digest")
    assert {(d["file"], *d["expected"]) for d in digests} == {
        ("data/letter.txt", "md5"),
        ("data/letter.txt", "sha512"),
    }
    assert all(d["ok"] is False for d in digests)
    assert pipeline.store.batches.get_batch(bid).status == "Failed"


def test_a_missing_file_fails_the_job_naming_it(pipeline, content, tmp_path):
    bag_dir = make_bag(tmp_path, info={})
    (bag_dir / "data" / "images" / "scan 1.tif").unlink()
    bid = pipeline.submit(
        type="container", payload_url=serve(content, "missing.tar.gz", pack(bag_dir, "tar.gz"))
    )
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert "data/images/scan 1.tif: listed in the manifest, missing from the bag" in job.message
    assert "1 missing file(s)" in job.message
    assert_nothing_minted_or_stored(pipeline, job)
    (bag,) = entries(job, "Downloading", "bag")
    assert bag["valid"] is False and bag["missing"] == ["data/images/scan 1.tif"]
    # The depositor reads it too: the names are of their own content.
    shown = [e for a in sr.public(job.steps)["attempts"] for e in a["entries"]]
    assert {"kind": "bag", "missing": ["data/images/scan 1.tif"]}.items() <= [
        e for e in shown if e["kind"] == "bag"
    ][0].items()


def test_a_bag_fixed_at_its_url_completes_when_the_job_is_resumed(pipeline, content, tmp_path):
    bag_dir = make_bag(tmp_path, info={})
    complete = pack(bag_dir, "zip")
    (bag_dir / "data" / "letter.txt").unlink()
    url = serve(content, "fixed.zip", pack(bag_dir, "zip"))
    bid = pipeline.submit(type="container", payload_url=url)
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert job.status == "Failed" and "data/letter.txt" in job.message
    serve(content, "fixed.zip", complete)
    # From Estimating: the fixed bag's size is not the one its first HEAD gave.
    pipeline.store.edits.resume_job(job.jid, to="Estimating")
    failed = lambda b: pipeline.store.jobs.get_job(job.jid).status == "Failed"  # noqa: E731
    pipeline.run(bid, until=lambda b: b.status == "Completed" or failed(b))
    job = pipeline.store.jobs.get_job(job.jid)
    assert job.status == "Completed", job.message
    ark = job.identifiers["primary_id"]
    names = {f.name for f in LocalStorage(pipeline.root / "storage").get_version(ark, 1).files}
    assert {n for n in names if n.startswith("producer/")} == {f"producer/{n}" for n in PAYLOAD}


def test_a_file_not_in_the_manifest_fails_the_job_naming_it(pipeline, content, tmp_path):
    bag_dir = make_bag(tmp_path, info={})
    (bag_dir / "data" / "slipped-in.txt").write_text("not in any manifest\n")
    bid = pipeline.submit(
        type="container", payload_url=serve(content, "extra.zip", pack(bag_dir, "zip"))
    )
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert "data/slipped-in.txt: in the bag, not in its manifest" in job.message
    assert_nothing_minted_or_stored(pipeline, job)
    (bag,) = entries(job, "Downloading", "bag")
    assert bag["extra"] == ["data/slipped-in.txt"]


def test_a_bag_with_a_fetch_txt_is_refused_and_nothing_is_fetched(pipeline, content, tmp_path):
    bag_dir = make_bag(tmp_path, info={})
    remote = content.behave("/remote-part.bin", body=b"fetched from elsewhere\n")
    (bag_dir / "fetch.txt").write_text(f"{remote} 23 data/remote-part.bin\n")
    bid = pipeline.submit(
        type="container", payload_url=serve(content, "fetching.zip", pack(bag_dir, "zip"))
    )
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert "it has a fetch.txt (1 file(s) listed to fetch from elsewhere)" in job.message
    assert_nothing_minted_or_stored(pipeline, job)
    assert not [r for r in content.requests if r.path == "/remote-part.bin"]


def test_a_container_that_is_no_bag_is_stored_as_it_was(pipeline, content):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("folder/bagit-notes.txt", "not a bag\n")
        z.writestr("folder/data/a.txt", "a\n")
        z.writestr("other.txt", "b\n")
    bid = pipeline.submit(type="container", payload_url=serve(content, "plain.zip", buf.getvalue()))
    assert pipeline.run(bid).status == "Completed"
    (job,) = pipeline.jobs(bid)
    version = LocalStorage(pipeline.root / "storage").get_version(job.identifiers["primary_id"], 1)
    names = {f.name for f in version.files}
    assert {n for n in names if n.startswith("producer/")} == {
        "producer/folder/bagit-notes.txt",
        "producer/folder/data/a.txt",
        "producer/other.txt",
    }
    assert not any(n.startswith("system/bag/") for n in names)
    assert entries(job, "Downloading", "bag") == []
