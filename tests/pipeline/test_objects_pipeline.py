"""Add then update through the real pipeline: what each version holds, what the inventory and
the depositor are told, and what an update costs on disk.

The objects are Merritt's sample content (brain_v1 then brain_v2, whose second version adds
brain.tif to the first's four images) and small files served from 127.0.0.1.
"""

from __future__ import annotations

import io
import stat
import zipfile

from django.core import mail

from inventory.models import InventoryVersion
from merritt_queue.services.storage import LocalStorage
from tests.pipelinerun import FIXTURES

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


def storage(pipeline) -> LocalStorage:
    return LocalStorage(pipeline.root / "storage")


def run_one(pipeline, **data):
    """Submit one object, run it to the end; its one job."""
    bid = pipeline.submit(**data)
    batch = pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert batch.status == "Completed", (batch.message, job.message)
    return job


def serve_zip(http_server, name: str, files: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for member, data in files.items():
            z.writestr(member, data)
    (http_server.root / name).write_bytes(buffer.getvalue())
    return f"{http_server.url}/{name}"


def serve(http_server, name: str, data: bytes) -> str:
    (http_server.root / name).write_bytes(data)
    return f"{http_server.url}/{name}"


def unique_bytes(paths) -> int:
    seen, total = set(), 0
    for path in paths:
        st = path.lstat()
        if stat.S_ISREG(st.st_mode) and st.st_ino not in seen:
            seen.add(st.st_ino)
            total += st.st_size
    return total


def test_brain_v2_as_an_update_adds_one_image_and_writes_only_its_bytes(pipeline, content):
    v1 = run_one(
        pipeline,
        type="container",
        payload_url=f"{content.url}/brain_v1.zip",
        local_id="brain",
        erc_what="Brain",
    )
    ark = v1.identifiers["primary_id"]
    store = storage(pipeline)
    v1_files = set(store.version_path(ark, 1).rglob("*"))
    v2 = run_one(
        pipeline,
        type="container",
        payload_url=f"{content.url}/brain_v2.zip",
        local_id="brain",
        erc_what="Brain",
        submission_mode="update",
    )
    assert v2.identifiers["primary_id"] == ark
    assert store.versions(ark) == [1, 2]
    version = store.get_version(ark, 2)
    changed = {c.name: c.change for c in version.changes}
    assert changed["producer/brain.tif"] == "added"
    for image in ("brain_398.tif", "brain_492.tif", "brain_508.tif", "brain_604.tif"):
        assert changed[f"producer/{image}"] == "carried"
    # Bytes version 2 added to the disk: brain.tif and the small system files, no image again.
    v2_paths = [p for p in store.version_path(ark, 2).rglob("*") if p not in v1_files]
    shared = {p.lstat().st_ino for p in v1_files if p.is_file()}
    written = unique_bytes(p for p in v2_paths if p.is_file() and p.lstat().st_ino not in shared)
    with zipfile.ZipFile(FIXTURES / "brain_v2.zip") as z:
        brain = z.getinfo("brain.tif").file_size
    assert brain <= written < brain + 64 * 1024, written
    # The inventory holds every file of the version, carried ones marked so.
    row = InventoryVersion.objects.get(obj__ark=ark, number=2)
    kinds = dict(row.files.values_list("name", "change"))
    assert kinds["producer/brain.tif"] == "added"
    assert kinds["producer/brain_398.tif"] == "carried"
    assert row.file_count == len(version.files)
    assert "outcome" not in v2.store


def test_an_update_deletes_the_files_its_mrt_delete_txt_lists(pipeline, http_server):
    v1 = run_one(
        pipeline,
        type="container",
        payload_url=serve_zip(http_server, "v1.zip", {"a.txt": b"a\n", "b.txt": b"b\n"}),
        local_id="obj-delete",
    )
    ark = v1.identifiers["primary_id"]
    update = serve_zip(http_server, "v2.zip", {"c.txt": b"c\n", "mrt-delete.txt": b"a.txt\n"})
    v2 = run_one(
        pipeline,
        type="container",
        payload_url=update,
        local_id="obj-delete",
        submission_mode="update",
    )
    assert v2.identifiers["primary_id"] == ark
    names = {f.name for f in storage(pipeline).get_version(ark, 2).files}
    assert {"producer/b.txt", "producer/c.txt", "system/mrt-delete.txt"} <= names
    assert "producer/a.txt" not in names and "producer/mrt-delete.txt" not in names
    row = InventoryVersion.objects.get(obj__ark=ark, number=2)
    assert row.deleted == ["producer/a.txt"]


def test_an_add_with_the_same_local_id_replaces_the_whole_version(pipeline, http_server):
    first = serve_zip(http_server, "v1.zip", {"a.txt": b"a\n", "b.txt": b"b\n"})
    v1 = run_one(pipeline, type="container", payload_url=first, local_id="obj-add")
    second = serve(http_server, "only.txt", b"only\n")
    v2 = run_one(pipeline, type="file", payload_url=second, local_id="obj-add")
    ark = v1.identifiers["primary_id"]
    assert v2.identifiers["primary_id"] == ark
    names = {f.name for f in storage(pipeline).get_version(ark, 2).files}
    assert {n for n in names if n.startswith("producer/")} == {"producer/only.txt"}


def test_the_same_content_again_is_not_a_new_version_and_the_depositor_is_told(
    pipeline, http_server
):
    url = serve(http_server, "same.txt", b"the same bytes\n")
    first = run_one(pipeline, type="file", payload_url=url, local_id="dup", erc_what="Dup")
    mail.outbox.clear()
    again = run_one(pipeline, type="file", payload_url=url, local_id="dup", erc_what="Dup")
    ark = first.identifiers["primary_id"]
    assert again.identifiers["primary_id"] == ark
    assert storage(pipeline).versions(ark) == [1]
    assert InventoryVersion.objects.filter(obj__ark=ark).count() == 1
    assert again.status == "Completed"
    assert again.store["outcome"] == "unchanged: no new version"
    assert again.store["version"] == 1
    assert "unchanged: no new version" in again.message
    (message,) = mail.outbox
    assert f"unchanged  {again.jid}  {ark}" in message.body
