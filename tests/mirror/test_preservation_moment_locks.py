"""Locks over time (jobs.LockSpan): the spans the mirror opens and closes as it reads the
lock nodes (mirror.lockspans, written where the locks' snapshot is stored), a lock taken
again being a new span, the locks held at a moment and those taken or released between
two, within the reader's scope. No ZooKeeper: the snapshots are given."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest

from jobs.models import Job, LockSpan
from mirror.locks import refresh_locks
from mirror.lockspans import RETENTION, record
from mirror.moment import locks as moment_locks
from mirror.moment import report
from mirror.moment.scope import EVERYTHING, Scope
from tests.mirror.test_preservation_moment import at, make_record

pytestmark = pytest.mark.django_db
pytest_plugins = ["tests.mirrorlive"]


def node(taken: float, owner: int = 0x1F, data: bytes = b"") -> tuple[bytes, SimpleNamespace]:
    """A lock node as the mirror reads it: (data, stat), ctime in ms."""
    return data, SimpleNamespace(ctime=int(at(taken).timestamp() * 1000), ephemeralOwner=owner)


HOLD = "/locks/collections/demo"
OTHER = "/locks/collections/other"
STORE = "/locks/storage/ark_13030_m5x"


def test_a_new_lock_opens_a_span_dated_by_its_node(db):
    refresh_locks({HOLD: node(10)}, at(20))
    span = LockSpan.objects.get()
    assert (span.path, span.kind, span.name) == (HOLD, "collection", "demo")
    assert span.taken_at == at(10)
    assert span.first_seen_at == span.last_seen_at == at(20)
    assert span.gone_seen_at is None


def test_a_lock_still_there_moves_its_last_seen_and_one_gone_is_closed(db):
    refresh_locks({HOLD: node(10), OTHER: node(15)}, at(20))
    refresh_locks({HOLD: node(10)}, at(30))
    refresh_locks({HOLD: node(10)}, at(40))
    held, gone = LockSpan.objects.get(path=HOLD), LockSpan.objects.get(path=OTHER)
    assert held.last_seen_at == at(40) and held.gone_seen_at is None
    assert gone.last_seen_at == at(20) and gone.gone_seen_at == at(30)
    assert LockSpan.objects.count() == 2


def test_a_lock_taken_again_is_a_new_span(db):
    refresh_locks({HOLD: node(10)}, at(20))
    refresh_locks({HOLD: node(25)}, at(30))
    first, second = LockSpan.objects.order_by("taken_at")
    assert first.gone_seen_at == at(30)
    assert second.taken_at == at(25) and second.gone_seen_at is None


def test_reading_the_lock_directories_leaves_item_locks_open(db):
    entries = [
        {
            "path": "/jobs/jid0000000001/lock",
            "kind": "job",
            "name": "jid0000000001",
            "ctime": at(5).isoformat(),
            "owner": "0x1",
            "data": "",
        },
    ]
    record(entries, at(10))
    refresh_locks({}, at(20))  # the lock directories only: the job's lock was not read
    assert LockSpan.objects.get().gone_seen_at is None
    record([], at(30))  # a full read that no longer found it
    assert LockSpan.objects.get().gone_seen_at == at(30)


def test_spans_gone_longer_than_the_retention_are_deleted(db):
    refresh_locks({HOLD: node(10)}, at(20))
    refresh_locks({}, at(30))
    later = at(30) + RETENTION + timedelta(seconds=1)
    refresh_locks({OTHER: node(40)}, later)
    assert list(LockSpan.objects.values_list("path", flat=True)) == [OTHER]


@pytest.fixture
def spans(db):
    refresh_locks({HOLD: node(10), STORE: node(12)}, at(20))
    refresh_locks({HOLD: node(10), OTHER: node(50)}, at(60))
    refresh_locks({OTHER: node(50)}, at(100))


def test_the_locks_held_at_a_moment(spans):
    assert [s.path for s in moment_locks.held_at(at(5), EVERYTHING)] == []
    assert [s.path for s in moment_locks.held_at(at(15), EVERYTHING)] == [HOLD, STORE]
    # The storage lock went between 20 s (last seen) and 60 s (gone): held until then.
    assert [s.path for s in moment_locks.held_at(at(55), EVERYTHING)] == [HOLD, OTHER, STORE]
    assert [s.path for s in moment_locks.held_at(at(60), EVERYTHING)] == [HOLD, OTHER]
    assert [s.path for s in moment_locks.held_at(at(120), EVERYTHING)] == [OTHER]


def test_locks_taken_and_released_between_two_moments(spans):
    taken, released = moment_locks.turned(at(30), at(110), EVERYTHING)
    assert [s.path for s in taken] == [OTHER]
    assert sorted(s.path for s in released) == [HOLD, STORE]


def test_a_reader_sees_only_their_collections_locks(spans):
    Job.objects.create(
        jid="jid0000000009",
        batch_id="bid1",
        collection="other",
        profile="other_content",
        status="Pending",
        read_at=at(0),
    )
    record(
        [
            {
                "path": "/jobs/jid0000000009/lock",
                "kind": "job",
                "name": "jid0000000009",
                "ctime": at(52).isoformat(),
                "owner": "0x1",
                "data": "",
            }
        ],
        at(61),
        under="/jobs/",
    )
    demo = Scope(frozenset({"demo"}), frozenset({"demo_content"}))
    other = Scope(frozenset({"other"}), frozenset({"other_content"}))
    assert [s.path for s in moment_locks.held_at(at(15), demo)] == [HOLD]  # no storage lock
    assert [s.path for s in moment_locks.held_at(at(62), other)] == [
        "/jobs/jid0000000009/lock",
        OTHER,
    ]
    assert [s.path for s in moment_locks.held_at(at(62), demo)] == [HOLD]


def test_the_report_lists_the_locks_and_says_how_well_their_release_is_known(spans):
    body = report.moment(at(55), EVERYTHING)
    assert body["locks"]["recorded"] is True
    held = {lock["path"]: lock for lock in body["locks"]["held"]}
    assert held[HOLD]["taken_at"] == report.utc(at(10))
    assert "not recorded over time" not in report.LOCKS_NOTE
    between = report.between(at(30), at(110), EVERYTHING)
    assert [lock["path"] for lock in between["locks"]["taken"]] == [OTHER]
    released = {lock["path"]: lock for lock in between["locks"]["released"]}
    assert released[HOLD]["last_seen_at"] == report.utc(at(60))
    assert released[HOLD]["gone_seen_at"] == report.utc(at(100))


def test_the_command_lists_the_locks(spans, capsys):
    from django.core.management import call_command

    make_record()
    call_command("moment", "--at", at(55).isoformat())
    out = capsys.readouterr().out
    assert f"lock: {HOLD} taken" in out and "released between" in out
    call_command("moment", "--at", at(30).isoformat(), "--to", at(110).isoformat())
    assert f"lock taken: {OTHER}" in capsys.readouterr().out


def test_the_full_rebuild_records_a_jobs_lock_dated_by_its_node(live, db):
    from mirror import facade as mirror
    from tests.mirrorlive import make_jobs

    _, (jid,) = make_jobs(live, 1)
    live.job_locks.lock_job(jid)
    ctime = live.client.exists(f"/jobs/{jid}/lock").ctime
    mirror.full_reconcile(live)
    span = LockSpan.objects.get(kind="job")
    assert span.name == jid and span.taken_at.timestamp() == ctime / 1000
    live.job_locks.unlock_job(jid)
    mirror.full_reconcile(live)
    assert LockSpan.objects.get(kind="job").gone_seen_at is not None
