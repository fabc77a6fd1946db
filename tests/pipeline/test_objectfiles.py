"""The description of an object's files that Processing leaves for Storing and Recording."""

from __future__ import annotations

import hashlib

from merritt_queue.deposit import objectfiles


def make_object(root):
    (root / "producer").mkdir(parents=True)
    (root / "system").mkdir()
    (root / "producer" / "a.txt").write_bytes(b"alpha")
    (root / "system" / "mrt-erc.txt").write_text("erc:\n")


def test_the_saved_description_is_read_back_without_digesting_again(tmp_path):
    make_object(tmp_path)
    entries = objectfiles.describe_files(tmp_path, objectfiles.OBJECT_SUBDIRS)
    assert [e["name"] for e in entries] == ["producer/a.txt", "system/mrt-erc.txt"]
    assert entries[0]["md5"] == hashlib.md5(b"alpha").hexdigest()
    objectfiles.save_description(tmp_path, entries)
    # Changed since: the description still says what Processing saw (storage checks it).
    (tmp_path / "producer" / "a.txt").write_bytes(b"beta")
    assert objectfiles.object_files(tmp_path) == entries


def test_a_missing_or_damaged_description_describes_the_files_afresh(tmp_path):
    make_object(tmp_path)
    fresh = objectfiles.describe_files(tmp_path, objectfiles.OBJECT_SUBDIRS)
    assert objectfiles.object_files(tmp_path) == fresh
    for damaged in ('[{"name": "producer/a.txt"', '[{"name": "x"}]', '{"a": 1}'):
        (tmp_path / objectfiles.DESCRIPTION).write_text(damaged)
        assert objectfiles.object_files(tmp_path) == fresh


def test_files_just_written_are_described_from_their_bytes_as_read_back(tmp_path):
    (tmp_path / "producer").mkdir()
    (tmp_path / "system").mkdir()
    (tmp_path / "producer" / "a.txt").write_bytes(b"alpha")
    written = {"system/mrt-erc.txt": "erc:\nwho: é\n".encode()}
    (tmp_path / "system" / "mrt-erc.txt").write_bytes(written["system/mrt-erc.txt"])
    subdirs = objectfiles.OBJECT_SUBDIRS
    assert objectfiles.describe_files(tmp_path, subdirs, written) == objectfiles.describe_files(
        tmp_path, subdirs
    )
