"""How fast the store moves jobs, against a raw kazoo ``multi`` doing the same writes.

One process, one ZooKeeper (``ZK_HOSTS``), one client, one fresh chroot:

- set-up (untimed): one batch and ``BENCH_ZK_N`` jobs (default 2000), each read once;
  the same number of raw nodes under ``/raw`` shaped like a job's status and index entry.
- three rounds, each moving every job one step (Pending -> Estimating -> Provisioning
  -> Downloading: one status write and one index move, the batch reference stays in
  ``batch-processing``) with ``store.moves.transition_job``, and moving every raw node the same
  way with a hand-written ``multi`` (set status at its version, delete the old index
  entry, create the new one). Within a round the two sides alternate in blocks of
  ``BLOCK`` moves, so both see the same load of a shared machine; each round reports
  both rates and the summary takes the median rate of each side over the rounds.
- the locked step of a worker, ``lock_job`` then ``succeed_job``, over 200 jobs
  (reported as JSON lines only).

The baseline's status JSON is built once per round (same size as the store's record,
whose timestamp has a fixed width), so the baseline is the floor: ZooKeeper and kazoo only.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import uuid
from importlib import metadata
from time import perf_counter

from bench.common import emit, env_int, percentile, summary, timer, zk_store
from merritt_queue.core import tree as t
from merritt_queue.core.states import JobStatus
from merritt_queue.core.store import QueueStore

PART = "zk"
DEFAULT_N = 2000
LOCK_JOBS = 200
BLOCK = 100  # moves per side before switching to the other
PRIORITY = 5
STEPS = (
    (JobStatus.PENDING, JobStatus.ESTIMATING),
    (JobStatus.ESTIMATING, JobStatus.PROVISIONING),
    (JobStatus.PROVISIONING, JobStatus.DOWNLOADING),
)
RAW = "/raw"
# A job configuration of a plausible size (it is read once, never written by a move).
CONFIGURATION = {
    "collection": "bench",
    "profile": "merritt_bench_content",
    "submitter": "bench/merritt-queue",
    "update": False,
    "type": "file",
    "digest": {"type": "sha-256", "value": "0" * 64},
}


def run(args) -> None:
    n = env_int(PART, "BENCH_ZK_N", DEFAULT_N)
    store, cleanup = zk_store(PART)
    try:
        _bench(store, n)
    finally:
        cleanup()


def _bench(store: QueueStore, n: int) -> None:
    emit(
        PART,
        event="config",
        n=n,
        rounds=len(STEPS),
        lock_jobs=min(LOCK_JOBS, n),
        zk_hosts=os.environ.get("ZK_HOSTS"),
        python=platform.python_version(),
        kazoo=metadata.version("kazoo"),
    )
    with timer() as tm:
        records = _set_up_jobs(store, n)
        raw = RawNodes(store.client, n)
    emit(PART, event="setup", jobs=n, raw_nodes=n, seconds=round(tm.elapsed, 3))

    ours_rates: list[float] = []
    raw_rates: list[float] = []
    round_trips = 0
    for k, (old, new) in enumerate(STEPS, start=1):
        ours_s, raw_s, ours_lat, raw_lat, stats = _round(store, records, raw, k, old, new)
        ours_rate, raw_rate = n / ours_s, n / raw_s
        ours_rates.append(ours_rate)
        raw_rates.append(raw_rate)
        round_trips += stats["round_trips"]
        emit(
            PART,
            event="round",
            round=k,
            move=f"{old}->{new}",
            transitions_per_s=round(ours_rate, 1),
            baseline_per_s=round(raw_rate, 1),
            ratio=round(ours_rate / raw_rate, 3),
            round_trips_per_transition=stats["round_trips"] / n,
            writes_per_transition=stats["writes"] / n,
            mended=stats["mended"],
            ours_ms_p50=_ms(percentile(ours_lat, 50)),
            ours_ms_p99=_ms(percentile(ours_lat, 99)),
            baseline_ms_p50=_ms(percentile(raw_lat, 50)),
            baseline_ms_p99=_ms(percentile(raw_lat, 99)),
        )
        if stats["round_trips"] != n:
            emit(PART, event="warning", round=k, detail="round trips per transition is not 1")

    _locked_steps(store, [r.jid for r in records[: min(LOCK_JOBS, n)]])

    ours = statistics.median(ours_rates)
    base = statistics.median(raw_rates)
    paired = statistics.median(o / r for o, r in zip(ours_rates, raw_rates, strict=True))
    emit(
        PART,
        event="ratio",
        median_of_round_ratios=round(paired, 3),
        ratio_of_medians=round(ours / base, 3),
    )
    summary(
        PART,
        transitions_per_s=ours,
        baseline_per_s=base,
        ratio=ours / base,
        round_trips_per_transition=round_trips / (n * len(STEPS)),
        n=n,
    )


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _set_up_jobs(store: QueueStore, n: int) -> list:
    store.init()
    bid = store.new_batches.create_batch(
        {"batchID": f"bench-{uuid.uuid4().hex}", "collection": "bench"}
    ).id
    jids = [store.new_jobs.create_job(bid, CONFIGURATION, priority=PRIORITY) for _ in range(n)]
    return [store.jobs.get_job(jid) for jid in jids]


def _round(store: QueueStore, records: list, raw: RawNodes, k: int, old: str, new: str):
    """Move every job and every raw node ``old`` -> ``new``, alternating blocks of each.

    Short alternating blocks (the side that goes first alternates too) put both sides
    under the same load of a shared machine. Returns the seconds and per-move latencies
    of each side and the store's counter deltas; ``records`` is updated in place.
    """
    before = dict(store.stats)
    payload = t.encode_json(t.job_status_record(new, old))
    ours_s = raw_s = 0.0
    ours_lat: list[float] = []
    raw_lat: list[float] = []
    gc.collect()
    for b, lo in enumerate(range(0, len(records), BLOCK)):
        hi = min(lo + BLOCK, len(records))
        if (k + b) % 2:
            raw_s += raw.move(lo, hi, old, new, payload, raw_lat)
            ours_s += _move_jobs(store, records, lo, hi, new, ours_lat)
        else:
            ours_s += _move_jobs(store, records, lo, hi, new, ours_lat)
            raw_s += raw.move(lo, hi, old, new, payload, raw_lat)
    stats = {
        key: store.stats[key] - before.get(key, 0) for key in ("round_trips", "writes", "mended")
    }
    return ours_s, raw_s, ours_lat, raw_lat, stats


def _move_jobs(
    store: QueueStore, records: list, lo: int, hi: int, new: str, latencies: list
) -> float:
    """``store.moves.transition_job`` on ``records[lo:hi]`` (replaced by the moved records);
    seconds."""
    with timer() as tm:
        for i in range(lo, hi):
            start = perf_counter()
            records[i] = store.moves.transition_job(records[i], new)
            latencies.append(perf_counter() - start)
    return tm.elapsed


class RawNodes:
    """``n`` throw-away jobs under ``/raw``: a status node each and an index entry."""

    def __init__(self, client, n: int):
        self.client = client
        self.names = [f"{t.JOB_PREFIX}{i:010d}" for i in range(n)]
        self.versions = [0] * n
        for status in [old for old, _ in STEPS] + [STEPS[-1][1]]:
            client.ensure_path(self._dir(status))
        client.ensure_path(f"{RAW}/jobs")
        pending = t.encode_json(t.job_status_record(STEPS[0][0]))
        self._wait(client.create_async(f"{RAW}/jobs/{name}") for name in self.names)
        self._wait(client.create_async(self._status(name), pending) for name in self.names)
        self._wait(client.create_async(self._index(STEPS[0][0], name)) for name in self.names)

    @staticmethod
    def _wait(results) -> None:
        for result in list(results):
            result.get()

    @staticmethod
    def _dir(status: str) -> str:
        return f"{RAW}/states/{status.lower()}"

    @staticmethod
    def _status(name: str) -> str:
        return f"{RAW}/jobs/{name}/status"

    @staticmethod
    def _index(status: str, name: str) -> str:
        return f"{RAW}/states/{status.lower()}/{PRIORITY:02d}-{name}"

    def move(self, lo: int, hi: int, old: str, new: str, payload: bytes, latencies: list) -> float:
        """One multi per node ``lo..hi-1`` (status at its version, index entry moved); seconds."""
        client, names, versions = self.client, self.names, self.versions
        with timer() as tm:
            for i in range(lo, hi):
                start = perf_counter()
                tx = client.transaction()
                tx.set_data(self._status(names[i]), payload, version=versions[i])
                tx.delete(self._index(old, names[i]))
                tx.create(self._index(new, names[i]), b"")
                results = tx.commit()
                latencies.append(perf_counter() - start)
                if any(isinstance(r, Exception) for r in results):
                    raise RuntimeError(f"bench {PART}: raw multi on {names[i]} failed: {results!r}")
                versions[i] = results[0].version
        return tm.elapsed


def raw_moves_per_s(client, n: int) -> float:
    """The baseline alone: ``n`` fresh raw nodes under ``/raw``, each moved once by one multi.

    The same loop as the baseline side of the rounds above (``RawNodes.move``, first step);
    returns moves per second. Other parts call it to put their figures on the same scale.
    """
    raw = RawNodes(client, n)
    old, new = STEPS[0]
    payload = t.encode_json(t.job_status_record(new, old))
    gc.collect()
    return n / raw.move(0, n, old, new, payload, [])


def _locked_steps(store: QueueStore, jids: list[str]) -> None:
    """A worker's step: take the lock (re-reading the job), then succeed and drop the lock."""
    lock_rt = commit_rt = 0
    gc.collect()
    with timer() as tm:
        for jid in jids:
            before = store.stats["round_trips"]
            job = store.job_locks.lock_job(jid)
            if job is None:
                raise RuntimeError(f"bench {PART}: could not lock {jid}")
            middle = store.stats["round_trips"]
            store.moves.succeed_job(job)
            lock_rt += middle - before
            commit_rt += store.stats["round_trips"] - middle
    n = len(jids)
    emit(
        PART,
        event="locked_step",
        n=n,
        steps_per_s=round(n / tm.elapsed, 1),
        round_trips_per_step=(lock_rt + commit_rt) / n,
        lock_and_read_round_trips=lock_rt / n,
        commit_round_trips=commit_rt / n,
    )
