"""Failed rows, round trip: a batch's failed jobs downloaded as the manifest the batch came in
(``deposit.failedrows``), corrected by a librarian and uploaded to patch the same batch.

1. ``failed_rows`` reads the batch and its Failed jobs from ZooKeeper and writes the manifest,
   its header the batch's own when the workers' copy is at hand, else the profile's standard.
2. ``plan`` judges an upload at the door exactly as a new submission's manifest
   (``check_manifest``, the batch row limit, the batch's kind), matches each row to a Failed
   job of the batch (``deposit.rowmatch``) and checks each job's new values as an edit's
   (``editdoor.door_problems``: URL policy, digest format); nothing is written.
3. ``apply`` takes the plan's changes as one ``job.edit_resume`` admin action: each job
   edited and resumed in one multi at the status version previewed (one that changed since
   is skipped and said), audited with the reason, once per confirmation token.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core import signing

from merritt_queue.core import jobparams, steprecord
from merritt_queue.core.errors import NotFound
from merritt_queue.core.planning import MANIFEST_KIND, type_to_pick
from merritt_queue.core.records import BatchRecord, JobRecord
from merritt_queue.core.store import QueueStore
from merritt_queue.deposit import failedrows, rowmatch
from merritt_queue.deposit.manifest import parse_findings
from merritt_queue.deposit.manifestcheck import check_manifest
from pipeline.capacity import batch_row_limit
from steering.actions.catalog import ACTIONS
from steering.actions.editdoor import door_problems
from steering.actions.execution import execute
from steering.actions.kinds import Target
from steering.models import AdminAction

ACTION = "job.edit_resume"
SALT = "steering.batchpatch"
MAX_AGE = 6 * 3600
# batch directory -> what a row naming one of its jobs is told
OTHER_STATUS = {
    "batch-processing": "still in progress",
    "batch-completed": "Completed",
    "batch-deleted": "Deleted",
}


class PatchRefused(Exception):
    """The whole upload or download is refused; nothing was written."""

    def __init__(self, problems: list[str], status: int = 400):
        super().__init__("\n".join(problems))
        self.problems = problems
        self.status = status


@dataclass(frozen=True)
class Change:
    line: int
    job: JobRecord
    changes: dict[str, tuple[str, str]]
    step: str


@dataclass
class Plan:
    bid: str
    changes: list[Change] = field(default_factory=list)
    refused: list[rowmatch.RowRefused] = field(default_factory=list)
    unchanged: list[tuple[int, str]] = field(default_factory=list)
    untouched: list[str] = field(default_factory=list)

    def params(self) -> dict:
        """What the confirmation signs and the audit keeps."""
        return {
            "batch": self.bid,
            "each": {
                c.job.jid: {n: list(pair) for n, pair in c.changes.items()} for c in self.changes
            },
            "lines": {c.job.jid: c.line for c in self.changes},
            "steps": {c.job.jid: c.step for c in self.changes},
            "refused": [[r.line, r.jid, r.why] for r in self.refused],
            "unchanged": [list(u) for u in self.unchanged],
            "untouched": self.untouched,
        }

    def items(self) -> list[list]:
        return [[c.job.jid, c.job.status_version] for c in self.changes]


def batch_of(store: QueueStore, bid: str) -> BatchRecord:
    """The batch, if it came as a manifest of rows; ``PatchRefused`` otherwise."""
    try:
        batch = store.batches.get_batch(bid)
    except NotFound:
        raise PatchRefused([f"no batch {bid}"], 404) from None
    kind = (batch.submission or {}).get("type")
    if kind not in MANIFEST_KIND or kind == "object-manifest":
        raise PatchRefused(
            [
                f"batch {bid} is of type {kind or 'unknown'}: it has no rows (only a batch "
                "manifest of files, containers or manifests has)"
            ],
            409,
        )
    return batch


def jobs_of(store: QueueStore, bid: str) -> tuple[list[JobRecord], dict[str, str]]:
    """The batch's Failed jobs, read whole, and its other jobs' states."""
    groups = store.batches.batch_jobs(bid)
    failed = [store.jobs.get_job(jid) for jid in groups.get("batch-failed", [])]
    others = {
        jid: OTHER_STATUS[d] for d, jids in groups.items() if d in OTHER_STATUS for jid in jids
    }
    return [j for j in failed if j.status == "Failed"], others


def header(batch: BatchRecord) -> failedrows.Header:
    """The batch manifest's own header when the workers' copy of it is here, else the
    standard one of the batch's type."""
    kind = (batch.submission or {})["type"]
    kept = Path(settings.MQ_WORK_DIR) / "batches" / batch.bid / "manifest.checkm"
    try:
        text = kept.read_bytes()[: settings.MQ_MAX_MANIFEST_BYTES].decode("utf-8", "replace")
    except OSError:
        return failedrows.standard_header(kind)
    return failedrows.header_of(text, kind)


def failed_rows(store: QueueStore, bid: str, *, scrubbed: bool = False) -> str:
    """The checkm manifest of the batch's failed jobs; ``scrubbed``: for a depositor, whose
    view of an error hides the addresses in it, as their view of a step does."""
    batch = batch_of(store, bid)
    failed, _ = jobs_of(store, bid)
    jobs = [
        failedrows.FailedJob(
            j.jid,
            j.last_successful_status,
            steprecord.scrub(j.message) if scrubbed else j.message,
            j.configuration,
            j.identifiers,
            j.metadata,
        )
        for j in failed
    ]
    return failedrows.write(header(batch), jobs)


def plan(store: QueueStore, bid: str, data: bytes, scope: set[str] | None) -> Plan:
    """The upload judged and matched; ``PatchRefused`` when the manifest itself is refused."""
    batch = batch_of(store, bid)
    collection = store.holds.item_collection(batch.submission)
    if scope is not None and collection not in scope:
        raise PatchRefused([f"batch {bid} is not of a collection you may act on"], 403)
    limit = settings.MQ_MAX_MANIFEST_BYTES
    report = check_manifest(data, max_bytes=limit, max_batch_rows=batch_row_limit())
    problems = [_finding(f) for f in report.errors]
    kind = batch.submission["type"] if batch.submission else ""
    if not problems and (pick := type_to_pick(kind, report.kind)):
        problems.append(f"batch {bid} is of type {kind}: {pick}")
    if problems:
        raise PatchRefused(problems)
    manifest, _ = parse_findings(data, max_bytes=limit, max_batch_rows=batch_row_limit())
    assert manifest is not None  # check_manifest found no error in the same bytes
    text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    failed, others = jobs_of(store, bid)
    matched, refused = rowmatch.match(manifest, text, bid, failed, others)
    result = Plan(bid, refused=refused)
    for m in matched:
        _judge(store, m, scope, result)
    named = {c.job.jid for c in result.changes} | {jid for _, jid in result.unchanged}
    named |= {r.jid for r in refused}
    result.untouched = [j.jid for j in failed if j.jid not in named]
    return result


def _judge(store: QueueStore, m: rowmatch.Matched, scope, result: Plan) -> None:
    job = m.job
    target = Target(
        job.jid,
        job.status,
        job.status_version,
        store.holds.item_collection(job.configuration),
        job.locked,
    )
    if why := ACTIONS[ACTION].check(target, scope):
        result.refused.append(rowmatch.RowRefused(m.line, job.jid, why))
        return
    after = dict(m.after)
    if problems := door_problems(job, after):
        words = "; ".join(
            f"{jobparams.LABELS[name]}: {message}"
            for name, messages in problems.items()
            for message in messages
        )
        result.refused.append(rowmatch.RowRefused(m.line, job.jid, words))
        return
    before = jobparams.current(job.configuration, job.identifiers, job.metadata)
    changes = jobparams.changes_of(before, after)
    if not changes:
        result.unchanged.append((m.line, job.jid))
        return
    step = jobparams.default_step(job.last_successful_status, list(changes))
    result.changes.append(Change(m.line, job, changes, step))


def _finding(f) -> str:
    where = ", ".join(str(p) for p in (f.line and f"line {f.line}", f.field) if p)
    return f"{where}: {f.message}" if where else f.message


def sign(user, plan: Plan) -> str:
    """The confirmation of ``plan`` for ``user``: what they were shown, and a token that acts
    once."""
    data = {
        "user": user.pk,
        "bid": plan.bid,
        "items": plan.items(),
        "params": plan.params(),
        "token": uuid.uuid4().hex,
    }
    return signing.dumps(data, salt=SALT, compress=True)


def read(user, payload: str, bid: str) -> dict:
    """The confirmation signed for ``user`` and batch ``bid``; ``PatchRefused`` otherwise."""
    try:
        data = signing.loads(payload, salt=SALT, max_age=MAX_AGE)
    except signing.SignatureExpired:
        raise PatchRefused(["this preview is too old: upload the corrections again"]) from None
    except signing.BadSignature:
        raise PatchRefused(["the confirmation was altered or is not valid"]) from None
    if data.get("user") != user.pk or data.get("bid") != bid:
        raise PatchRefused(["this confirmation was made for another person or batch"])
    return data


def apply(user, data: dict, reason: str) -> AdminAction:
    """The signed plan ``data`` taken as one audited ``job.edit_resume`` action; a token
    confirmed twice acts once."""
    if not reason.strip():
        raise PatchRefused(["a reason is required"])
    if not data["items"]:
        raise PatchRefused(["the corrections change no job: nothing to confirm"])
    return execute(
        user,
        ACTIONS[ACTION],
        [(jid, version) for jid, version in data["items"]],
        reason,
        token=data["token"],
        params=data["params"],
        selection=f"corrected rows of batch {data['bid']}",
    )
