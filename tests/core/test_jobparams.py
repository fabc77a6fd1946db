"""A job's per-job parameters (core.jobparams): where each lives, and how far back an edit of
it makes the job restart."""

from __future__ import annotations

import pytest

from merritt_queue.core import jobparams as p


def test_the_fields_are_read_where_the_planner_and_merritt_write_them():
    config = {"payload_url": "https://x/a", "digest_type": "md5", "local_id": "old"}
    shown = p.current(config, {"primary_id": "ark:/1/a", "local_id": ["L"]}, {"erc_what": "T"})
    assert shown["payload_url"] == "https://x/a" and shown["local_id"] == "L"
    assert shown["erc_what"] == "T" and shown["erc_who"] == "" and shown["digest_value"] == ""
    assert p.current(None, None, None) == dict.fromkeys(p.ALL_FIELDS, "")


def test_an_edit_keeps_every_other_key_and_the_ark():
    config = {"payload_url": "u", "title": "T", "profile": "demo", "jobID": "jid1"}
    ids = {"primary_id": "ark:/1/a", "local_id": ["L"]}
    new = p.edited(
        config, ids, {"erc_what": "T", "erc_who": "W"}, {"erc_what": "", "local_id": "M"}
    )
    assert new.configuration == {
        "payload_url": "u",
        "profile": "demo",
        "jobID": "jid1",
        "local_id": "M",
    }
    assert new.identifiers == {"primary_id": "ark:/1/a", "local_id": ["M"]}
    assert new.metadata == {"erc_who": "W"}
    unchanged = p.edited(config, None, None, {"payload_url": "v"})
    assert unchanged.identifiers is None and unchanged.metadata is None
    with pytest.raises(ValueError, match="profile"):
        p.edited(config, None, None, {"profile": "other"})


def test_an_edit_of_the_local_id_keeps_the_others_a_merritt_job_carries():
    ids = {"primary_id": "", "local_id": ["a", "b"]}
    assert p.current(None, ids, None)["local_id"] == "a"
    assert p.edited(None, ids, None, {"local_id": "c"}).identifiers["local_id"] == ["c", "b"]
    assert p.edited(None, ids, None, {"local_id": ""}).identifiers["local_id"] == ["b"]


@pytest.mark.parametrize(
    ("last", "changed", "steps", "default"),
    [
        ("Provisioning", ["payload_url"], ("Pending", "Estimating"), "Estimating"),
        (
            "Provisioning",
            ["digest_value"],
            ("Pending", "Estimating", "Provisioning", "Downloading"),
            "Downloading",
        ),
        (
            "Storing",
            ["erc_what"],
            ("Pending", "Estimating", "Provisioning", "Downloading", "Processing"),
            "Processing",
        ),
        ("Estimating", ["erc_what"], ("Pending", "Estimating", "Provisioning"), "Provisioning"),
        (None, ["digest_value"], ("Pending",), "Pending"),
    ],
)
def test_an_edit_restarts_no_later_than_the_step_that_uses_it(last, changed, steps, default):
    assert p.resume_steps(last, changed) == steps
    assert p.default_step(last, changed) == default


def test_changes_and_their_description_keep_before_and_after():
    changes = p.changes_of({"erc_what": "a", "local_id": ""}, {"erc_what": "b", "local_id": ""})
    assert changes == {"erc_what": ("a", "b")}
    assert p.describe({"local_id": ("", "L")}) == "local id: (none) -> 'L'"
