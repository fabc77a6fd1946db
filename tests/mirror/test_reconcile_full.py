"""``reconcile --full`` at any size: read and written a chunk at a time, the drift's ids
kept to a few, a progress line while it runs, and the mirror exact afterwards.

How fast a million jobs go is the ``reconcile`` benchmark's (bench/reconcile.py); here
only what does not depend on time.
"""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from batches.models import Batch, BatchEvent
from jobs.models import Job, JobEvent
from merritt_queue.core import jobids, snapshot
from merritt_queue.core import tree as t
from merritt_queue.core.states import JobStatus
from mirror import facade as mirror
from mirror import rebuild
from mirror.progressline import ProgressLine
from mirror.rows import JOB_FIELDS, job_values
from tests.mirrorlive import make_jobs

pytest_plugins = ["tests.mirrorlive"]

LINE = re.compile(
    r"^reconcile --full: ([\d,]+) of ([\d,]+) jobs and batches read and written, "
    r"([\d,]+)/s, elapsed (\d+m\d\ds), ETA (\d+m\d\ds|unknown)$"
)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


# --- the progress line, on a clock of its own ----------------------------------------------


def test_the_progress_line_is_written_every_few_seconds_not_per_chunk():
    now, lines = [0.0], []
    progress = ProgressLine(lines.append, every=5.0, clock=lambda: now[0])
    for done in range(0, 10_001, 500):  # a chunk every half second
        progress(done, 10_000)
        now[0] += 0.5
    progress(10_000, 10_000)  # the rebuild tells its end twice
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    # The first chunk, then one line per 5 s, the last at the end; 21 chunks, 3 lines.
    assert [_number(m[1]) for m in parsed] == [0, 5000, 10_000]
    assert {_number(m[2]) for m in parsed} == {10_000}
    assert parsed[0][5] == "unknown"
    assert parsed[1].groups()[2:] == ("1,000", "0m05s", "0m05s")  # 5,000 in 5 s; 5,000 left
    assert parsed[2].groups()[2:] == ("1,000", "0m10s", "0m00s")


# --- a rebuild of a real tree -----------------------------------------------------------------


@pytest.fixture
def held(monkeypatch):
    """The most jobs whose reads are in flight or whose records are being written at once."""
    state = {"flight": 0, "most": 0, "written": 0}
    start, apply_jobs = snapshot.start_jobs, rebuild.apply_jobs

    def start_jobs(client, jids, history=True):
        pending = start(client, jids, history)
        state["flight"] += len(pending.ids)
        state["most"] = max(state["most"], state["flight"])
        result = pending.result

        def done():
            state["flight"] -= len(pending.ids)
            return result()

        pending.result = done
        return pending

    def apply(records, **kw):
        state["written"] = max(state["written"], len(records))
        return apply_jobs(records, **kw)

    monkeypatch.setattr(snapshot, "start_jobs", start_jobs)
    monkeypatch.setattr(rebuild, "apply_jobs", apply)
    return state


def test_a_rebuild_holds_a_few_chunks_of_jobs_and_a_few_ids_whatever_the_size(
    store, db, held, monkeypatch
):
    monkeypatch.setattr(rebuild, "LISTED", 4)
    bids = [make_jobs(store, 9)[0] for _ in range(2)]
    drift = mirror.full_reconcile(store, chunk=3)
    assert (drift.jobs, drift.batches) == (18, 2) and Job.objects.count() == 18
    assert drift.summary()["added"] == 20 and len(drift.added) == 4  # counted, 4 kept
    assert held["written"] == 3 and held["most"] <= 2 * 3
    report = rebuild.report_lines(drift, 2)
    assert report[0].startswith(f"added: 20  {bids[0]} {bids[1]} ... (+18)")


def test_the_listing_of_the_jobs_is_numbers_and_skips_what_is_not_a_job(store):
    _, jids = make_jobs(store, 3)
    store.client.create(f"{t.JOBS}/not-a-job")
    listing = snapshot.read_listing(store.client)
    assert isinstance(listing.jids, jobids.JobIds) and len(listing.jids) == 3
    assert list(listing.jids) == sorted(jids) and all(j in listing.jids for j in jids)
    assert "not-a-job" not in listing.jids and "jid9999999999" not in listing.jids
    assert list(listing.jids.chunks(2)) == [sorted(jids)[:2], sorted(jids)[2:]]


def test_the_command_writes_sane_progress_lines_to_stderr(live, db, monkeypatch):
    monkeypatch.setattr(snapshot, "JOB_CHUNK", 3)
    make_jobs(live, 7)
    make_jobs(live, 1)
    for model in (JobEvent, BatchEvent, Job, Batch):
        model.objects.all().delete()
    out, err = io.StringIO(), io.StringIO()
    call_command("reconcile", "--full", "--progress-seconds", "0", stdout=out, stderr=err)
    lines = err.getvalue().splitlines()
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    done = [_number(m[1]) for m in parsed]
    assert done == [2, 5, 8, 10]  # the 2 batches, then each chunk of 3 jobs
    assert {_number(m[2]) for m in parsed} == {10}
    assert "ETA 0m00s" in lines[-1] and "added: 10" in out.getvalue()
    assert "reconcile --full" not in out.getvalue()  # the report stays clean for scripts


# --- exact -----------------------------------------------------------------------------------


def _job_in_every_state(live) -> list[str]:
    """A job in each state a job can be in, each moved there through the store."""
    _, jids = make_jobs(live, 12)
    held, deleted, failed, *moving = jids[1:]
    live.moves.hold_job(held, "asked")
    live.moves.hold_job(deleted, "asked")
    live.moves.delete_job(deleted)
    for steps, jid in [(2, failed), *enumerate(moving, start=1)]:
        record = live.job_locks.lock_job(jid)
        for _ in range(steps):
            record = live.moves.succeed_job(record, "on", keep_lock=True)
        if jid == failed:
            live.moves.fail_job(record, "download refused", release_lock=True)
        else:
            live.job_locks.unlock_job(jid)
    return jids


def test_a_rebuild_in_chunks_makes_the_mirror_the_tree_holds_for_jobs_in_every_state(live, db):
    jids = _job_in_every_state(live)
    statuses = {live.jobs.get_job(j).status for j in jids}
    assert statuses == set(JobStatus)
    events = list(JobEvent.objects.order_by("jid", "status_version").values_list())
    for model in (JobEvent, BatchEvent, Job, Batch):
        model.objects.all().delete()

    drift = mirror.full_reconcile(live, chunk=5)
    assert drift.summary()["added"] == 13 and drift.jobs == 12
    for jid in jids:
        row = Job.objects.filter(jid=jid).values(*JOB_FIELDS).get()
        assert row == {f: job_values(live.jobs.get_job(jid))[f] for f in JOB_FIELDS}, jid
    rebuilt = list(JobEvent.objects.order_by("jid", "status_version").values_list())
    assert [e[1:] for e in rebuilt] == [e[1:] for e in events]
