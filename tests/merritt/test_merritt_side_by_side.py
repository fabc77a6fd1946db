"""Both ingests on one ZooKeeper at once: this project's dispatcher and workers, and a
replay of Merritt's ingest (harness/merrittzk.py) polling every consumer in another thread.

The contract: whichever side takes an item, it takes it alone. Every transition either side
writes is logged; no transition of an item is written twice, each item's transitions form
one chain, every batch is reported once, MerrittZK never throws on a node we wrote, and
nothing is failed with a traceback.

The points of issue 13 one at a time, each against the same replay, live beside this file:
``_batches`` (1 reporting only once batch-processing is empty, 3 holds MerrittZK cannot
acquire, 4 deletes that do not block its reporting, 5 the worker modes), ``_jobs`` (2 resume
after Merritt's requeue, 6 collection holds by profile, 7 local-id locks, 8 both sides'
configuration keys) and ``_checks`` (9 the mirror's lock flag and local ids, 10 check_tree).
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from harness.merrittzk import JOB_SUCCESS, MerrittIngest, MerrittZK

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

FINAL = {"Completed", "Failed", "Deleted"}


class LoggingMerrittZK(MerrittZK):
    def __init__(self, client, log):
        super().__init__(client)
        self.log = log

    def set_status(self, item, status, message=""):
        before = item.status
        super().set_status(item, status, message)
        if before is not None and before != status:
            self.log.append(("merritt", item.kind, item.id, before, status))


def merritt_side(ingest: MerrittIngest, stop: threading.Event, errors: list) -> None:
    polls = [ingest.consume_batch, ingest.initialize, ingest.report]
    polls += [lambda s=s: ingest.run_step(s) for s in JOB_SUCCESS]
    while not stop.is_set():
        busy = False
        for poll in polls:
            try:
                busy |= poll() is not None
            except Exception as e:  # Merritt's consumers print and carry on
                errors.append(repr(e))
        if not busy:
            time.sleep(0.02)


def our_log(store, log: list) -> None:
    """Every transition our store writes, heard as the mirror's write-through hears it: the
    process has one store, so a listener added to it hears every worker's writes."""

    def listener(change):
        new = getattr(change.record, "status", None)
        if change.old_status and new and new != change.old_status:
            log.append(("ours", change.kind, change.id, change.old_status, new))

    store.changes.listeners.insert(0, listener)


def test_both_ingests_work_one_ensemble_and_nothing_is_done_twice(
    pipeline, content, make_client, settings
):
    settings.MQ_WORKERS = "own"
    settings.MQ_REPORT_LOCK_GRACE = 2.0  # as deployed beside Merritt's ingest
    log: list = []
    our_log(pipeline.store, log)
    merritt = LoggingMerrittZK(make_client(), log)
    ingest = MerrittIngest(merritt)
    ours = [
        pipeline.submit(type="file", payload_url=f"{content.url}/{name}")
        for name in ("call911.jpg", "4blocks.txt", "bigHunt.txt")
    ]
    ours.append(
        pipeline.submit(type="object-manifest", payload_url=f"{content.url}/4blocks.checkm")
    )
    theirs = []
    for i in range(3):
        merritt.create_batch(
            {
                "submitter": "merritt",
                "profile": "demo",
                "filename": f"m{i}.txt",
                "type": "file",
                "update": False,
            }
        )
    stop, errors = threading.Event(), []
    thread = threading.Thread(target=merritt_side, args=(ingest, stop, errors), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            statuses = pipeline.store.batches.batch_statuses()
            if statuses and all(s.get("status") in FINAL for s in statuses.values()):
                break
            if not pipeline.step():
                time.sleep(0.05)
    finally:
        stop.set()
        thread.join(10)
    statuses = {b: s["status"] for b, s in pipeline.store.batches.batch_statuses().items()}
    assert all(s in FINAL for s in statuses.values()), statuses
    assert errors == [], errors[:5]
    twice = [t for t, n in Counter(x[1:] for x in log).items() if n > 1]
    assert twice == [], twice
    by_item: dict = {}
    for side, kind, item, old, new in log:
        by_item.setdefault((kind, item), []).append((old, new, side))
    for key, moves in by_item.items():
        outs = Counter(old for old, _, _ in moves)
        ins = Counter(new for _, new, _ in moves)
        assert all(n == 1 for n in outs.values()), (key, moves)
        assert sum((outs - ins).values()) == 1, (key, moves)  # one start, one chain
    reported = [x for x in log if x[1] == "batch" and x[4] in ("Completed", "Failed")]
    assert Counter(x[2] for x in reported) == Counter(statuses.keys()), reported
    for bid in statuses:
        for jid in (j for g in pipeline.store.batches.batch_jobs(bid).values() for j in g):
            message = pipeline.store.jobs.get_job(jid).message
            assert "Traceback" not in message and "KeyError" not in message, message
    del ours, theirs
