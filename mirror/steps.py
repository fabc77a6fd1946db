"""The job's ``steps`` node in the mirror (``jobs.models.JobSteps``): one row per job.

Written with the job's row by the write-through (a step's commit carries the node as
written, so nothing is read again), on its own for an abandoned attempt's record, and by
``reconcile --full`` from ZooKeeper for the jobs whose row is missing or behind.

Guarantee: an older read never replaces a newer one. A row is replaced only by a node read
at a later status version, or at the same one with a different last attempt (an abandoned
attempt's record, kept without a status write).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.utils import timezone
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from jobs.models import JobSteps
from merritt_queue.core import steprecord as sr
from merritt_queue.core import tree as t
from merritt_queue.core.store import JobRecord


def _last(record: sr.StepRecord) -> str:
    return str(record.attempts[-1].get("attempt") or "") if record.attempts else ""


def apply(items: Iterable[tuple[str, int, sr.StepRecord]], at=None) -> int:
    """Write ``(jid, status version, record)`` rows that are new or newer; how many."""
    wanted = {jid: (version, record) for jid, version, record in items}
    if not wanted:
        return 0
    at = at or timezone.now()
    rows = {
        jid: (version, last)
        for jid, version, last in JobSteps.objects.filter(jid__in=list(wanted)).values_list(
            "jid", "status_version", "last_attempt"
        )
    }
    write = []
    for jid, (version, record) in wanted.items():
        had = rows.get(jid)
        # The same record seen at a later status version is written too: a reconcile then
        # finds the row current and does not read the node again.
        if had is not None and (
            version < had[0] or (version == had[0] and had[1] == _last(record))
        ):
            continue
        write.append(
            JobSteps(
                jid=jid,
                record=record.as_json(),
                status_version=version,
                last_attempt=_last(record),
                damaged=record.damaged,
                read_at=at,
            )
        )
    JobSteps.objects.bulk_create(
        write,
        update_conflicts=True,
        unique_fields=["jid"],
        update_fields=["record", "status_version", "last_attempt", "damaged", "read_at"],
    )
    return len(write)


def apply_records(records: Iterable[JobRecord], at=None) -> int:
    """The rows of jobs whose record carries its ``steps`` node (a whole job's)."""
    return apply(
        ((r.jid, r.status_version, r.steps) for r in records if r.steps and r.steps.exists),
        at,
    )


def rebuild(client: KazooClient, records: list[JobRecord], at=None) -> int:
    """Read the ``steps`` node of the jobs whose row is missing or older than the record
    read (one pipelined round) and write them: a full reconcile's part."""
    known = dict(
        JobSteps.objects.filter(jid__in=[r.jid for r in records]).values_list(
            "jid", "status_version"
        )
    )
    stale = [r for r in records if known.get(r.jid, -2) < r.status_version]
    sent = {r.jid: client.get_async(t.job_node(r.jid, sr.NODE)) for r in stale}
    read = []
    for r in stale:
        try:
            data, _ = sent[r.jid].get()
        except NoNodeError:
            continue
        read.append((r.jid, r.status_version, sr.decode(data)))
    return apply(read, at)
