"""LocalStorage on disk and MerrittStorageClient against a fake Merritt storage node."""

import contextlib
import hashlib
import json
import os
import re
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from merritt_queue.deposit.fsnames import unescape_ark
from merritt_queue.services import storage as storage_module
from merritt_queue.services.errors import ManifestMismatch, StorageError
from merritt_queue.services.merrittstorage import MerrittStorageClient
from merritt_queue.services.storage import LocalStorage, escape_ark

pytest_plugins = ["tests.httpserver"]

pytestmark = pytest.mark.usefixtures("loopback_only")

ARK = "ark:/99999/fk4bbbbbb7"
FILES = {"a.txt": b"alpha\n", "sub/b.bin": bytes(range(256)) * 10}
# As a job names them: the submitted files under producer/, what Processing wrote under system/.
PRODUCER_FILES = {f"producer/{n}": d for n, d in FILES.items()} | {"system/mrt-erc.txt": b"erc:\n"}


def digests(data: bytes) -> dict[str, str]:
    return {"md5": hashlib.md5(data).hexdigest(), "sha256": hashlib.sha256(data).hexdigest()}


def manifest_for(files: dict[str, bytes]) -> list[dict]:
    return [{"name": n, "size": len(d), "digests": digests(d)} for n, d in files.items()]


@pytest.fixture
def source(tmp_path) -> Path:
    src = tmp_path / "job-work"
    for name, data in FILES.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    return src


@pytest.fixture
def store(tmp_path) -> LocalStorage:
    return LocalStorage(tmp_path / "objects")


def tmp_leftovers(store: LocalStorage) -> list[str]:
    tmp = store.root / ".tmp"
    return os.listdir(tmp) if tmp.exists() else []


# -- LocalStorage -------------------------------------------------------------------------


@pytest.mark.parametrize("ark", [ARK, "ark:/13030/m5%2Fodd", "ark:/1/a b/c:d"])
def test_ark_directory_names_are_reversible(ark):
    name = escape_ark(ark)
    assert "/" not in name and ":" not in name
    assert unescape_ark(name) == ark


def test_store_writes_version_one(store, source):
    stored = store.store_version(ARK, source, None, token="job-1", manifest=manifest_for(FILES))
    assert (stored.ark, stored.version, stored.token) == (ARK, 1, "job-1")
    assert {f.name: (f.size, f.digests) for f in stored.files} == {
        n: (len(d), digests(d)) for n, d in FILES.items()
    }
    version_dir = store.root / escape_ark(ARK) / "v1"
    assert (version_dir / "sub" / "b.bin").read_bytes() == FILES["sub/b.bin"]
    manifest = json.loads((version_dir / "manifest.json").read_text())
    assert manifest["token"] == "job-1" and manifest["ark"] == ARK and manifest["created"]
    assert store.get_version(ARK, 1) == stored
    assert tmp_leftovers(store) == []


def own_file(source: Path, token: str) -> list[tuple[str, Path]]:
    """A file list whose content is the token's own: distinct content makes a new version."""
    (source / f"{token}.txt").write_text(token)
    return [("a.txt", Path("a.txt")), ("token.txt", Path(f"{token}.txt"))]


def test_versions_are_numbered_in_order(store, source):
    for i in range(1, 4):
        files = own_file(source, f"job-{i}")
        assert store.store_version(ARK, source, files, token=f"job-{i}").version == i
    assert store.versions(ARK) == [1, 2, 3]
    assert store.versions("ark:/99999/fk4nothing") == []


def test_explicit_file_list_names_the_stored_files(store, source):
    stored = store.store_version(ARK, source, [("renamed/alpha.txt", Path("a.txt"))], token="job-1")
    assert [f.name for f in stored.files] == ["renamed/alpha.txt"]
    path = store.root / escape_ark(ARK) / "v1" / "renamed" / "alpha.txt"
    assert path.read_bytes() == FILES["a.txt"]


def test_same_token_returns_the_existing_version_and_copies_nothing(store, source):
    first = store.store_version(ARK, source, None, token="job-1")
    for name in FILES:
        (source / name).unlink()  # nothing left to copy: a second copy would fail loudly
    again = store.store_version(ARK, source, None, token="job-1")
    assert again == first
    assert store.versions(ARK) == [1]
    assert store.find_by_token(ARK, "job-1") == first
    assert store.find_by_token(ARK, "job-2") is None


def test_concurrent_writers_get_distinct_versions(store, source):
    results = {}

    def write(token, files):
        results[token] = store.store_version(ARK, source, files, token=token).version

    threads = [
        threading.Thread(target=write, args=(f"job-{i}", own_file(source, f"job-{i}")))
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results.values()) == list(range(1, 9))
    assert {store.get_version(ARK, v).token: v for v in store.versions(ARK)} == results
    assert tmp_leftovers(store) == []


def test_concurrent_writers_with_one_token_make_one_version(store, source):
    results = []
    threads = [
        threading.Thread(
            target=lambda: results.append(store.store_version(ARK, source, None, token="job-1"))
        )
        for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.versions(ARK) == [1]
    assert {r.version for r in results} == {1}
    assert tmp_leftovers(store) == []


def test_a_number_taken_by_an_unseen_writer_is_planned_again_on_top_of_it(
    store, source, monkeypatch
):
    # Another host (whose flock we cannot see) published v1 after we listed the versions.
    store.store_version(ARK, source, None, token="other-host")
    monkeypatch.setattr(store, "_lock", lambda ark: contextlib.nullcontext())
    renames = []
    real_rename = os.rename
    real_latest = store._latest
    stale = iter([None])  # a stale view, "no versions yet", for the first plan only
    monkeypatch.setattr(store, "_latest", lambda ark: next(stale, "real") and real_latest(ark))
    monkeypatch.setattr(
        storage_module.os, "rename", lambda a, b: renames.append(Path(b).name) or real_rename(a, b)
    )
    (source / "a.txt").write_bytes(b"changed\n")
    stored = store.store_version(ARK, source, None, token="job-1", mode="update")
    assert renames == ["v1", "v2"]
    assert stored.version == 2
    assert store.get_version(ARK, 1).token == "other-host"
    assert {c.name: c.change for c in stored.changes} == {
        "a.txt": "replaced",
        "sub/b.bin": "carried",
    }


def test_digest_mismatch_is_refused_and_leaves_nothing(store, source):
    manifest = manifest_for(FILES)
    manifest[0]["digests"] = {"MD5": "0" * 32}
    manifest[1]["size"] = 1
    with pytest.raises(ManifestMismatch) as info:  # a StorageError the handler tells apart
        store.store_version(ARK, source, None, token="job-1", manifest=manifest)
    text = str(info.value)
    assert text.startswith("the files do not match the manifest; nothing was stored:")
    assert f"a.txt: md5 mismatch: expected {'0' * 32}, got {digests(FILES['a.txt'])['md5']}" in text
    assert f"sub/b.bin: size mismatch: expected 1 bytes, got {len(FILES['sub/b.bin'])}" in text
    assert info.value.retryable is False
    assert store.versions(ARK) == []
    assert not (store.root / escape_ark(ARK)).exists()
    assert tmp_leftovers(store) == []


def test_manifest_entry_without_a_file_is_refused(store, source):
    manifest = manifest_for(FILES) + [{"name": "c.txt", "size": 3}]
    with pytest.raises(StorageError, match="c.txt: listed in the manifest but not among the files"):
        store.store_version(ARK, source, None, token="job-1", manifest=manifest)


def test_sha512_in_the_manifest_is_checked(store, source):
    data = FILES["a.txt"]
    entry = {"name": "a.txt", "digests": {"SHA-512": hashlib.sha512(data).hexdigest()}}
    stored = store.store_version(ARK, source, None, token="job-1", manifest=[entry])
    assert stored.version == 1


@pytest.mark.parametrize("name", ["../escape.txt", "/etc/passwd", "a//b", "a/./b", "dir/"])
def test_unsafe_names_are_refused(store, source, name):
    with pytest.raises(StorageError, match="is not a plain relative path"):
        store.store_version(ARK, source, [(name, Path("a.txt"))], token="job-1")
    assert store.versions(ARK) == []


def test_symlinks_are_refused(store, source, tmp_path):
    (tmp_path / "secret").write_text("not yours")
    (source / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(StorageError, match="is a symbolic link; refused"):
        store.store_version(ARK, source, None, token="job-1")


def test_missing_version_and_bad_input(store, source):
    with pytest.raises(StorageError, match=f"{ARK} has no version 3"):
        store.get_version(ARK, 3)
    with pytest.raises(StorageError, match="needs a token"):
        store.store_version(ARK, source, None, token="")
    with pytest.raises(StorageError, match="is not an ARK"):
        store.store_version("doi:10.1/x", source, None, token="job-1")


def test_disk_full_is_retryable(store, source, monkeypatch):
    def full(self, src, dest, name, algorithms):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(LocalStorage, "_copy", full)
    with pytest.raises(StorageError, match="storage disk full while writing") as info:
        store.store_version(ARK, source, None, token="job-1")
    assert info.value.retryable is True
    assert tmp_leftovers(store) == []


# -- Merritt storage client ---------------------------------------------------------------


@pytest.fixture
def merritt(merritt_storage_server, session_factory):
    server = merritt_storage_server.server

    def file_url(path: Path) -> str:
        return server.url_for("/" + quote(path.relative_to(server.root).as_posix()))

    def make(**kwargs) -> MerrittStorageClient:
        options = {
            "base_url": merritt_storage_server.url,
            "node_id": merritt_storage_server.node,
            "file_url": file_url,
            "session_factory": session_factory,
        }
        return MerrittStorageClient(**(options | kwargs))

    return make


@pytest.fixture
def served_source(http_server) -> Path:
    src = http_server.root / "job-1"
    for name, data in PRODUCER_FILES.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    return src


def test_merritt_add_and_state(merritt, merritt_storage_server, served_source):
    client = merritt()
    stored = client.store_version(
        ARK, served_source, None, token="job-1", manifest=manifest_for(PRODUCER_FILES)
    )
    assert (stored.version, stored.token) == (1, "job-1")
    add = merritt_storage_server.server.requests_for(f"/add/7777/{quote(ARK, safe='')}")
    assert len(add) == 1 and add[0].method == "POST"
    assert b'name="responseForm"' in add[0].body and b"#%checkm_0.7" in add[0].body
    names = merritt_storage_server.names(ARK, 1)
    # Merritt's names, as the job gives them: never producer/producer/... or producer/system/...
    assert names == [
        "producer/a.txt",
        "producer/sub/b.bin",
        "system/mrt-erc.txt",
        "system/mrt-queue-token-job-1.txt",
    ]
    assert client.versions(ARK) == [1]
    fetched = client.get_version(ARK, 1)
    assert fetched.token == "job-1"
    assert [(f.name, f.size) for f in fetched.files] == [
        (n, len(d)) for n, d in PRODUCER_FILES.items()
    ]
    assert fetched.files[0].digests == {"sha256": digests(FILES["a.txt"])["sha256"]}


def test_merritt_same_token_does_not_add_again(merritt, merritt_storage_server, served_source):
    client = merritt()
    first = client.store_version(ARK, served_source, None, token="job-1")
    again = client.store_version(ARK, served_source, None, token="job-1")
    assert again.version == first.version == 1
    (served_source / "producer" / "a.txt").write_bytes(b"changed\n")
    assert client.store_version(ARK, served_source, None, token="job-2").version == 2
    assert len(merritt_storage_server.server.requests_for(f"/add/7777/{quote(ARK, safe='')}")) == 2
    assert client.find_by_token(ARK, "job-2").version == 2
    assert client.find_by_token(ARK, "job-3") is None


def test_merritt_500_is_retryable(merritt, merritt_storage_server, served_source):
    merritt_storage_server.fail_next = [500]
    with pytest.raises(StorageError) as info:
        merritt().store_version(ARK, served_source, None, token="job-1")
    assert "storing ark:/99999/fk4bbbbbb7 failed:" in str(info.value)
    assert "returned 500 Internal Server Error" in str(info.value)
    assert info.value.retryable is True
    # The retry stores the version once.
    assert merritt().store_version(ARK, served_source, None, token="job-1").version == 1


def test_merritt_manifest_mismatch_is_refused_before_posting(
    merritt, merritt_storage_server, served_source
):
    manifest = manifest_for(PRODUCER_FILES)
    manifest[0]["digests"] = {"sha256": "f" * 64}
    with pytest.raises(StorageError, match="producer/a.txt: sha256 mismatch"):
        merritt().store_version(ARK, served_source, None, token="job-1", manifest=manifest)
    assert [r for r in merritt_storage_server.server.requests if r.method == "POST"] == []


def test_merritt_down_is_retryable(merritt, served_source):
    with pytest.raises(StorageError, match="could not be reached") as info:
        merritt(base_url="http://127.0.0.1:1").store_version(
            ARK, served_source, None, token="job-1"
        )
    assert info.value.retryable is True


def test_merritt_needs_file_urls(merritt, served_source):
    with pytest.raises(StorageError, match="needs file_url"):
        merritt(file_url=None).store_version(ARK, served_source, None, token="job-1")


def test_merritt_refuses_names_that_break_checkm(merritt, served_source):
    with pytest.raises(StorageError, match="cannot be sent in a checkm manifest"):
        merritt().store_version(
            ARK, served_source, [("a | b.txt", Path("producer/a.txt"))], token="job-1"
        )


def test_a_build_left_by_a_killed_writer_is_swept_after_a_day(store, source):
    stale = store.root / ".tmp" / "dead-writer"
    stale.mkdir(parents=True)
    (stale / "half.bin").write_bytes(b"x")
    old = time.time() - 2 * 86400
    os.utime(stale, (old, old))
    fresh = store.root / ".tmp" / "live-writer"
    fresh.mkdir()
    store.store_version(ARK, source, None, token="job-9")
    assert not stale.exists() and fresh.exists()


def test_a_version_is_durable_with_one_fsync_per_file_and_per_folder(store, source, monkeypatch):
    fsynced: list[str] = []
    real = os.fsync

    def fsync(fd):
        fsynced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    store.store_version(ARK, source, None, token="job-1")
    v1 = store.version_path(ARK, 1)
    # The storage root, new here, is in its parent.
    assert fsynced[0] == str(store.root.parent)
    # Built under .tmp, then published: what was fsynced there is now in v1.
    build = re.compile(re.escape(str(store.root / ".tmp")) + "/[0-9a-f]{32}")
    built = sorted(build.sub(str(v1), p) for p in fsynced[1:-2])
    assert built == sorted(
        str(v1 / n).rstrip("/") for n in ["", "a.txt", "sub", "sub/b.bin", "manifest.json"]
    ), fsynced
    # The new object's directory is in the root: both entries made durable.
    assert fsynced[-2:] == [str(v1.parent), str(store.root)]
    fsynced.clear()
    store.store_version(ARK, source, [], token="job-2", mode="update", delete=["a.txt"])
    # The manifest, the version and its folder sub/, the object: a linked file needs none.
    assert len(fsynced) == 4 and fsynced[-1] == str(v1.parent)
