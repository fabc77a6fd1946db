"""Containers: Merritt's sample archives unpack; hostile archives are refused and leave nothing."""

from __future__ import annotations

import gzip
import io
import stat
import struct
import tarfile
import warnings
import zipfile
from pathlib import Path

import pytest

from merritt_queue.deposit.containers import ContainerError, UnpackedFile, unpack
from merritt_queue.deposit.digest import file_digests

SAMPLES = Path(__file__).parents[1] / "fixtures" / "merritt-sample-files"
MB = 1024 * 1024


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    return tmp_path / "objects" / "obj-1"


def refused(archive: Path, dest: Path, **limits) -> str:
    """The refusal's message, after checking that nothing of the archive was left behind."""
    with pytest.raises(ContainerError) as caught:
        unpack(archive, dest, **limits)
    assert not dest.exists()
    assert not dest.parent.exists() or list(dest.parent.iterdir()) == []  # no temporary dir
    return str(caught.value)


def make_zip(path: Path, entries: dict[str, bytes], method=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", method) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return path


def zip_entry(zf: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # Unix, so the mode bits mean something
    info.external_attr = mode << 16
    zf.writestr(info, data)


def tar_info(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, **attrs) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


def make_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]], mode="w:gz") -> Path:
    with tarfile.open(path, mode) as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data else None)
    return path


def file_member(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tar_info(name, size=len(data)), data


# --- Merritt's samples -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, count",
    [
        ("huskyChicken.zip", 3),
        ("outdoorStore.zip", 8),
        ("souvenirs.zip", 2),
        ("brain_v1.tar.gz", 4),
        ("brain_v1.zip", 4),
    ],
)
def test_samples_unpack_with_their_file_count(name, count, dest):
    files = unpack(SAMPLES / name, dest)
    assert len(files) == count
    assert sorted(p.name for p in dest.iterdir()) == sorted(f.name for f in files)
    assert all(f.path == dest / f.name and f.path.stat().st_size == f.size for f in files)
    assert [p.name for p in dest.parent.iterdir()] == ["obj-1"]


def test_souvenirs_unpack_to_their_exact_content(dest):
    files = unpack(SAMPLES / "souvenirs.zip", dest)
    assert files[0] == UnpackedFile(dest / "souvenirs.txt", "souvenirs.txt", 34)
    with zipfile.ZipFile(SAMPLES / "souvenirs.zip") as zf:
        assert (dest / "souvenirs.jpg").read_bytes() == zf.read("souvenirs.jpg")


def test_zip_and_tar_gz_of_the_same_content_agree(tmp_path):
    from_zip = unpack(SAMPLES / "brain_v1.zip", tmp_path / "zip")
    from_tar = unpack(SAMPLES / "brain_v1.tar.gz", tmp_path / "tar")
    digests = {f.name: file_digests(f.path, ["md5"]) for f in from_zip}
    assert {f.name: file_digests(f.path, ["md5"]) for f in from_tar} == digests


def test_kind_is_detected_by_magic_bytes_when_the_name_says_nothing(tmp_path, dest):
    blob = tmp_path / "payload.bin"
    blob.write_bytes((SAMPLES / "souvenirs.zip").read_bytes())
    assert len(unpack(blob, dest)) == 2


def test_directories_are_created_and_backslashes_are_separators(tmp_path, dest):
    archive = make_zip(tmp_path / "dirs.zip", {"a/": b"", "a\\b\\c.txt": b"c", "./d.txt": b"d"})
    assert [f.name for f in unpack(archive, dest)] == ["a/b/c.txt", "d.txt"]
    assert (dest / "a" / "b" / "c.txt").read_bytes() == b"c"


def test_tar_root_directory_entry_is_accepted(tmp_path, dest):
    archive = make_tar(tmp_path / "root.tar", [(tar_info("./", tarfile.DIRTYPE), b"")], "w")
    with tarfile.open(archive, "a") as tf:
        tf.addfile(tar_info("./x.txt", size=1), io.BytesIO(b"x"))
    assert [f.name for f in unpack(archive, dest)] == ["x.txt"]


def test_existing_destination_keeps_its_content(tmp_path, dest):
    dest.mkdir(parents=True)
    (dest / "mine.txt").write_text("mine")
    unpack(SAMPLES / "souvenirs.zip", dest)
    assert sorted(p.name for p in dest.iterdir()) == ["mine.txt", "souvenirs.jpg", "souvenirs.txt"]


def test_clash_with_existing_destination_moves_nothing(tmp_path, dest):
    dest.mkdir(parents=True)
    (dest / "souvenirs.txt").write_text("mine")
    with pytest.raises(ContainerError) as caught:
        unpack(SAMPLES / "souvenirs.zip", dest)
    assert str(caught.value) == f"souvenirs.zip: 'souvenirs.txt' already exists in {dest}"
    assert [p.name for p in dest.iterdir()] == ["souvenirs.txt"]
    assert (dest / "souvenirs.txt").read_text() == "mine"


# --- hostile archives --------------------------------------------------------------------


def test_zip_slip(tmp_path, dest):
    archive = make_zip(tmp_path / "souvenirs.zip", {"ok.txt": b"ok", "../../etc/passwd": b"x"})
    assert refused(archive, dest) == (
        "souvenirs.zip: entry '../../etc/passwd' would escape the working directory"
    )


def test_zip_slip_with_backslashes(tmp_path, dest):
    archive = make_zip(tmp_path / "win.zip", {"..\\..\\evil.txt": b"x"})
    assert refused(archive, dest) == (
        "win.zip: entry '..\\\\..\\\\evil.txt' would escape the working directory"
    )


def test_absolute_path_in_zip(tmp_path, dest):
    archive = make_zip(tmp_path / "abs.zip", {"/etc/x": b"x"})
    assert refused(archive, dest) == "abs.zip: entry '/etc/x' would escape the working directory"


def test_drive_letter_in_zip(tmp_path, dest):
    archive = make_zip(tmp_path / "drive.zip", {"C:/Windows/x.dll": b"x"})
    assert refused(archive, dest) == (
        "drive.zip: entry 'C:/Windows/x.dll' would escape the working directory"
    )


def test_absolute_path_in_tar(tmp_path, dest):
    archive = make_tar(tmp_path / "abs.tar.gz", [file_member("/etc/x", b"x")])
    assert refused(archive, dest) == "abs.tar.gz: entry '/etc/x' would escape the working directory"


def test_symlink_in_zip(tmp_path, dest):
    with zipfile.ZipFile(tmp_path / "link.zip", "w") as zf:
        zf.writestr("ok.txt", b"ok")
        zip_entry(zf, "passwd", b"/etc/passwd", stat.S_IFLNK | 0o777)
    assert refused(tmp_path / "link.zip", dest) == (
        "link.zip: entry 'passwd' is a symbolic link; only files and directories are accepted"
    )


def test_symlink_in_tar(tmp_path, dest):
    link = tar_info("passwd", tarfile.SYMTYPE, linkname="/etc/passwd")
    archive = make_tar(tmp_path / "link.tar.gz", [file_member("ok.txt", b"ok"), (link, b"")])
    assert refused(archive, dest) == (
        "link.tar.gz: entry 'passwd' is a symbolic link; only files and directories are accepted"
    )


def test_hardlink_in_tar(tmp_path, dest):
    link = tar_info("copy.txt", tarfile.LNKTYPE, linkname="ok.txt")
    archive = make_tar(tmp_path / "hard.tar", [file_member("ok.txt", b"ok"), (link, b"")], "w")
    assert refused(archive, dest) == (
        "hard.tar: entry 'copy.txt' is a hard link; only files and directories are accepted"
    )


def test_device_and_fifo_in_tar(tmp_path, dest):
    for kind, what in ((tarfile.CHRTYPE, "character device"), (tarfile.FIFOTYPE, "fifo")):
        archive = make_tar(tmp_path / "dev.tar", [(tar_info("dev", kind), b"")], "w")
        assert refused(archive, dest) == (
            f"dev.tar: entry 'dev' is a {what}; only files and directories are accepted"
        )


def test_fifo_in_zip(tmp_path, dest):
    with zipfile.ZipFile(tmp_path / "fifo.zip", "w") as zf:
        zip_entry(zf, "pipe", b"", stat.S_IFIFO | 0o644)
    assert refused(tmp_path / "fifo.zip", dest) == (
        "fifo.zip: entry 'pipe' is a fifo; only files and directories are accepted"
    )


def test_zip_bomb(tmp_path, dest):
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("zeros.bin", "w") as out:
            for _ in range(50):
                out.write(bytes(MB))
        compressed = zf.getinfo("zeros.bin").compress_size
    ratio = 50 * MB / compressed
    assert refused(tmp_path / "bomb.zip", dest, max_ratio=100) == (
        f"bomb.zip: entry 'zeros.bin' expands {ratio:.0f} times (the limit is 100); "
        "refused as a possible decompression bomb"
    )


def test_tar_gz_bomb(tmp_path, dest):
    archive = make_tar(tmp_path / "bomb.tar.gz", [file_member("zeros.bin", bytes(20 * MB))])
    ratio = 20 * MB / archive.stat().st_size
    assert refused(archive, dest, max_ratio=100) == (
        f"bomb.tar.gz: the archive expands {ratio:.0f} times (the limit is 100); "
        "refused as a possible decompression bomb"
    )


def patch_zip_size(path: Path, declared: int) -> None:
    """Make the zip's only entry declare ``declared`` uncompressed bytes, in both headers."""
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.index(signature) + offset
        data[at : at + 4] = struct.pack("<I", declared)
    path.write_bytes(bytes(data))


def test_zip_lying_about_a_small_size(tmp_path, dest):
    archive = make_zip(tmp_path / "liar.zip", {"big.bin": bytes(2 * MB)})
    patch_zip_size(archive, 10)
    assert refused(archive, dest) == (
        "liar.zip: entry 'big.bin' holds more than the 10 bytes it declares"
    )


def test_zip_lying_about_a_large_size(tmp_path, dest):
    archive = make_zip(tmp_path / "liar.zip", {"small.txt": b"hello"})
    patch_zip_size(archive, 500)
    assert refused(archive, dest) == "liar.zip: entry 'small.txt' holds 5 bytes but declares 500"


def test_total_size_limit(tmp_path, dest):
    archive = make_zip(tmp_path / "big.zip", {"a.bin": bytes(600), "b.bin": bytes(600)})
    assert refused(archive, dest, max_total_bytes=1000) == (
        "big.zip: unpacks to more than 1000 bytes (the limit)"
    )


def test_total_size_limit_in_tar(tmp_path, dest):
    members = [file_member("a.bin", bytes(600)), file_member("b.bin", bytes(600))]
    archive = make_tar(tmp_path / "big.tar", members, "w")
    assert refused(archive, dest, max_total_bytes=1000) == (
        "big.tar: unpacks to more than 1000 bytes (the limit)"
    )


def test_too_many_files(tmp_path, dest):
    archive = make_zip(tmp_path / "many.zip", {f"{i}.txt": b"x" for i in range(4)})
    assert refused(archive, dest, max_files=3) == "many.zip: more than 3 entries (the limit)"


def test_too_many_files_in_tar(tmp_path, dest):
    archive = make_tar(tmp_path / "many.tgz", [file_member(f"{i}.txt", b"x") for i in range(4)])
    assert refused(archive, dest, max_files=3) == "many.tgz: more than 3 entries (the limit)"


def test_not_a_zip(tmp_path, dest):
    archive = tmp_path / "broken.zip"
    archive.write_bytes(b"this is not a zip file at all" * 10)
    assert refused(archive, dest) == "broken.zip: corrupt zip archive (File is not a zip file)"


def test_not_an_archive_at_all(tmp_path, dest):
    blob = tmp_path / "notes.txt"
    blob.write_text("hello")
    assert refused(blob, dest) == "notes.txt: not a zip, tar or tar.gz archive"


def test_zip_crc_mismatch(tmp_path, dest):
    archive = make_zip(tmp_path / "crc.zip", {"a.txt": b"hello world"}, zipfile.ZIP_STORED)
    archive.write_bytes(archive.read_bytes().replace(b"hello world", b"hellO world"))
    assert (
        refused(archive, dest) == "crc.zip: entry 'a.txt' is corrupt (Bad CRC-32 for file 'a.txt')"
    )


def test_truncated_tar_gz(tmp_path, dest):
    data = (SAMPLES / "brain_v1.tar.gz").read_bytes()
    archive = tmp_path / "brain.tar.gz"
    archive.write_bytes(data[: len(data) // 2])
    message = refused(archive, dest)
    assert message.startswith("brain.tar.gz: corrupt tar.gz archive (")


def test_tar_gz_with_a_bad_crc(tmp_path, dest):
    tar = make_tar(tmp_path / "x.tar", [file_member("a.txt", b"a")], "w")
    data = bytearray(gzip.compress(tar.read_bytes()))
    data[-8] ^= 0xFF  # the CRC32 in the gzip trailer
    archive = tmp_path / "crc.tar.gz"
    archive.write_bytes(bytes(data))
    tar.unlink()
    message = refused(archive, dest)
    assert message.startswith("crc.tar.gz: corrupt tar.gz archive (CRC check failed 0x")


def test_damaged_tar_header_is_not_read_as_the_end(tmp_path, dest):
    members = [file_member("a.txt", b"a"), file_member("b.txt", b"b")]
    data = bytearray(make_tar(tmp_path / "t.tar", members, "w").read_bytes())
    data[1024:1030] = b"garbag"  # the second member's header
    archive = tmp_path / "damaged.tar"
    archive.write_bytes(bytes(data))
    assert refused(archive, dest) == (
        "damaged.tar: corrupt tar archive (damaged or truncated header at byte 1024)"
    )


def test_duplicate_names_in_zip(tmp_path, dest):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate we want
        archive = make_zip(tmp_path / "dup.zip", {"a.txt": b"1"})
        with zipfile.ZipFile(archive, "a") as zf:
            zf.writestr("./a.txt", b"2")
    assert refused(archive, dest) == "dup.zip: entry 'a.txt' appears more than once"


def test_duplicate_names_in_tar(tmp_path, dest):
    members = [file_member("a.txt", b"1"), file_member("a.txt", b"2")]
    archive = make_tar(tmp_path / "dup.tar.gz", members)
    assert refused(archive, dest) == "dup.tar.gz: entry 'a.txt' appears more than once"


def test_file_used_as_a_directory(tmp_path, dest):
    archive = make_zip(tmp_path / "clash.zip", {"a": b"file", "a/b.txt": b"inside"})
    assert refused(archive, dest) == "clash.zip: entry 'a/b.txt' is inside 'a', a file"


def test_empty_archive(tmp_path, dest):
    archive = make_zip(tmp_path / "empty.zip", {"dir/": b""})
    assert refused(archive, dest) == "empty.zip: the archive holds no files"


def test_encrypted_zip_entry(tmp_path, dest):
    archive = make_zip(tmp_path / "secret.zip", {"a.txt": b"a"}, zipfile.ZIP_STORED)
    data = bytearray(archive.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        data[data.index(signature) + offset] |= 0x1
    archive.write_bytes(bytes(data))
    assert refused(archive, dest) == "secret.zip: entry 'a.txt' is encrypted"


def test_bzip2_zip_entry(tmp_path, dest):
    archive = make_zip(tmp_path / "bz.zip", {"a.txt": b"a"}, zipfile.ZIP_BZIP2)
    assert refused(archive, dest) == (
        "bz.zip: entry 'a.txt' uses compression method 12; "
        "only stored and deflated entries are accepted"
    )


def test_huge_tar_header(tmp_path, dest):
    big = tar_info("a.txt", size=1, pax_headers={"comment": "x" * (17 * MB)})
    archive = make_tar(tmp_path / "pax.tar.gz", [(big, b"a")])
    assert refused(archive, dest) == "pax.tar.gz: a tar header is over 16777216 bytes"


def test_control_characters_in_an_entry_name(tmp_path, dest):
    archive = make_zip(tmp_path / "ctl.zip", {"a\x07.txt": b"a"})
    assert (
        refused(archive, dest) == "ctl.zip: entry 'a\\x07.txt' has control characters in its name"
    )


def test_many_small_entries_that_expand_too_much_together(tmp_path, dest):
    # Each entry is small enough to be exempt from the per-entry ratio; the total is not.
    archive = make_zip(tmp_path / "many.zip", {f"{i}.bin": bytes(MB) for i in range(10)})
    # Refused as soon as the running total crosses the limit: after the second entry.
    ratio = 2 * MB / archive.stat().st_size
    assert refused(archive, dest, max_ratio=100) == (
        f"many.zip: the archive expands {ratio:.0f} times (the limit is 100); "
        "refused as a possible decompression bomb"
    )


def test_tar_stream_of_headers_alone_is_bounded(tmp_path, dest):
    members = [(tar_info(f"d{i}", tarfile.DIRTYPE), b"") for i in range(2500)]
    archive = make_tar(tmp_path / "dirs.tar", members, "w")
    assert refused(archive, dest, max_total_bytes=100) == (
        f"dirs.tar: the tar stream runs past {200 + MB} bytes"
    )
