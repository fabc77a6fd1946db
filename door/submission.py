"""Submitting a batch: the one service behind the API, the web form and ``manage.py submit``.

Guarantees: a request with any problem writes nothing and lists every problem;
a valid one is written to ZooKeeper as one Pending batch and its id returned
at once; the same ``batchID`` again, by the same submitter to the same collection, returns
the existing batch, flagged as a duplicate, and creates nothing; anyone else gets one 409
that names no submitter and no collection.

Identity: the API and the web form pass the authenticated user as ``by``; the submitter is
then that user, unless an administrator names another person in ``on_behalf_of`` (both are
recorded: ``submitter`` and ``submitted_by``), and the user's rights are checked
(door.rights). Without ``by`` the caller is trusted (``manage.py submit``, tests) and
names the submitter itself.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import django_rq
from django.conf import settings
from django.contrib.auth import get_user_model

from batches.models import Profile
from door import arrival, manifest_door, rights
from door.manifest_check_api import too_often
from merritt_queue.core import handover, stepowners, tree
from merritt_queue.core.history import submission_actor
from merritt_queue.core.planning import SINGLE_TYPES, SUBMISSION_TYPES
from merritt_queue.core.sides import CREATED_BY, CREATED_BY_KEY, NONE
from merritt_queue.deposit import fields
from merritt_queue.deposit.fields import (
    digest_problems,
    field_problems,
    name_problem,
    url_problems,
)
from merritt_queue.deposit.uploads import uploads_root
from merritt_queue.project.runtime import get_store
from merritt_queue.project.tasks import TASKS
from notifications import subscribe
from pipeline import capacity
from pipeline.objects import ark_problem, change_refusal
from pipeline.submitted import SubmissionError, Upload

# What a submission may hold: the deposit's own fields and a subscription's.
TEXT_FIELDS = {**fields.TEXT_FIELDS, **subscribe.FIELDS}

REQUIRED = ("profile", "submitter", "type")
_BATCH_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$")
_SAFE_NAME_RE = re.compile(r"[^A-Za-z0-9._-]+")


READ_ONLY_PROBLEM = (
    "the queue is read-only at the moment (set by the site's administrators): "
    "nothing can be submitted"
)
NO_WORKERS_PROBLEM = (
    "this queue runs no ingest workers (MQ_WORKERS=none): nothing would ingest a new "
    "submission here. Submit through Merritt's own ingest, or ask the administrators."
)


@dataclass(frozen=True)
class SubmitResult:
    bid: str
    duplicate: bool
    batch_uuid: str | None
    # The named webhook's subscription id and signing secret, given in this answer only.
    webhook: dict | None = None
    # A duplicate's batch as it is now: its status, and whether ``rerun`` would run it again.
    status: str | None = None
    rerunnable: bool = False
    # Created Held until an operator approves it (its profile asks for approval).
    awaiting_approval: bool = False


def submit(
    data: object, upload: Upload | None = None, *, by=None, via: str | None = None
) -> SubmitResult:
    """Validate ``data`` (and ``upload``), then write the batch; raises SubmissionError.

    ``by`` is the authenticated user (API, form); ``via`` names a trusted caller for the
    audit (``manage.py submit``) when there is no user. ``rerun`` in ``data`` asks for a new
    batch when the batchID names a Completed one (``_rerun``).
    """
    data, rerun = rerun_asked(data)
    clean = prepare(data, upload, by=by, via=via)
    capacity.check_submission(clean, upload)
    # The manifest as judged: the approval's summary reads it, a link is not fetched twice.
    manifest = judge_manifest(clean, upload, by) if by is not None or via else None
    store = get_store()
    # The writer's name for this request only: one store serves every thread of the process.
    who = submission_actor(clean.get("submitted_by") or clean.get("submitter") or "")
    wishes = subscribe.take(clean)
    with store.changes.acting_as(who):
        result = _create(store, clean, by, upload, rerun=rerun, manifest=manifest)
    if not result.duplicate:
        made = subscribe.subscribe(result.bid, clean, wishes)
        if settings.MQ_HANDOVER and not result.awaiting_approval:  # a first run and a rerun
            handover.new_batch(store, django_rq.get_connection("default"), TASKS, result.bid)
        result = replace(result, webhook=subscribe.webhook_credentials(made))
    return result


def prepare(
    data: object,
    upload: Upload | None = None,
    *,
    by=None,
    via: str | None = None,
    mind_workers: bool = True,
) -> dict:
    """Every check of the door but the queue's room (which asks ZooKeeper): the submission
    as it would be written, or SubmissionError. ``submit`` and ``submit --dry-run`` both
    judge by it; the dry run passes ``mind_workers=False`` to judge the submission itself
    when the worker mode alone refuses it (``workers_problem``)."""
    if settings.READ_ONLY:
        raise SubmissionError([READ_ONLY_PROBLEM], status=503)
    if mind_workers and (problem := workers_problem()):
        raise SubmissionError([problem], status=503)
    if by is not None:
        data, problems = _as_user(data, by)
        if problems:
            raise SubmissionError(problems, status=403)
    elif isinstance(data, Mapping) and data.get("on_behalf_of"):
        raise SubmissionError(
            ["on_behalf_of is for a signed-in administrator; a trusted caller names the submitter"]
        )
    clean, problems = validate(data, upload)
    if by is not None and not problems:
        if refusal := rights.behalf_refusal(by, clean["submitter"], clean.get("collection")):
            raise SubmissionError([refusal], status=403)
    if problems:
        raise SubmissionError(problems)
    _check_object(clean)
    if by is not None:
        clean["submitted_by"] = by.get_username()
    elif via:
        clean["submitted_by"] = via
    return clean


def judge_manifest(clean: dict, upload: Upload | None, by=None) -> bytes | None:
    """A person's door (the form, the API, ``manage.py submit``) refuses a manifest the check
    page refuses (``door.manifest_door``); a caller in the process itself (the demo, tests)
    leaves it to the batch handler, as Merritt's ingest does. A linked manifest is a check
    that holds a web worker while it is fetched: it counts against ``by``'s manifest checks.
    Answers the manifest's bytes as judged (None for a type that is no manifest)."""
    if by is not None and upload is None and manifest_door.fetches_a_manifest(clean):
        if limited := too_often(by):
            raise SubmissionError([limited[0]], status=429, retry_after=limited[1])
    return manifest_door.judge(clean, upload)


def workers_problem() -> str | None:
    """Why the deployment's worker mode refuses every submission, the web door's words."""
    return NO_WORKERS_PROBLEM if settings.MQ_WORKERS == NONE else None


RERUN_VALUES = {True: True, False: False, "true": True, "false": False, "1": True, "0": False}
RERUN_VALUES |= {"on": True, "": False}


def rerun_asked(data: object) -> tuple[object, bool]:
    """``data`` without ``rerun``, and whether it asks for one (true/false, 1/0, a checkbox's
    on); anything else is refused."""
    if not isinstance(data, Mapping) or "rerun" not in data:
        return data, False
    value = data["rerun"]
    asked = RERUN_VALUES.get(value.lower() if isinstance(value, str) else value)
    if asked is None:
        raise SubmissionError([f"rerun must be true or false, not {value!r}"])
    return {k: v for k, v in data.items() if k != "rerun"}, asked


def _create(
    store, clean: dict, by, upload, *, rerun: bool = False, manifest: bytes | None = None
) -> SubmitResult:
    """The batch made in ZooKeeper, or the one this batchID already names."""
    if clean.get("batchID"):
        existing = store.batches.find_batch_by_uuid(clean["batchID"])
        if existing:
            _check_owner(store, existing, clean, by)
            if rerun:
                return _rerun(store, clean, upload, existing, manifest)
            return _duplicate(store.batches.get_batch(existing))
    saved = _save_upload(upload, clean) if upload else None
    # Marked, and created with ``states``: MerrittZK never takes it, our ``own`` workers do.
    clean[CREATED_BY_KEY] = CREATED_BY
    try:
        approval = arrival.request(clean, upload, manifest=manifest)
        created = store.new_batches.create_batch(clean, reserved=True, approval=approval)
    except Exception:
        _remove_upload(saved)
        raise
    if created.duplicate:
        _remove_upload(saved)
        _check_owner(store, created.id, clean, by)
    awaiting = approval is not None and not created.duplicate
    return SubmitResult(
        created.id, created.duplicate, clean.get("batchID"), awaiting_approval=awaiting
    )


# The last run of a batchID a depositor may run again: done, well or not.
RERUNNABLE = ("Completed", "Failed")


def _duplicate(last) -> SubmitResult:
    """The answer naming ``last``, the batchID's latest run, as the duplicate."""
    return SubmitResult(
        last.bid, True, last.uuid, status=last.status, rerunnable=last.status in RERUNNABLE
    )


def _rerun(store, clean: dict, upload, first: str, manifest: bytes | None = None) -> SubmitResult:
    """A new batch for a batchID whose last run is Completed or Failed (``RERUNNABLE``), under
    ``<batchID>~rerun-<n>`` (``core.rerun``): this submission, the corrected manifest of a
    failed run for one; the batchID's own ``/batch-uuids`` entry keeps naming its first
    batch. A last run still at work is returned as the duplicate, as without ``rerun``: a
    request sent twice makes one new batch. A profile that asks for approval holds the
    re-run for an operator, as it holds a first run."""
    uuid = clean["batchID"]
    _, latest = store.new_batches.latest_rerun(uuid)
    last = store.batches.get_batch(latest or first)
    if last.status not in RERUNNABLE:
        return _duplicate(last)
    saved = _save_upload(upload, clean) if upload else None
    clean[CREATED_BY_KEY] = CREATED_BY
    try:
        # A depositor's new manifest is as unread by a person as a first run's: it waits too.
        approval = arrival.request(clean, upload, manifest=manifest)
        created = store.new_batches.create_rerun_batch(
            uuid, clean | {"rerun_of": last.bid}, approval=approval
        )
    except Exception:
        _remove_upload(saved)
        raise
    return SubmitResult(
        created.id,
        False,
        store.batches.get_batch(created.id).uuid,
        awaiting_approval=approval is not None,
    )


def _check_object(clean: dict) -> None:
    """A single-object submission naming an ARK may change only its own collection's object
    (pipeline.objects); a batch manifest's rows are checked at Processing, where they are read."""
    ark = clean.get("primary_id")
    if not ark or clean.get("type") not in SINGLE_TYPES:
        return
    profile = Profile.objects.filter(name=clean["profile"]).first()
    if refusal := change_refusal(clean["collection"], ark, profile):
        raise SubmissionError([refusal], status=403 if refusal.other_collection else 400)


def _check_owner(store, bid: str, clean: dict, by) -> None:
    """A batchID names one submitter's batch in one collection: anyone else, and the same
    submitter in another collection, gets one refusal that names no one (batchIDs are one
    namespace in ZooKeeper, ``/batch-uuids``, shared with Merritt's ingest)."""
    if by is None:
        return
    first = store.batches.get_batch(bid).submission
    if (first.get("submitter"), first.get("collection")) != (
        clean["submitter"],
        clean.get("collection"),
    ):
        raise SubmissionError([taken_batch_id(clean["batchID"])], status=409)


def taken_batch_id(batch_id: str) -> str:
    """The one answer for a batchID another batch holds: whose it is stays unsaid."""
    return f"batchID {batch_id!r} is not available; choose another"


# Room for the form's text fields beside an upload of the largest accepted size.
FORM_OVERHEAD = 1024 * 1024


def request_size_problem(content_length: int) -> str | None:
    """Why a form body of this many bytes is refused unread (an upload over the limit)."""
    limit = settings.MQ_MAX_UPLOAD_BYTES
    if content_length > limit + FORM_OVERHEAD:
        return (
            f"the request body is {content_length} bytes; uploads are limited to {limit} "
            "bytes (MQ_MAX_UPLOAD_BYTES)"
        )
    return None


def _as_user(data: object, by) -> tuple[object, list[str]]:
    """``data`` with the submitter set from the authenticated ``by``; problems if spoofed."""
    if not isinstance(data, Mapping):
        return data, []
    if refusal := rights.submit_refusal(by, None):
        return data, [refusal]
    name = by.get_username()
    claimed = data.get("submitter")
    behalf = data.get("on_behalf_of")
    if not isinstance(claimed, str | None) or not isinstance(behalf, str | None):
        return data, []  # validate() names the field that is not a string
    data = {k: v for k, v in data.items() if k not in ("submitter", "on_behalf_of")}
    claimed, behalf = (claimed or "").strip(), (behalf or "").strip()
    if claimed and behalf and claimed != behalf:
        return data, ["submitter and on_behalf_of name different people; give on_behalf_of only"]
    person = behalf or claimed or name
    if person == name:
        return data | {"submitter": name}, []
    if not rights.is_administrator(rights.current(by)):
        return data, [
            f"{name} may submit only as themselves, not as {person!r}: only an administrator "
            "may submit on someone's behalf (on_behalf_of)"
        ]
    if not get_user_model().objects.filter(username=person, is_active=True).exists():
        return data, [f"on_behalf_of names {person!r}, who is not an active user"]
    return data | {"submitter": person}, []


def validate(data: object, upload: Upload | None) -> tuple[dict, list[str]]:
    if not isinstance(data, Mapping):
        return {}, ["the request body must be an object of fields"]
    problems = field_problems(data, TEXT_FIELDS)
    clean = {
        k: data[k].strip() for k in TEXT_FIELDS if isinstance(data.get(k), str) and data[k].strip()
    }
    problems += [f"{k} is required" for k in REQUIRED if k not in clean]
    profile = _profile(clean, problems)
    problems += _type_problems(clean)
    problems += _payload_problems(clean, upload)
    problems += digest_problems(clean)
    problems += _other_problems(clean)
    problems += subscribe.problems(clean)
    if profile and clean.get("local_id") and (refusal := profile.local_ids_refusal()):
        problems.append(refusal)
    if profile and profile.store_record_mode in stepowners.MERRITT_MODES:
        problems += _merritt_problems(profile)
    if profile and not problems:
        clean |= {
            "collection": profile.collection,
            "notification": profile.emails,
            "submission_mode": clean.get("submission_mode", "add"),
            "submitted": tree.now(),
            stepowners.KEY: profile.store_record_mode,
        }
    return clean, problems


def _merritt_problems(profile: Profile) -> list[str]:
    """What keeps Merritt's storage from storing this profile's objects, said before a
    job reaches it: a job handed over with these would only be failed there."""
    problems = []
    if node_problem := stepowners.storage_node_problem(profile.storage_node):
        problems.append(f"profile {profile.name!r}: {node_problem}; ask an administrator")
    base_problem = stepowners.content_base_problem(settings.MQ_CONTENT_BASE_URL)
    # merritt-api's storage may still fetch from the unsigned MERRITT_STORAGE_FILE_URL.
    unsigned = profile.store_record_mode == stepowners.MERRITT_API and bool(
        settings.MERRITT_STORAGE_FILE_URL
    )
    if base_problem and not unsigned:
        problems.append(f"{base_problem}; ask an administrator (docs/merritt.md)")
    if profile.store_record_mode == stepowners.MERRITT_QUEUE and not settings.MERRITT_STORAGE_URL:
        problems.append(
            "MERRITT_STORAGE_URL is not set, so Merritt inventory could not be told where "
            "storage keeps the object; ask an administrator (docs/merritt.md)"
        )
    return problems


def _profile(clean: dict, problems: list[str]) -> Profile | None:
    name = clean.get("profile")
    if not name:
        return None
    profile = Profile.objects.filter(name=name).first()
    if profile is None:
        problems.append(f"profile {name!r} does not exist")
    return profile


def _type_problems(clean: dict) -> list[str]:
    kind = clean.get("type")
    if kind and kind not in SUBMISSION_TYPES:
        return [f"type {kind!r} is not one of {', '.join(SUBMISSION_TYPES)}"]
    return []


def _payload_problems(clean: dict, upload: Upload | None) -> list[str]:
    url = clean.get("payload_url")
    if url and upload:
        return ["give either payload_url or an uploaded file, not both"]
    if not url and not upload:
        return ["payload_url or an uploaded file is required"]
    if upload:
        if problem := name_problem(upload.name):
            return [f"the uploaded file's name: {problem}"]
        limit = settings.MQ_MAX_UPLOAD_BYTES
        if upload.size > limit:
            return [
                f"the uploaded file is {upload.size} bytes, over the limit of {limit} bytes "
                "(MQ_MAX_UPLOAD_BYTES)"
            ]
        return []
    assert url is not None
    return url_problems(url)


def _other_problems(clean: dict) -> list[str]:
    problems = []
    if clean.get("submission_mode", "add") not in ("add", "update"):
        problems.append("submission_mode must be add or update")
    if "primary_id" in clean:
        if problem := ark_problem(clean["primary_id"]):
            problems.append(problem)
        elif clean.get("type") not in (None, *SINGLE_TYPES):
            problems.append(
                "primary_id names the one object of a file, container or object-manifest "
                "submission; a batch manifest gives each row's own (mrt:primaryIdentifier)"
            )
    if "batchID" in clean and not _BATCH_ID_RE.match(clean["batchID"]):
        problems.append("batchID may hold letters, digits, '.', '_', ':' and '-' (at most 100)")
    return problems


def safe_upload_name(name: str) -> str:
    """An upload's name as it is saved: its last part, of safe characters only."""
    return _SAFE_NAME_RE.sub("_", Path(name).name).strip("._") or "payload"


def _save_upload(upload: Upload, clean: dict) -> Path:
    name = safe_upload_name(upload.name)
    target = uploads_root(settings.MQ_WORK_DIR) / uuid.uuid4().hex / name
    target.parent.mkdir(parents=True)
    with target.open("wb") as out:
        shutil.copyfileobj(upload.file, out, 1 << 20)
    clean["payload_url"] = target.as_uri()
    clean.setdefault("filename", name)
    return target


def _remove_upload(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path.parent, ignore_errors=True)
