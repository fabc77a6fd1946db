"""Add and update deposits in both storage adapters: carry-forward, replace, delete, duplicates.

Local storage is checked on disk (which inodes a version shares with the one before, how many
bytes an update writes); Merritt storage against a real HTTP server on 127.0.0.1 that records
every request, keeps versions and answers as mrt-store does (harness/merrittstore.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from urllib.parse import quote

import pytest

from merritt_queue.services.errors import StorageError
from merritt_queue.services.merrittstorage import MerrittStorageClient
from merritt_queue.services.storage import LocalStorage, escape_ark
from merritt_queue.services.versions import StoredFile, plan_version

pytest_plugins = ["tests.httpserver"]

pytestmark = pytest.mark.usefixtures("loopback_only")

ARK = "ark:/99999/fk4update1"
BIG = os.urandom(1 << 20)
V1 = {
    "producer/big.bin": BIG,
    "producer/notes.txt": b"first notes\n",
    "producer/old.txt": b"to be deleted\n",
    "system/mrt-erc.txt": b"erc:\nwhat: v1\n",
}


def write(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def manifest(files: dict[str, bytes]) -> list[dict]:
    return [
        {"name": n, "size": len(d), "digests": {"sha256": hashlib.sha256(d).hexdigest()}}
        for n, d in files.items()
    ]


def changes(version) -> dict[str, str]:
    return {c.name: c.change for c in version.changes}


def disk_bytes(root: Path) -> int:
    """Bytes the files under ``root`` take, each inode counted once (hard links are free)."""
    seen, total = set(), 0
    for path in root.rglob("*"):
        st = path.lstat()
        if stat.S_ISREG(st.st_mode) and st.st_ino not in seen:
            seen.add(st.st_ino)
            total += st.st_size
    return total


@pytest.fixture
def local(tmp_path) -> LocalStorage:
    return LocalStorage(tmp_path / "objects")


def store_v1(storage, tmp_path, **kwargs):
    work = write(tmp_path / "job-1", V1)
    return storage.store_version(ARK, work, None, token="job-1", manifest=manifest(V1), **kwargs)


# -- the plan, shared by both adapters ----------------------------------------------------


def sf(name, data):
    return StoredFile(name, len(data), {"sha256": hashlib.sha256(data).hexdigest()})


def test_an_add_is_exactly_the_submitted_files_and_an_update_is_a_delta():
    before = [sf("producer/a", b"a"), sf("producer/b", b"b"), sf("producer/c", b"c")]
    submitted = [sf("producer/b", b"B"), sf("producer/d", b"d")]
    add = plan_version(before, submitted, "add")
    assert [f.name for f in add.files] == ["producer/b", "producer/d"]
    assert {c.name: c.change for c in add.changes} == {
        "producer/b": "replaced",
        "producer/d": "added",
        "producer/a": "deleted",
        "producer/c": "deleted",
    }
    update = plan_version(before, submitted, "update", delete=["producer/c", "producer/zz"])
    assert [f.name for f in update.files] == ["producer/a", "producer/b", "producer/d"]
    assert {c.name: c.change for c in update.changes} == {
        "producer/a": "carried",
        "producer/b": "replaced",
        "producer/d": "added",
        "producer/c": "deleted",
    }
    assert update.ignored_deletes == ("producer/zz",)
    assert not update.unchanged
    assert plan_version(before, [sf("producer/a", b"a")], "update").unchanged


def test_a_name_both_submitted_and_deleted_is_refused():
    with pytest.raises(StorageError, match="both submits and deletes producer/a"):
        plan_version([sf("producer/a", b"a")], [sf("producer/a", b"A")], "update", ["producer/a"])


# -- local storage ------------------------------------------------------------------------


def test_update_carries_forward_replaces_and_deletes_without_copying_carried_bytes(local, tmp_path):
    v1 = store_v1(local, tmp_path)
    assert v1.version == 1 and set(changes(v1).values()) == {"added"}
    (tmp_path / "job-1").joinpath("producer/old.txt").unlink()
    before = disk_bytes(local.root)
    work = write(
        tmp_path / "job-2",
        {"producer/notes.txt": b"second notes\n", "producer/new.txt": b"new\n"}
        | {"system/mrt-erc.txt": b"erc:\nwhat: v2\n"},
    )
    v2 = local.store_version(
        ARK, work, None, token="job-2", mode="update", delete=["producer/old.txt"]
    )
    assert v2.version == 2 and not v2.unchanged
    assert changes(v2) == {
        "producer/big.bin": "carried",
        "producer/notes.txt": "replaced",
        "producer/new.txt": "added",
        "producer/old.txt": "deleted",
        "system/mrt-erc.txt": "replaced",
    }
    v2_dir, v1_dir = local.version_path(ARK, 2), local.version_path(ARK, 1)
    assert sorted(p.relative_to(v2_dir).as_posix() for p in v2_dir.rglob("*") if p.is_file()) == [
        "manifest.json",
        "producer/big.bin",
        "producer/new.txt",
        "producer/notes.txt",
        "system/mrt-erc.txt",
    ]
    # The carried file is the previous version's inode: no byte of it was written again.
    assert (v2_dir / "producer/big.bin").stat().st_ino == (
        v1_dir / "producer/big.bin"
    ).stat().st_ino
    assert (v2_dir / "producer/big.bin").read_bytes() == BIG
    written = disk_bytes(local.root) - before
    assert written < 64 * 1024, f"the update wrote {written} bytes for three small files"
    # The version manifest lists every file of the version, carried ones with their digests.
    data = json.loads((v2_dir / "manifest.json").read_text())
    assert {f["name"] for f in data["files"]} == {f.name for f in v2.files}
    assert data["mode"] == "update" and data["previous"] == 1
    big = next(f for f in data["files"] if f["name"] == "producer/big.bin")
    assert big["digests"]["sha256"] == hashlib.sha256(BIG).hexdigest()
    assert local.get_version(ARK, 2) == v2
    # Stored files are read-only: one inode now serves two versions.
    assert not (v2_dir / "producer/big.bin").stat().st_mode & 0o222


def test_an_add_on_an_existing_object_is_a_complete_version_sharing_unchanged_bytes(
    local, tmp_path
):
    store_v1(local, tmp_path)
    work = write(tmp_path / "job-2", {"producer/big.bin": BIG, "producer/only.txt": b"only\n"})
    v2 = local.store_version(ARK, work, None, token="job-2")
    assert sorted(f.name for f in v2.files) == ["producer/big.bin", "producer/only.txt"]
    assert changes(v2)["producer/old.txt"] == "deleted"
    assert changes(v2)["producer/big.bin"] == "carried"
    inode = lambda v: (local.version_path(ARK, v) / "producer/big.bin").stat().st_ino  # noqa: E731
    assert inode(1) == inode(2)


@pytest.mark.parametrize("mode", ["add", "update"])
def test_the_same_files_again_make_no_new_version(local, tmp_path, mode):
    v1 = store_v1(local, tmp_path)
    again = local.store_version(
        ARK, tmp_path / "job-1", None, token="job-2", manifest=manifest(V1), mode=mode
    )
    assert again.unchanged and again.version == 1 and again.token == "job-1"
    assert set(changes(again).values()) == {"carried"}
    assert local.versions(ARK) == [1] and again.files == v1.files
    assert os.listdir(local.root / ".tmp") == []


def test_an_update_that_submits_one_unchanged_file_is_unchanged(local, tmp_path):
    store_v1(local, tmp_path)
    work = write(tmp_path / "job-2", {"producer/notes.txt": V1["producer/notes.txt"]})
    again = local.store_version(ARK, work, None, token="job-2", mode="update")
    assert again.unchanged and local.versions(ARK) == [1]


def test_an_update_of_a_missing_object_makes_its_first_version(local, tmp_path):
    work = write(tmp_path / "job-1", {"producer/a.txt": b"a\n"})
    v1 = local.store_version(
        ARK, work, None, token="job-1", mode="update", delete=["producer/never.txt"]
    )
    assert v1.version == 1 and changes(v1) == {"producer/a.txt": "added"}


def test_a_resubmitted_file_that_differs_from_its_manifest_is_refused(local, tmp_path):
    store_v1(local, tmp_path)
    work = write(tmp_path / "job-2", {"producer/notes.txt": b"first notes\n"})
    wrong = manifest({"producer/notes.txt": b"other bytes\n"})
    with pytest.raises(StorageError, match="producer/notes.txt: sha256 mismatch"):
        local.store_version(ARK, work, None, token="job-2", manifest=wrong, mode="update")
    assert local.versions(ARK) == [1]


def test_a_version_written_before_changes_were_recorded_gets_them_from_its_predecessor(
    local, tmp_path
):
    store_v1(local, tmp_path)
    work = write(tmp_path / "job-2", {"producer/notes.txt": b"changed\n"})
    local.store_version(ARK, work, None, token="job-2", mode="update")
    path = local.version_path(ARK, 2) / "manifest.json"
    data = json.loads(path.read_text())
    del data["changes"]
    path.chmod(0o644)
    path.write_text(json.dumps(data))
    assert changes(local.get_version(ARK, 2))["producer/notes.txt"] == "replaced"


def test_carried_bytes_are_copied_where_links_fail_and_checked(local, tmp_path, monkeypatch):
    store_v1(local, tmp_path)

    def no_links(src, dest):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_links)
    work = write(tmp_path / "job-2", {"producer/notes.txt": b"changed\n"})
    v2 = local.store_version(ARK, work, None, token="job-2", mode="update")
    big = local.version_path(ARK, 2) / "producer/big.bin"
    assert big.read_bytes() == BIG and changes(v2)["producer/big.bin"] == "carried"
    assert big.stat().st_ino != (local.version_path(ARK, 1) / "producer/big.bin").stat().st_ino


# -- Merritt storage ----------------------------------------------------------------------


@pytest.fixture
def merritt(merritt_storage_server, session_factory):
    server = merritt_storage_server.server

    def file_url(path: Path) -> str:
        return server.url_for("/" + quote(path.relative_to(server.root).as_posix()))

    return MerrittStorageClient(
        merritt_storage_server.url,
        merritt_storage_server.node,
        file_url=file_url,
        session_factory=session_factory,
    )


def stored_names(fake, version: int) -> list[str]:
    return fake.names(ARK, version)


def test_merritt_add_then_update_posts_add_then_update_with_the_delete_list(
    merritt, merritt_storage_server, http_server
):
    fake = merritt_storage_server
    v1 = store_v1(merritt, http_server.root)
    assert v1.version == 1
    assert stored_names(fake, 1) == sorted([*V1, "system/mrt-queue-token-job-1.txt"])
    work = write(http_server.root / "job-2", {"producer/new.txt": b"new\n"})
    v2 = merritt.store_version(
        ARK, work, None, token="job-2", mode="update", delete=["producer/old.txt"]
    )
    assert v2.version == 2
    assert changes(v2) == {
        "producer/big.bin": "carried",
        "producer/new.txt": "added",
        "producer/notes.txt": "carried",
        "producer/old.txt": "deleted",
        "system/mrt-erc.txt": "carried",
    }
    quoted = quote(ARK, safe="")
    (add,) = fake.server.requests_for(f"/add/7777/{quoted}", "POST")
    (update,) = fake.server.requests_for(f"/update/7777/{quoted}", "POST")
    assert b'name="delete"' not in add.body
    # The update's manifest names only the new file; storage carries the rest forward.
    assert b"producer/new.txt" in update.body and b"producer/big.bin" not in update.body
    assert b"producer/old.txt\nsystem/mrt-queue-token-job-1.txt\n" in update.body
    assert stored_names(fake, 2) == sorted(
        [
            "producer/big.bin",
            "producer/new.txt",
            "producer/notes.txt",
            "system/mrt-erc.txt",
            "system/mrt-queue-token-job-2.txt",
        ]
    )
    assert merritt.find_by_token(ARK, "job-2").version == 2
    assert merritt.find_by_token(ARK, "job-1").version == 1


def test_merritt_duplicate_content_posts_nothing(merritt, merritt_storage_server, http_server):
    store_v1(merritt, http_server.root)
    posts = len([r for r in merritt_storage_server.server.requests if r.method == "POST"])
    again = merritt.store_version(
        ARK, http_server.root / "job-1", None, token="job-2", mode="update"
    )
    assert again.unchanged and again.version == 1
    assert len([r for r in merritt_storage_server.server.requests if r.method == "POST"]) == posts


def test_merritt_update_of_a_missing_object_makes_version_one(
    merritt, merritt_storage_server, http_server
):
    work = write(http_server.root / "job-1", {"producer/a.txt": b"a\n"})
    v1 = merritt.store_version(ARK, work, None, token="job-1", mode="update")
    assert v1.version == 1
    assert stored_names(merritt_storage_server, 1) == [
        "producer/a.txt",
        "system/mrt-queue-token-job-1.txt",
    ]


def test_the_storage_directory_name_of_an_ark_is_its_escaped_form(local, tmp_path):
    store_v1(local, tmp_path)
    assert (local.root / escape_ark(ARK) / "v1" / "manifest.json").is_file()


def test_merritt_update_reads_the_current_version_once_before_posting(
    merritt, merritt_storage_server, http_server
):
    """The object, the current version, and each of its files' states (an update records the
    files it carries with their sizes and digests): once each."""
    store_v1(merritt, http_server.root)
    server = merritt_storage_server.server
    before = len(server.requests)
    work = write(http_server.root / "job-2", {"producer/new.txt": b"new\n"})
    merritt.store_version(ARK, work, None, token="job-2", mode="update")
    quoted = quote(ARK, safe="")
    made = [(r.method, r.path.split("?")[0]) for r in server.requests[before:]]
    file_fetches = [m for m in made if not m[1].startswith(("/state/", "/update/", "/add/"))]
    calls = [m for m in made if m not in file_fetches]
    assert calls[:2] == [("GET", f"/state/7777/{quoted}"), ("GET", f"/state/7777/{quoted}/1")]
    assert sorted(calls[2:-1]) == [
        ("GET", f"/state/7777/{quoted}/1/{quote(name, safe='')}") for name in sorted(V1)
    ]
    assert calls[-1] == ("POST", f"/update/7777/{quoted}")


@pytest.mark.parametrize("bad", ["ark:not-an-ark", "ark:/1/x", "ark:/99999/fk4a\n", "ark:/99999/"])
def test_both_adapters_refuse_an_ark_the_door_would_refuse_before_any_disk_or_network(
    local, merritt, merritt_storage_server, tmp_path, bad
):
    """The ARK comes from the tree, where another writer may have put anything."""
    work = write(tmp_path / "job-1", {"producer/a.txt": b"a\n"})
    for storage in (local, merritt):
        with pytest.raises(StorageError, match="is not an ARK"):
            storage.store_version(bad, work, None, token="job-1")
    assert not local.root.exists()
    assert merritt_storage_server.server.requests == []
