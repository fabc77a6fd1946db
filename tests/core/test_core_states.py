"""State machines and encoding: pure logic, nothing running."""

import itertools

import pytest

from merritt_queue.core import tree as t
from merritt_queue.core.errors import InvalidData, InvalidTransition
from merritt_queue.core.states import (
    BATCH,
    JOB,
    JOB_STEPS,
    BatchStatus,
    JobStatus,
    batch_dir_for,
    next_last_successful,
    resume_choices,
    resume_target,
)

# zk-tree.md's tables, written out again on purpose: the test must not derive
# the expectation from the code it checks.
JOB_ALLOWED = {
    "Pending": {"Held", "Estimating", "Failed"},
    "Held": {"Pending", "Deleted", "Storing", "Failed"},
    "Estimating": {"Provisioning", "Failed"},
    "Provisioning": {"Downloading", "Failed"},
    "Downloading": {"Processing", "Failed"},
    "Processing": {"Storing", "Held", "Failed"},
    "Storing": {"Recording", "Failed"},
    "Recording": {"Notify", "Failed"},
    "Notify": {"Completed", "Failed"},
    "Failed": {
        "Pending",
        "Estimating",
        "Provisioning",
        "Downloading",
        "Processing",
        "Storing",
        "Recording",
        "Notify",
        "Deleted",
    },
    "Completed": set(),
    "Deleted": set(),
}
BATCH_ALLOWED = {
    "Pending": {"Held", "Processing"},
    "Held": {"Pending", "Deleted"},
    "Processing": {"Reporting", "Failed"},
    "Reporting": {"Completed", "Failed"},
    "Failed": {"UpdateReporting", "Deleted"},
    "UpdateReporting": {"Completed", "Failed"},
    "Completed": set(),
    "Deleted": set(),
}


def test_status_names_are_the_capitalised_wire_names():
    assert [s.value for s in JobStatus] == (
        "Pending Held Estimating Provisioning Downloading Processing Storing Recording Notify "
        "Completed Failed Deleted"
    ).split()
    assert set(BatchStatus) == set(BATCH_ALLOWED)


@pytest.mark.parametrize("old,new", list(itertools.product(JOB_ALLOWED, JOB_ALLOWED)))
def test_job_machine_allows_exactly_the_documented_moves(old, new):
    assert JOB.can_move(old, new) == (new in JOB_ALLOWED[old])
    if new in JOB_ALLOWED[old]:
        JOB.check_move(old, new, "job x")
    else:
        with pytest.raises(InvalidTransition, match=f"cannot move from {old} to {new}"):
            JOB.check_move(old, new, "job x")


@pytest.mark.parametrize("old,new", list(itertools.product(BATCH_ALLOWED, BATCH_ALLOWED)))
def test_batch_machine_allows_exactly_the_documented_moves(old, new):
    assert BATCH.can_move(old, new) == (new in BATCH_ALLOWED[old])


def test_success_path_walks_every_step_to_completed():
    status, seen = "Pending", []
    while status != "Completed":
        status = JOB.success_of(status)
        seen.append(status)
    assert seen == [*JOB_STEPS, "Completed"]
    assert BATCH.success_of("Processing") == "Reporting"
    assert BATCH.success_of("UpdateReporting") == "Completed"


def test_unknown_status_is_refused_with_a_clear_message():
    with pytest.raises(InvalidTransition, match="'Lost' is not a job status"):
        JOB.check_move("Pending", "Lost", "job x")


@pytest.mark.parametrize(
    "old,new,before,after",
    [
        ("Pending", "Estimating", None, "Pending"),
        ("Estimating", "Provisioning", "Pending", "Estimating"),
        ("Downloading", "Failed", "Provisioning", "Provisioning"),
        ("Failed", "Downloading", "Provisioning", "Provisioning"),
        ("Failed", "Deleted", "Provisioning", "Provisioning"),
        ("Held", "Deleted", "Pending", "Pending"),
        ("Pending", "Pending", "Held", "Held"),
        ("Pending", "Held", None, "Pending"),
        ("Processing", "Held", "Downloading", "Processing"),
        ("Held", "Storing", "Processing", "Processing"),
    ],
)
def test_last_successful_status_follows_the_tree_rules(old, new, before, after):
    assert next_last_successful(old, new, before) == after


@pytest.mark.parametrize("step", JOB_STEPS)
def test_resume_restarts_the_step_that_failed(step):
    last_successful = "Pending" if step == "Estimating" else JOB_STEPS[JOB_STEPS.index(step) - 1]
    assert resume_target(last_successful) == step
    choices = resume_choices(last_successful)
    assert choices[0] == "Pending" and choices[-1] == step
    assert all(later not in choices for later in JOB_STEPS[JOB_STEPS.index(step) + 1 :])


def test_a_job_that_failed_in_pending_resumes_in_pending():
    assert resume_target(None) == "Pending"
    assert resume_choices(None) == ("Pending",)


def test_batch_directory_of_each_job_status():
    assert batch_dir_for("Completed") == "batch-completed"
    assert batch_dir_for("Failed") == "batch-failed"
    assert batch_dir_for("Deleted") == "batch-deleted"
    assert {batch_dir_for(s) for s in ("Pending", "Held", *JOB_STEPS)} == {"batch-processing"}


def test_paths_follow_the_wire_format():
    assert (
        t.job_index("Estimating", 2, "jid0000000007") == "/jobs/states/estimating/02-jid0000000007"
    )
    assert t.batch_job_ref("bid0000000042", "Failed", "jid0000000007") == (
        "/batches/bid0000000042/states/batch-failed/jid0000000007"
    )
    assert t.parse_index_name("05-jid0000000001") == (5, "jid0000000001")
    assert t.parse_index_name("5-jid1") is None
    assert t.lock_name("ark:/13030/m5abc") == "ark_13030_m5abc"
    assert t.lock_name("a/b:c") == "a_b:c"
    assert t.collection_lock("demo_coll") == "/locks/collections/demo_coll"


def test_values_are_encoded_as_merritt_writes_them():
    assert t.encode_json({"a": 1, "b": [1, 2]}) == b'{"a":1,"b":[1,2]}'
    assert t.encode_json(None) == b""
    assert t.decode_json(b"") is None
    assert t.encode_int(5) == b"5" and t.decode_int(b"12") == 12 and t.decode_int(b"", 5) == 5
    assert t.encode_str("bid0000000001") == b"bid0000000001" and t.decode_str(b"") is None
    assert t.encode_json({"title": "Café"}) == '{"title":"Café"}'.encode()


def test_timestamps_are_local_time_with_offset():
    stamp = t.now()
    assert t.parse_timestamp(stamp) is not None
    assert len(stamp) == len("2026-11-21 14:15:25 -0800")


def test_status_records_have_the_wire_keys_in_order():
    rec = t.job_status_record("Pending", last_modified="x")
    assert list(rec) == [
        "status",
        "last_successful_status",
        "last_modified",
        "retry_count",
        "message",
    ]
    assert (
        rec["last_successful_status"] is None and rec["message"] == "" and rec["retry_count"] == 0
    )
    assert list(t.batch_status_record("Pending", last_modified="x")) == [
        "status",
        "last_modified",
        "message",
    ]


@pytest.mark.parametrize("bad", [-1, 100, 2.5, "5", True, None])
def test_priority_outside_two_digits_is_refused(bad):
    with pytest.raises(InvalidData, match="priority"):
        t.check_priority(bad)


def test_ids_are_checked_before_use():
    assert t.check_id("jid", "jid0000000001") == "jid0000000001"
    with pytest.raises(InvalidData, match="not a valid jid id"):
        t.check_id("jid", "../jid1")
    with pytest.raises(InvalidData, match="cannot be a node name"):
        t.batch_uuid_path("a/b")
