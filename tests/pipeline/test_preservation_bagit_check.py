"""Checking a bag and reading its bag-info, without services (fast tier): what the pipeline
test cannot reach cheaply (many problems, hostile tag files, the depositor's values)."""

from __future__ import annotations

from pathlib import Path

import bagit

from merritt_queue.core.records import JobRecord
from merritt_queue.deposit import bags
from pipeline import bagstep


def make_bag(root: Path, files: dict[str, bytes], info=None) -> Path:
    bag_dir = root / "bag"
    for name, data in files.items():
        target = bag_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    bagit.make_bag(str(bag_dir), info or {}, checksums=["sha256"])
    return bag_dir


def job(metadata=None, identifiers=None, configuration=None) -> JobRecord:
    return JobRecord(
        jid="jid0000000001",
        bid="bid0000000001",
        priority=5,
        space_needed=0,
        configuration=configuration or {},
        status="Downloading",
        last_successful_status="Provisioning",
        last_modified="",
        retry_count=0,
        message="",
        status_version=0,
        metadata=metadata,
        identifiers=identifiers,
    )


def test_a_folder_is_a_bag_at_its_root_or_as_its_only_folder(tmp_path):
    bag_dir = make_bag(tmp_path, {"a.txt": b"a"})
    assert bags.find_bag(bag_dir) == bag_dir
    assert bags.find_bag(tmp_path) == bag_dir
    (tmp_path / "__MACOSX").mkdir()
    assert bags.find_bag(tmp_path) is None


def test_many_mismatches_make_a_short_message_and_a_complete_list(tmp_path):
    files = {f"f{i:03}.txt": b"x" for i in range(60)}
    bag_dir = make_bag(tmp_path, files)
    for name in files:
        (bag_dir / "data" / name).write_bytes(b"y")
    check = bags.check_bag(bag_dir)
    mismatches = [p for p in check.problems if p.kind == "mismatch"]
    assert len(mismatches) == 60
    message = bagstep.refusal("big.zip", check.problems)
    assert len(message) <= bagstep.MAX_MESSAGE
    assert message.startswith("big.zip: the bag does not check (60 digest mismatch(es)): ")
    assert message.endswith("more (in the step's record)")
    assert "data/f000.txt: sha256 expected " in message


def test_a_manifest_naming_a_path_outside_the_bag_is_refused_without_reading_it(tmp_path):
    bag_dir = make_bag(tmp_path, {"a.txt": b"a"})
    (tmp_path / "secret.txt").write_text("outside")
    with open(bag_dir / "manifest-sha256.txt", "a") as f:
        f.write("0" * 64 + "  data/../../secret.txt\n")
    check = bags.check_bag(bag_dir)
    (problem,) = check.problems
    assert "is unsafe" in str(problem) and str(tmp_path) not in str(problem)


def test_even_an_empty_fetch_txt_is_refused(tmp_path):
    bag_dir = make_bag(tmp_path, {"a.txt": b"a"})
    (bag_dir / "fetch.txt").write_text("\n")
    (problem,) = bags.check_bag(bag_dir).problems
    assert str(problem).startswith("it has a fetch.txt (0 file(s) listed to fetch from elsewhere)")


def test_a_tag_file_over_the_limit_is_refused_unread(tmp_path, monkeypatch):
    bag_dir = make_bag(tmp_path, {"a.txt": b"a"})
    monkeypatch.setattr(bags, "MAX_TAG_FILE_BYTES", 100)
    (bag_dir / "bag-info.txt").write_text("Title: " + "t" * 200 + "\n")
    (problem,) = bags.check_bag(bag_dir).problems
    assert str(problem).startswith("its tag file ")
    assert str(problem).endswith(" is over 100 bytes (the limit)")


def test_a_bag_without_payload_files_is_refused(tmp_path):
    bag_dir = tmp_path / "empty"
    bag_dir.mkdir()
    bagit.make_bag(str(bag_dir), {}, checksums=["sha256"])
    (problem,) = bags.check_bag(bag_dir).problems
    assert str(problem) == "No manifest files found"
    (bag_dir / "manifest-sha256.txt").write_text("")
    (problem,) = bags.check_bag(bag_dir).problems
    assert str(problem) == "the bag's data/ folder holds no file"


def test_a_damaged_bagit_txt_is_refused_without_the_working_path(tmp_path):
    bag_dir = make_bag(tmp_path, {"a.txt": b"a"})
    (bag_dir / "bagit.txt").write_text("BagIt-Version: 1.0\n")
    (problem,) = bags.check_bag(bag_dir).problems
    assert "Tag-File-Character-Encoding" in str(problem)
    assert str(tmp_path) not in str(problem)


def test_bag_info_values_are_one_line_and_bounded(tmp_path):
    info = {"Title": "A\x1b[31m title\u202e", "Contact-Name": "x" * 5000}
    check = bags.check_bag(make_bag(tmp_path, {"a.txt": b"a"}, info))
    assert check.valid
    assert check.info["Title"] == "A [31m title"
    assert len(check.info["Contact-Name"]) == bags.MAX_INFO_CHARS


def test_the_depositors_values_win_over_bag_info():
    info = {"Title": "From the bag", "Contact-Name": "Bagger", "External-Identifier": "bag-1"}
    given = job(metadata={"erc_what": "Given"}, configuration={"local_id": "given-1"})
    data = bagstep.filled(given, info, local_ids_accepted=True)
    assert data == {"metadata": {"erc_what": "Given", "erc_who": "Bagger"}}
    assert bagstep.filled_names(given, data) == ["who"]


def test_a_local_id_is_filled_only_where_the_profile_takes_one_and_it_is_printable():
    info = {"External-Identifier": "bag-1"}
    assert bagstep.filled(job(), info, local_ids_accepted=True) == {
        "identifiers": {"primary_id": "", "local_id": ["bag-1"]}
    }
    assert bagstep.filled(job(), info, local_ids_accepted=False) == {}
    assert bagstep.filled(job(), {"External-Identifier": "a/\ue000"}, True) == {}


def test_a_problem_names_the_depositors_file_on_one_line():
    odd = bags.BagProblem("mismatch", path="data/a\nb\u202e.txt", algorithm="md5", expected="x\ny")
    assert "\n" not in odd.said() and "\u202e" not in odd.said()
    assert "\n" not in bags.BagProblem("missing", path="data/a\r\nb").said()
