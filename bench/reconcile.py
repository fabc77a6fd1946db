"""How fast a full reconcile rebuilds the Django mirror from a big ZooKeeper tree.

One process, one ZooKeeper (``ZK_HOSTS``), one fresh chroot, a temp SQLite file:

- set-up (timed, reported apart): ``BENCH_RECONCILE_JOBS`` jobs (default 100,000) in
  batches of 100, written with raw kazoo transactions of ``JOBS_PER_MULTI`` jobs, many in
  flight, node for node as the store writes them (``tree`` helpers): the job's nodes,
  its history node with an entry per step it took (its status node rewritten as often,
  so its version matches), its index entry and its batch reference; most jobs Completed
  with identifiers and metadata, the rest spread over the other states. The multis are
  made as they are sent (a million jobs' ops at once would weigh GBs), and the status and
  history nodes, the same for every job of a state, are made once.
- Django is set up on a temp SQLite database (``DATABASE_URL`` set before
  ``django.setup()``) and migrated.
- timed: ``full_reconcile`` into the empty mirror (every row and every job's timeline
  rebuilt from its history), then once more with nothing to change (the periodic safety
  net's cost).

The summary's ``jobs_per_s`` is the first, the target being at least 2,000 at any size;
``peak_rss_mb`` is the rebuild's own peak (VmHWM, restarted at the RSS just before it), which
must not grow with the number of jobs. A progress line every PROGRESS_SECONDS: a million
jobs take minutes.

A tree of 100,000 jobs is about 1,050,000 znodes, some 950 MB of ZooKeeper heap: more than
the 256 MB a test ZooKeeper gets, and enough to bring down a shared one. So the part
first estimates the heap the tree needs (with the znodes already there, from ``mntr``)
and refuses to start when it exceeds ``ZK_HEAP`` (default 256m), the heap
``scripts/services.sh`` gives its servers; ``make bench`` starts its own with 2g, and
``BENCH_RECONCILE_JOBS=1000000`` needs ``ZK_HEAP=16g`` (docs/benchmarks.md).
"""

from __future__ import annotations

import functools
import os
import resource
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from bench.common import emit, env_int, ran_in_own_process, summary, timer, zk_store
from merritt_queue.core import history as h
from merritt_queue.core import tree as t
from merritt_queue.core.states import JOB, BatchStatus, JobStatus, batch_dir_for
from merritt_queue.core.zkstats import znode_count

PART = "reconcile"
DEFAULT_JOBS = 100_000
JOBS_PER_BATCH = 100
JOBS_PER_MULTI = 50
IN_FLIGHT = 32
PROGRESS_SECONDS = 30.0
DROP_CHUNK = 500
SET = "set"
# Every 20 jobs: 14 Completed, the other six in the states a live queue holds.
MIX = [JobStatus.COMPLETED] * 14 + [
    JobStatus.PENDING,
    JobStatus.HELD,
    JobStatus.DOWNLOADING,
    JobStatus.STORING,
    JobStatus.NOTIFY,
    JobStatus.FAILED,
]
LAST_SUCCESSFUL = {
    JobStatus.COMPLETED: JobStatus.NOTIFY,
    JobStatus.DOWNLOADING: JobStatus.PROVISIONING,
    JobStatus.STORING: JobStatus.PROCESSING,
    JobStatus.NOTIFY: JobStatus.RECORDING,
    JobStatus.FAILED: JobStatus.PROVISIONING,
}


def run(args) -> None:
    if ran_in_own_process(PART, "bench.reconcile"):
        return
    n = env_int(PART, "BENCH_RECONCILE_JOBS", DEFAULT_JOBS)
    store, cleanup = zk_store(PART)
    try:
        with tempfile.TemporaryDirectory(prefix="mq-bench-reconcile-") as tmp:
            _bench(store, n, Path(tmp))
    finally:
        try:
            drop_tree(store.client)
        finally:
            cleanup()


def _bench(store, n: int, tmp: Path) -> None:
    emit(PART, event="config", jobs=n, jobs_per_batch=JOBS_PER_BATCH, zk=os.environ["ZK_HOSTS"])
    check_room(n)
    with timer() as build:
        batches = build_tree(store.client, n)
    emit(PART, event="tree", jobs=n, batches=batches, seconds=round(build.elapsed, 3), **_zk())
    _setup_django(tmp)
    from jobs.models import Job, JobEvent
    from mirror import facade as mirror

    before = _reset_peak_rss()
    with timer() as first:
        drift = mirror.full_reconcile(store, progress=_Progress())
    peak = _peak_rss_mb()
    added = drift.summary()["added"]
    assert drift.jobs == n and added == n + batches, drift.summary()
    events = sum(len(_path(MIX[i % len(MIX)])) for i in range(n))
    assert Job.objects.count() == n and JobEvent.objects.count() == events
    emit(PART, event="rebuild", peak_rss_mb=peak, rss_before_mb=before, **drift.summary())
    with timer() as again:
        unchanged = mirror.full_reconcile(store)
    summary_ = unchanged.summary()
    assert not summary_["added"] and not summary_["changed"] and not summary_["removed"]
    emit(PART, event="unchanged", peak_rss_mb=_peak_rss_mb(), **summary_)
    summary(
        PART,
        jobs_per_s=round(n / first.elapsed, 1),
        peak_rss_mb=peak,
        rss_before_mb=before,
        jobs=n,
        events=events,
        seconds=round(first.elapsed, 3),
        unchanged_jobs_per_s=round(n / again.elapsed, 1),
        build_seconds=round(build.elapsed, 3),
    )


class _Progress:
    """The rebuild's progress as a JSON line every PROGRESS_SECONDS: a million jobs take
    minutes."""

    def __init__(self):
        self.start = self.last = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last >= PROGRESS_SECONDS:
            self.last = now
            rate = done / (now - self.start)
            emit(
                PART,
                event="progress",
                done=done,
                total=total,
                per_s=round(rate, 1),
                rss_mb=_rss_mb("VmRSS"),
            )


def _rss_mb(field: str) -> float:
    """``field`` (VmRSS, VmHWM) of /proc/self/status, in MB; 0.0 where there is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


def _reset_peak_rss() -> float:
    """Start the peak (VmHWM) afresh at the RSS now, so it is the rebuild's own, not the
    tree's building; the RSS now."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:  # not Linux: the peak is the process's
        pass
    return _rss_mb("VmRSS")


def _peak_rss_mb() -> float:
    return _rss_mb("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _zk() -> dict:
    """The server's own figures after the build: its znodes and their data's bytes."""
    from merritt_queue.core.zkstats import four_letter

    wanted = {"zk_znode_count": "znodes", "zk_approximate_data_size": "data_bytes"}
    out = {}
    for line in four_letter(os.environ["ZK_HOSTS"].split(",")[0], "mntr", 5.0).splitlines():
        key, _, value = line.partition("\t")
        if key in wanted and value.strip().isdigit():
            out[wanted[key]] = int(value)
    return out


def _setup_django(tmp: Path) -> None:
    from django.apps import apps

    if apps.ready:
        raise SystemExit(f"bench {PART}: Django is already set up in this process; run alone")
    os.environ["DATABASE_URL"] = f"sqlite:///{tmp / 'db.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "merritt_queue.project.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


# --- the tree ---------------------------------------------------------------------------

ZNODES_PER_JOB = 10.5  # the job's nodes, index entry and batch reference (MIX-weighted)
# ZooKeeper 3.8's heap after a full GC, with this part's tree (its paths under a long
# chroot): some 9.5 KB a job, of which 2.4 KB the nodes' data (``mntr``), the rest a
# znode's own weight, its path and its name in its parent.
HEAP_BYTES_PER_ZNODE = 680
DATA_BYTES_PER_JOB = 2400  # all the job's nodes' data, MIX-weighted (mntr's data size)
HEAP_USABLE = 0.6  # of -Xmx: the rest is ZooKeeper's own, its request log and GC headroom


def check_room(n: int) -> None:
    """Refuse to build a tree the ZooKeeper's heap cannot hold (it would fail for everyone)."""
    heap = _heap_bytes(os.environ.get("ZK_HEAP", "256m"))
    existing = znode_count(os.environ["ZK_HOSTS"]) or 0
    needed = (existing + n * ZNODES_PER_JOB) * HEAP_BYTES_PER_ZNODE / HEAP_USABLE
    needed += n * DATA_BYTES_PER_JOB / HEAP_USABLE
    emit(
        PART, event="room", znodes_before=existing, heap_mb=heap >> 20, needed_mb=int(needed) >> 20
    )
    if needed > heap:
        raise SystemExit(
            f"bench {PART}: {n} jobs on top of {existing} znodes need about "
            f"{int(needed) >> 20} MB of ZooKeeper heap, and ZK_HEAP says the server has "
            f"{heap >> 20} MB. Run `make bench BENCH=reconcile` (a throw-away ZooKeeper with "
            "ZK_HEAP=1g), set BENCH_RECONCILE_JOBS lower, or set ZK_HEAP to your server's -Xmx."
        )


def _heap_bytes(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower()
    try:
        return int(float(text[:-1]) * units[text[-1]]) if text[-1:] in units else int(text)
    except ValueError:
        raise SystemExit(f"bench {PART}: ZK_HEAP={text!r} is not a heap size like 1g") from None


def build_tree(client, n: int) -> int:
    """Write ``n`` jobs in batches of JOBS_PER_BATCH; the number of batches."""
    for path in t.CONTAINERS:
        client.ensure_path(path)
    now = t.now()
    bids = [f"{t.BATCH_PREFIX}{i:010d}" for i in range(-(-n // JOBS_PER_BATCH))]
    _commit_all(client, (_batch_ops(bid, now) for bid in bids))
    _commit_all(client, _job_multis(n, bids, now))
    return len(bids)


def _job_multis(n: int, bids: list[str], now: str) -> Iterator[list]:
    """Each multi's ops, made as it is sent: a million jobs' ops at once would weigh GBs."""
    for start in range(0, n, JOBS_PER_MULTI):
        jobs = range(start, min(n, start + JOBS_PER_MULTI))
        yield [op for i in jobs for op in _job_ops(i, bids[i // JOBS_PER_BATCH], now)]


def drop_tree(client) -> None:
    """Delete everything under the chroot, deepest first, 500 deletes per multi.

    ``harness.zookeeper.delete_tree`` pipelines each level but still sends one delete
    request per node; here a multi deletes 500, IN_FLIGHT multis at once, and the tree is
    walked DROP_CHUNK nodes at a time (a whole tree's paths at once would weigh GBs).
    """
    from merritt_queue.core import multiread

    doomed: list[str] = []  # children before their parent; sent in order, applied in order

    def flush() -> None:
        _commit_all(client, (doomed[i : i + 500] for i in range(0, len(doomed), 500)), delete=True)
        doomed.clear()

    def drop(paths: list[str]) -> None:
        kids = multiread.read_many(client, [(multiread.CHILDREN, p) for p in paths])
        below = [
            f"{p.rstrip('/')}/{k}"
            for p, names in zip(paths, kids, strict=True)
            for k in names or []
        ]
        for i in range(0, len(below), DROP_CHUNK):
            drop(below[i : i + DROP_CHUNK])
        doomed.extend(p for p in paths if p != "/")
        if len(doomed) >= IN_FLIGHT * 500:
            flush()

    drop(["/"])
    flush()


def _commit_all(client, transactions: Iterable[list], *, delete: bool = False) -> None:
    """Commit each list of ops as one multi, IN_FLIGHT at a time; stop at the first refusal.

    An op is ``(path, data)`` to create, ``(path, data, SET)`` to set, or a path to delete
    (``delete=True``).
    """
    pending = []
    for ops in transactions:
        tx = client.transaction()
        for op in ops:
            if delete:
                tx.delete(op)
            elif len(op) == 3:
                tx.set_data(op[0], op[1])
            else:
                tx.create(*op)
        pending.append(tx.commit_async())
        if len(pending) >= IN_FLIGHT:
            _check(pending.pop(0).get())
    for result in pending:
        _check(result.get())


def _path(status: str) -> list[str]:
    """The statuses a job of ``status`` went through, from its creation."""
    if status in (JobStatus.PENDING, JobStatus.HELD):
        return [JobStatus.PENDING] if status == JobStatus.PENDING else [JobStatus.PENDING, status]
    last = JobStatus.PROVISIONING if status == JobStatus.FAILED else status
    path: list[str] = [JobStatus.PENDING]
    while path[-1] != last:
        path.append(JOB.success_of(path[-1]))
    return path + [JobStatus.FAILED] if status == JobStatus.FAILED else path


def _check(results: list) -> None:
    errors = [r for r in results if isinstance(r, Exception)]
    if errors:
        raise SystemExit(f"bench {PART}: building the tree failed: {errors[0]!r}")


def _batch_ops(bid: str, now: str) -> list[tuple[str, bytes]]:
    submission = {
        "profile": "bench_content",
        "collection": "bench",
        "submitter": "bench/merritt-queue",
        "type": "batch-manifest",
        "payload_url": f"https://example.org/{bid}.checkm",
        "batchID": f"bench-{bid}",
        "submitted": now,
    }
    status = t.batch_status_record(BatchStatus.PROCESSING, last_modified=now)
    ops = [
        (t.batch_path(bid), b""),
        (t.batch_node(bid, "submission"), t.encode_json(submission)),
        (t.batch_node(bid, "status"), t.encode_json(status)),
        (t.batch_states(bid), b""),
        (t.batch_uuid_path(f"bench-{bid}"), t.encode_str(bid)),
    ]
    dirs = sorted({batch_dir_for(s) for s in MIX})
    return ops + [(t.batch_job_dir(bid, d), b"") for d in dirs]


@functools.cache
def _status_nodes(status: JobStatus, now: str) -> tuple[bytes, bytes]:
    """The status and history nodes of a job of ``status``: the same for every such job
    (made once, they are most of the Python time the tree's building takes)."""
    record = t.job_status_record(status, LAST_SUCCESSFUL.get(status), 0, "", now)
    path, entries = _path(status), h.ABSENT
    for version, (before, after) in enumerate(zip(["", *path], path, strict=False)):
        by = "dispatcher bench:1" if version == 0 else "worker bench:2"
        entries, data = h.append(entries, h.Entry(version, before, after, now, "", 0, by))
    return t.encode_json(record), data


def _job_ops(i: int, bid: str, now: str) -> list[tuple[str, bytes] | tuple[str, bytes, str]]:
    jid = f"{t.JOB_PREFIX}{i:010d}"
    status = MIX[i % len(MIX)]
    configuration = {
        "profile": "bench_content",
        "collection": "bench",
        "submitter": "bench/merritt-queue",
        "batch_row": i % JOBS_PER_BATCH,
        "payload_url": f"https://example.org/content/{i}.pdf",
        "payload_type": "file",
        "filename": f"{i}.pdf",
        "digest_type": "md5",
        "digest_value": f"{i:032x}",
        "local_id": f"bench-{i}",
        "title": f"Bench object {i}",
    }
    path, encoded, data = _path(status), *_status_nodes(status, now)
    ops: list[tuple[str, bytes] | tuple[str, bytes, str]] = [
        (t.job_path(jid), b""),
        (t.job_node(jid, "bid"), t.encode_str(bid)),
        (t.job_node(jid, "priority"), t.encode_int(5)),
        (t.job_node(jid, "space_needed"), t.encode_int(0)),
        (t.job_node(jid, "configuration"), t.encode_json(configuration)),
        (t.job_node(jid, "status"), encoded),
        # One rewrite per step after the creation: the status version is the history's.
        *((t.job_node(jid, "status"), encoded, SET) for _ in path[1:]),
        (t.job_node(jid, h.NODE), data),
        (t.job_index(status, 5, jid), b""),
        (t.batch_job_ref(bid, status, jid), b""),
    ]
    if status == JobStatus.COMPLETED:
        ids = {"primary_id": f"ark:/99999/fk4bench{i}", "local_id": [f"bench-{i}"]}
        meta = {"erc_who": "Bench", "erc_what": f"Bench object {i}", "erc_when": "2026"}
        ops += [
            (t.job_node(jid, "identifiers"), t.encode_json(ids)),
            (t.job_node(jid, "metadata"), t.encode_json(meta)),
        ]
    return ops


if __name__ == "__main__":
    from types import SimpleNamespace

    run(SimpleNamespace())
