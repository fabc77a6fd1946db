"""MerrittStorageClient against a storage node that answers as mrt-store does
(harness/merrittstore.py): state URLs in a version's state, size and digest only in each file's
own state, one element as a bare value, a reply lost after the version was stored."""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import quote

import pytest

from harness.merrittstore import StoredEntry
from merritt_queue.services import mrtstate
from merritt_queue.services.errors import StorageError
from merritt_queue.services.merrittstorage import MerrittStorageClient
from merritt_queue.services.storage import TOKEN_SOURCE_NAME
from merritt_queue.services.versions import StoredFile

pytest_plugins = ["tests.httpserver"]

pytestmark = pytest.mark.usefixtures("loopback_only")

ARK = "ark:/99999/fk4real01"
QUOTED = quote(ARK, safe="")
V1 = {
    "producer/a.txt": b"alpha\n",
    "producer/old.txt": b"to be deleted\n",
    "producer/with space.txt": b"spaced\n",
    "system/mrt-erc.txt": b"erc:\n",
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def manifest(files: dict[str, bytes]) -> list[dict]:
    return [{"name": n, "size": len(d), "digests": {"sha256": sha256(d)}} for n, d in files.items()]


def changes(version) -> dict[str, str]:
    return {c.name: c.change for c in version.changes}


def described(version) -> dict[str, tuple[int, str]]:
    return {f.name: (f.size, f.digests.get("sha256", "")) for f in version.files}


@pytest.fixture
def store(merritt_storage_server):
    return merritt_storage_server


@pytest.fixture
def client(store, session_factory) -> MerrittStorageClient:
    server = store.server

    def file_url(path: Path) -> str:
        return server.url_for("/" + quote(path.relative_to(server.root).as_posix()))

    return MerrittStorageClient(
        store.url, store.node, file_url=file_url, session_factory=session_factory
    )


@pytest.fixture
def root(http_server) -> Path:
    return http_server.root


def store_v1(client, root):
    work = write(root / "job-1", V1)
    return client.store_version(ARK, work, None, token="job-1", manifest=manifest(V1))


def token_files(store, version: int) -> list[str]:
    return [n for n in store.names(ARK, version) if n.startswith("system/mrt-queue-token-")]


def test_add_then_update_with_a_delete_list(client, store, root):
    assert store_v1(client, root).version == 1
    work = write(root / "job-2", {"producer/new.txt": b"new\n", "producer/a.txt": b"changed\n"})
    v2 = client.store_version(
        ARK, work, None, token="job-2", mode="update", delete=["producer/old.txt"]
    )
    assert v2.version == 2 and not v2.unchanged
    assert changes(v2) == {
        "producer/a.txt": "replaced",
        "producer/new.txt": "added",
        "producer/old.txt": "deleted",
        "producer/with space.txt": "carried",
        "system/mrt-erc.txt": "carried",
    }
    assert store.names(ARK, 2) == [
        "producer/a.txt",
        "producer/new.txt",
        "producer/with space.txt",
        "system/mrt-erc.txt",
        "system/mrt-queue-token-job-2.txt",
    ]
    (update,) = store.server.requests_for(f"/update/7777/{QUOTED}", "POST")
    assert b"producer/old.txt\nsystem/mrt-queue-token-job-1.txt\n" in update.body


def test_the_versions_carried_files_are_recorded_with_storages_sizes_and_digests(
    client, store, root
):
    store_v1(client, root)
    work = write(root / "job-2", {"producer/new.txt": b"new\n"})
    v2 = client.store_version(ARK, work, None, token="job-2", mode="update")
    expected = {n: (len(d), sha256(d)) for n, d in V1.items()} | {
        "producer/new.txt": (4, sha256(b"new\n"))
    }
    assert described(v2) == expected
    fetched = client.get_version(ARK, 2)
    assert fetched.token == "job-2"
    assert described(fetched) == expected
    assert client.versions(ARK) == [1, 2]


def test_an_object_of_one_file_and_one_version_is_read(client, store, root):
    """One version, one file: org.json sends each list of one as the bare value."""
    data = b"stored by Merritt's own ingest\n"
    store.objects[ARK] = [[StoredEntry("producer/only.txt", len(data), "sha256", sha256(data))]]
    assert client.versions(ARK) == [1]
    only = client.get_version(ARK, 1)
    assert described(only) == {"producer/only.txt": (len(data), sha256(data))}
    assert only.token == ""
    work = write(root / "job-2", {"producer/only.txt": data})
    again = client.store_version(ARK, work, None, token="job-2", mode="update")
    assert again.unchanged and again.version == 1
    assert store.posts() == []


def test_a_lost_post_reply_then_a_retry_makes_exactly_one_version(client, store, root):
    store.lose_replies = 1
    with pytest.raises(StorageError) as info:
        store_v1(client, root)
    assert info.value.retryable is True
    assert len(store.objects[ARK]) == 1
    again = store_v1(client, root)
    assert again.version == 1 and len(store.objects[ARK]) == 1
    assert described(again) == {n: (len(d), sha256(d)) for n, d in V1.items()}
    assert changes(again) == dict.fromkeys(V1, "added")
    assert len(store.posts()) == 1


def test_a_lost_update_reply_then_a_retry_makes_exactly_one_version(client, store, root):
    store_v1(client, root)
    store.lose_replies = 1
    work = write(root / "job-2", {"producer/new.txt": b"new\n"})
    with pytest.raises(StorageError):
        client.store_version(ARK, work, None, token="job-2", mode="update")
    again = client.store_version(ARK, work, None, token="job-2", mode="update")
    assert again.version == 2 and len(store.objects[ARK]) == 2
    assert changes(again)["producer/new.txt"] == "added"
    assert changes(again)["producer/a.txt"] == "carried"
    assert len(store.posts()) == 2


def test_an_unchanged_resubmission_posts_nothing(client, store, root):
    store_v1(client, root)
    posts = len(store.posts())
    work = write(root / "job-2", V1)
    again = client.store_version(ARK, work, None, token="job-2", manifest=manifest(V1))
    assert again.unchanged and again.version == 1
    assert len(store.posts()) == posts


def test_token_files_do_not_accumulate(client, store, root):
    store_v1(client, root)
    for n in range(2, 5):
        work = write(root / f"job-{n}", {f"producer/n{n}.txt": f"{n}\n".encode()})
        client.store_version(ARK, work, None, token=f"job-{n}", mode="update")
        assert token_files(store, n) == [f"system/mrt-queue-token-job-{n}.txt"]
    assert client.find_by_token(ARK, "job-3").version == 3
    assert client.find_by_token(ARK, "job-9") is None


def test_a_store_reads_file_states_of_the_current_version_only_and_never_the_tokens(
    client, store, root
):
    store_v1(client, root)
    work = write(root / "job-2", {"producer/new.txt": b"new\n"})
    client.store_version(ARK, work, None, token="job-2", mode="update")
    before = len(store.server.requests)
    work = write(root / "job-3", {"producer/a.txt": b"alpha\n"})
    client.store_version(ARK, work, None, token="job-3", mode="add")
    paths = [r.path.split("?")[0] for r in store.server.requests[before:] if r.method == "GET"]
    file_states = [p for p in paths if p.startswith("/state/") and p.count("/") == 5]
    # An add keeps only what it names: of the current version only that name is compared.
    assert file_states == [f"/state/7777/{QUOTED}/2/producer%2Fa.txt"]


def test_a_delete_list_names_only_what_the_current_version_holds(client, store, root):
    """mrt-store refuses a whole update whose delete list names a file it does not hold."""
    work = write(root / "job-1", {"producer/a.txt": b"a\n"})
    v1 = client.store_version(
        ARK, work, None, token="job-1", mode="update", delete=["producer/never.txt"]
    )
    assert v1.version == 1
    work = write(root / "job-2", {"producer/b.txt": b"b\n"})
    v2 = client.store_version(
        ARK, work, None, token="job-2", mode="update", delete=["producer/a.txt", "producer/zz"]
    )
    assert v2.version == 2
    assert store.names(ARK, 2) == ["producer/b.txt", "system/mrt-queue-token-job-2.txt"]
    first, second = store.server.requests_for(f"/update/7777/{QUOTED}", "POST")
    assert b'name="delete"' not in first.body and b"producer/zz" not in second.body


@pytest.mark.parametrize("count", [2, "2"])
def test_state_numbers_are_read_as_numbers_or_as_text(count):
    """org.json makes numeric text a number; a formatter keeping strings must read the same."""
    url = "http://storage.example/state/7/ark%3A%2F1%2Fx/2/producer%2Fa+b.txt"
    version = {
        "ver:versionState": {"ver:identifier": count, "ver:fileStates": {"ver:fileState": url}}
    }
    assert mrtstate.version_number(version) == 2
    assert mrtstate.file_names(version) == ["producer/a b.txt"]
    assert mrtstate.version_count({"obj:objectState": {"obj:numVersions": count}}) == 2
    state = {"fil:fileState": {"fil:size": count, "fil:messageDigest": "sha256=ABC"}}
    assert mrtstate.stored_file("f", state) == StoredFile("f", 2, {"sha256": "abc"})
    assert mrtstate.file_names({"ver:versionState": {"ver:identifier": 1}}) == []


def test_the_token_file_is_replaced_whole_never_rewritten_in_place(client, root):
    # Another attempt's token file, still being read (here: a second name for its bytes).
    work = write(root / "job-1", V1)
    read_by_storage = root / "token-being-read"
    read_by_storage.write_text("job-1 of the other attempt", encoding="utf-8")
    (work / TOKEN_SOURCE_NAME).hardlink_to(read_by_storage)
    version = client.store_version(ARK, work, None, token="job-1", manifest=manifest(V1))
    assert version.version == 1
    assert (work / TOKEN_SOURCE_NAME).read_text(encoding="utf-8") == "job-1"
    assert read_by_storage.read_text(encoding="utf-8") == "job-1 of the other attempt"
    assert [p.name for p in work.iterdir() if p.name.startswith(TOKEN_SOURCE_NAME)] == [
        TOKEN_SOURCE_NAME
    ]
