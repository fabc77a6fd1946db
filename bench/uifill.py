"""The UI benchmark's mirror: jobs, their batches and timelines, written in chunks.

A million jobs come with some eight million JobEvents: they are generated a few
thousand batches at a time and written straight to the database (``executemany`` on
SQLite, ``COPY`` on PostgreSQL), never held in memory all at once. ANALYZE runs after,
(VACUUM ANALYZE on PostgreSQL) as a deployment's maintenance would: the planner then knows
the tables' sizes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

JOBS_PER_BATCH = 100
BATCHES_PER_CHUNK = 200
SEED = 20261121

# Share of jobs per status: most are done, a tail is in flight, failed or held.
JOB_WEIGHTS = {
    "Completed": 74,
    "Failed": 7,
    "Pending": 5,
    "Held": 2,
    "Deleted": 2,
    "Estimating": 1,
    "Provisioning": 1,
    "Downloading": 2,
    "Processing": 2,
    "Storing": 2,
    "Recording": 1,
    "Notify": 1,
}
# Older jobs than the queue's capacity (MQ_MAX_QUEUE_JOBS's default: the tree holds no more
# jobs) have all finished, as in a deployment's mirror of a long history. A small mirror keeps
# a quarter of its jobs unfinished, so that the measured items (from its first third) are
# finished ones at every size and their pages make the same queries.
LIVE_WINDOW = 25_000
DONE_WEIGHTS = {"Completed": 74, "Failed": 7, "Deleted": 2}
BATCH_WEIGHTS = {
    "Completed": 80,
    "Processing": 8,
    "Failed": 5,
    "Pending": 2,
    "Held": 1,
    "Reporting": 1,
    "UpdateReporting": 1,
    "Deleted": 2,
}
BATCH_DONE_WEIGHTS = {"Completed": 80, "Failed": 5, "Deleted": 2}
# Messages of failed jobs: a few common ones, and some that name the job's own file.
MESSAGES = [
    "download failed: HTTP 404 Not Found",
    "download failed: connection timed out after 30 s",
    "digest mismatch: md5 expected {h} got {g}",
    "storage node 9501 refused the object: 503 Service Unavailable",
    "manifest line 3: 5 fields, expected 12",
    "minter: EZID answered 500 Internal Server Error",
    "inventory: object ark:/13030/m5{n} is locked by another job",
    "container is not a zip, tar or gzip file",
    "not enough disk space: 12 GB needed, 3 GB free",
    "callback https://example.org/hook failed: 502 Bad Gateway",
]
# The dashboard's cause of the digest message above (ui.signatures).
DIGEST_CAUSE = "digest mismatch: md5 expected <hex> got <hex>"
COLLECTIONS = [f"coll-{i:02d}" for i in range(40)]

JOB_COLUMNS = (
    "jid, bid, collection, profile, submitter, status, last_successful_status, retry_count, "
    "priority, space_needed, local_id, ark, title, message, signature, last_modified, "
    "configuration, locked, status_version, read_at"
).split(", ")
EVENT_COLUMNS = (
    "jid, bid, from_status, to_status, at, message, retry_count, actor, status_version, exact"
).split(", ")
BATCH_COLUMNS = (
    "bid, uuid, collection, profile, submitter, type, title, submitted, status, message, "
    "last_modified, submission, acquired, locked, job_counts, job_total, status_version, read_at"
).split(", ")


def _pick(rng: random.Random, weights: dict[str, int]) -> str:
    return rng.choices(list(weights), list(weights.values()))[0]


class Writer:
    """Rows into a table, the fastest way the backend has; ``stamp`` turns a datetime into
    what it takes."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.sqlite = connection.vendor == "sqlite"

    def stamp(self, value: datetime):
        if self.sqlite:  # Django keeps SQLite datetimes as naive UTC text
            return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ")
        return value

    def write(self, table: str, columns: list[str], rows: list[tuple]) -> None:
        if not rows:
            return
        names = ", ".join(columns)
        if self.sqlite:
            marks = ", ".join(["%s"] * len(columns))
            with self.connection.cursor() as cursor:
                cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)
            return
        self.connection.ensure_connection()
        with self.connection.connection.cursor() as cursor:
            with cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)

    @contextmanager
    def without_indexes(self, *tables: str) -> Iterator[None]:
        """Drop the tables' plain indexes for the writes and build them once after: one sort
        each instead of millions of scattered inserts. Indexes behind a constraint stay."""
        with self.connection.cursor() as cursor:
            if self.sqlite:
                marks = ", ".join(["%s"] * len(tables))
                cursor.execute(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT "
                    f"NULL AND tbl_name IN ({marks})",
                    tables,
                )
            else:
                cursor.execute(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) AND "
                    "indexname NOT IN (SELECT conname FROM pg_constraint)",
                    [list(tables)],
                )
            indexes = cursor.fetchall()
            for name, _ in indexes:
                cursor.execute(f'DROP INDEX "{name}"')
        yield
        with self.connection.cursor() as cursor:
            for _, sql in indexes:
                cursor.execute(sql)


def _sizes(rng: random.Random, n_jobs: int) -> list[int]:
    """Batch sizes, uneven, adding up to exactly ``n_jobs``."""
    n_batches = max(1, n_jobs // JOBS_PER_BATCH)
    sizes = [rng.randint(1, 2 * JOBS_PER_BATCH - 1) for _ in range(n_batches)]
    sizes[-1] += n_jobs - sum(sizes)
    while sizes[-1] < 1:
        sizes.pop()
        sizes[-1] += n_jobs - sum(sizes)
    return sizes


def fill(n_jobs: int) -> dict:
    """Fill the mirror with ``n_jobs`` jobs; returns ids the pages are measured with."""
    from django.contrib.auth.models import Group, User
    from django.db import connection, transaction
    from django.utils import timezone

    from batches.models import Batch, Collection
    from jobs.models import Job, JobEvent, JobSteps, MirrorState
    from ui.tables import DEFAULT_PER_PAGE

    rng = random.Random(SEED)
    now = timezone.now()
    writer = Writer(connection)
    ids: dict[str, str | int] = {"collection": COLLECTIONS[0]}
    running: list[str] = []
    with transaction.atomic():
        for model in (JobEvent, JobSteps, Job, Batch, Collection, MirrorState):
            model.objects.all().delete()
        tables = (Batch._meta.db_table, Job._meta.db_table, JobEvent._meta.db_table)
        with writer.without_indexes(*tables):
            _write(writer, rng, _sizes(rng, n_jobs), now, ids, running)
        Collection.objects.bulk_create(
            Collection(
                mnemonic=name,
                held=i % 13 == 5,
                held_by="admin:ann" if i % 13 == 5 else "",
                held_reason="storage migration" if i % 13 == 5 else "",
                held_at=now - timedelta(hours=i) if i % 13 == 5 else None,
                read_at=now,
            )
            for i, name in enumerate(COLLECTIONS)
        )
        MirrorState.objects.create(name="locks", at=now, detail=_locks(rng, now, running))
        MirrorState.objects.create(name="consistency", at=now, detail=_findings())
        User.objects.filter(username="bench").delete()
        bench = User.objects.create_user("bench", password="bench", is_staff=True)
        bench.groups.add(Group.objects.get_or_create(name="viewer")[0])  # a role: reads all
    with connection.cursor() as cursor:
        # PostgreSQL: VACUUM too, as autovacuum would in time: until then an index-only
        # scan still reads the heap of every freshly copied row.
        cursor.execute("ANALYZE" if writer.sqlite else "VACUUM ANALYZE")
    # The Pending job the dispatcher would take last: its place counts every job ahead.
    last = Job.objects.filter(status="Pending").order_by("-priority", "-jid").first()
    ids.setdefault("jid", f"jid{n_jobs:010d}")
    ids.setdefault("bid", "bid0000000001")
    ids["pending"] = last.jid if last else ids["jid"]
    # The list's last unfinished rows (the page a million-job list's 500th is): a page as deep
    # into the unfinished jobs at every size, and so as alike.
    ids["deep_page"] = max(1, min(500, min(LIVE_WINDOW, n_jobs // 4) // DEFAULT_PER_PAGE))
    return ids


def _write(writer: Writer, rng, sizes: list[int], now, ids: dict, running: list) -> None:
    """The batches, jobs and timelines, a chunk of batches at a time."""
    from batches.models import Batch
    from jobs.models import Job, JobEvent
    from merritt_queue.core.states import JOB_STEPS

    steps = ["Pending", *JOB_STEPS, "Completed"]
    coll_weights = [1 / (i + 1) for i in range(len(COLLECTIONS))]
    read_at = writer.stamp(now)
    third = sum(sizes) // 3
    live_from = sum(sizes) - min(LIVE_WINDOW, sum(sizes) // 4)
    jid = 0
    decade: list[str] = []  # the statuses of jobs jid..0 to jid..9 so far
    for first in range(0, len(sizes), BATCHES_PER_CHUNK):
        batches, jobs, events = [], [], []
        for b, size in enumerate(sizes[first : first + BATCHES_PER_CHUNK], start=first + 1):
            bid = f"bid{b:010d}"
            coll = rng.choices(COLLECTIONS, coll_weights)[0]
            submitted = now - timedelta(minutes=rng.randint(0, 7 * 24 * 60))
            counts: dict[str, int] = {}
            for _ in range(size):
                jid += 1
                status = _pick(rng, JOB_WEIGHTS if jid > live_from else DONE_WEIGHTS)
                counts[status] = counts.get(status, 0) + 1
                job, job_events, locked = _job(writer, rng, jid, bid, coll, status, now, steps)
                job = (*job, read_at)
                jobs.append(job)
                events += job_events
                if locked:
                    running.append(job[0])
                decade = [] if jid % 10 == 0 else decade
                decade.append(status)
                # The job measured: a Completed one whose nine neighbours (the jobs a search
                # for the start of its ARK finds) are Completed too, at every size.
                if decade == ["Completed"] * 10 and "jid" not in ids and jid >= third:
                    ids["jid"] = job[0]
            # The batch page measured: a Completed one at every size, so that its panels,
            # and so its queries, are alike.
            batch_status = _pick(rng, BATCH_WEIGHTS if jid > live_from else BATCH_DONE_WEIGHTS)
            if batch_status == "Completed" and "bid" not in ids and jid >= third:
                ids["bid"] = bid
            batches.append(
                (
                    bid,
                    f"uuid-{b}",
                    coll,
                    f"{coll}_content",
                    "bench/ann",
                    "manifest",
                    f"Bench batch {b}",
                    writer.stamp(submitted),
                    batch_status,
                    "",
                    writer.stamp(submitted + timedelta(minutes=5)),
                    json.dumps({"profile": f"{coll}_content", "submitter": "bench/ann"}),
                    True,
                    jid > live_from and rng.random() < 0.02,
                    json.dumps(counts),
                    size,
                    -1,
                    read_at,
                )
            )
        writer.write(Batch._meta.db_table, BATCH_COLUMNS, batches)
        writer.write(Job._meta.db_table, JOB_COLUMNS, jobs)
        writer.write(JobEvent._meta.db_table, EVENT_COLUMNS, events)


def _job(writer, rng, jid, bid, coll, status, now, steps):
    """A job's row (JOB_COLUMNS but ``read_at``), its timeline rows (EVENT_COLUMNS) and
    whether it is locked."""
    from ui.signatures import cause_of

    jid_s = f"jid{jid:010d}"
    # The statuses this job went through, in order, ending with its current one.
    if status in steps:
        path = steps[: steps.index(status) + 1]
        last_ok = path[-2] if len(path) > 1 else ""
    elif status == "Failed":
        failed_in = rng.choice(steps[:-1])
        path = [*steps[: steps.index(failed_in) + 1], "Failed"]
        last_ok = path[-3] if len(path) > 2 else ""
    elif status == "Held":
        path, last_ok = ["Pending", "Held"], "Pending"
    else:  # Deleted: held, then deleted
        path, last_ok = ["Pending", "Held", "Deleted"], "Pending"
    # Its last move: completions spread over the last week, most recent densest.
    minutes = int(rng.expovariate(1 / (36 * 60))) % (7 * 24 * 60)
    at = now - timedelta(minutes=minutes if status == "Completed" else rng.randint(0, 600))
    times = []
    for _ in path:
        times.append(at)
        at -= timedelta(seconds=rng.randint(5, 600))
    events = [
        [jid_s, bid, old, new, writer.stamp(when), "", 0, "worker", version, True]
        for version, (old, new, when) in enumerate(
            zip(["", *path], path, reversed(times), strict=False)
        )
    ]
    message = ""
    if status == "Failed":
        message = rng.choice(MESSAGES).format(
            h=f"{rng.getrandbits(64):016x}", g=f"{rng.getrandbits(64):016x}", n=jid
        )
        events[-1][5] = message
    # A few workers hold a job each; the rest of the in-flight jobs wait their turn.
    locked = status in steps[1:-1] and rng.random() < 0.002
    job = (
        jid_s,
        bid,
        coll,
        f"{coll}_content",
        "bench/ann",
        status,
        last_ok,
        0,
        rng.choice((5, 5, 5, 1, 9)),
        rng.randint(0, 10**9),
        f"local-{jid}",
        f"ark:/13030/m5{jid:07d}" if len(path) > 5 else "",
        f"Bench object {jid}",
        message,
        cause_of(message),
        events[-1][4],
        json.dumps(
            {
                "profile": f"{coll}_content",
                "submitter": "bench/ann",
                "payload_url": f"https://content.example.org/{coll}/{jid}.zip",
                "payload_type": "container",
                "local_id": f"local-{jid}",
            }
        ),
        locked,
        len(path) - 1,
    )
    return job, [tuple(e) for e in events], locked


def _locks(rng: random.Random, now, running: list[str]) -> dict:
    """MirrorState("locks").detail as mirror.locks_detail writes it."""

    def entry(path: str, kind: str, name: str, seconds: int, owner: str = "", data: str = ""):
        at = (now - timedelta(seconds=seconds)).isoformat()
        return {"path": path, "kind": kind, "name": name, "ctime": at, "owner": owner, "data": data}

    def session() -> str:
        return f"{rng.getrandbits(48):#x}"

    locks = [entry("/locks/queue/ingest", "queue", "ingest", 60)]
    for i in range(60):
        name = f"ark_13030_m5{i:07d}"
        locks.append(
            entry(
                f"/locks/storage/{name}", "storage", name, rng.randint(1, 7200), "", f"jid{i:010d}"
            )
        )
    for kind in ("inventory", "localid"):
        for i in range(20):
            name = f"item_{i}"
            locks.append(entry(f"/locks/{kind}/{name}", kind, name, rng.randint(1, 600), session()))
    for jid in running:
        locks.append(entry(f"/jobs/{jid}/lock", "job", jid, rng.randint(1, 300), session()))
    paused_at = (now - timedelta(seconds=60)).isoformat()
    return {"paused": True, "paused_at": paused_at, "locks": locks, "read_at": now.isoformat()}


def _findings() -> dict:
    findings: list[dict] = [
        {
            "kind": "missing-index" if i % 3 else "stale-lock",
            "path": f"/jobs/states/pending/05-jid{i:010d}",
            "reason": f"Job jid{i:010d} is Pending but has no index entry",
            "repair": f"create /jobs/states/pending/05-jid{i:010d}",
            "repaired": i % 2 == 0,
        }
        for i in range(200)
    ]
    repaired = sum(f["repaired"] for f in findings)
    return {
        "repair": False,
        "total": len(findings),
        "repaired": repaired,
        "unrepaired": len(findings) - repaired,
        "findings": findings,
    }
