"""The end of Processing: whether a new version of an existing object waits for a person.

A version that deletes files, or replaces more than a share of the current version's bytes,
is held (``merritt_queue.core.review``) when the job's profile, or else the site
(``MQ_DESTRUCTIVE_REVIEW``), asks for it. The current version is the one the local inventory
recorded last, which every mode of storing records (``merritt-queue`` jobs too, when Merritt
is heard): a version stored but not yet recorded is not known here, so its update is compared
with the version before it; an approval of such a diff is refused, and Storing fails it under
the storage lock, once the object is at another version (``changed``). In Merritt's modes an
object this inventory does not hold, whose ARK the job did not mint, waits as unknown.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from batches.models import Profile
from merritt_queue.core import review, stepowners
from merritt_queue.core import tree as t
from merritt_queue.core.runner import Outcome
from merritt_queue.core.states import JobStatus
from merritt_queue.core.store import JobRecord
from merritt_queue.deposit import objectfiles
from merritt_queue.services import updatediff
from pipeline.services import Services


def enabled(profile: Profile) -> bool:
    if profile.review_destructive:
        return profile.review_destructive == "on"
    return bool(settings.MQ_DESTRUCTIVE_REVIEW)


def share(profile: Profile) -> float:
    if profile.review_replace_share is not None:
        return profile.review_replace_share
    return float(settings.MQ_DESTRUCTIVE_REPLACE_SHARE)


def hold(
    s: Services,
    job: JobRecord,
    profile: Profile,
    ark: str,
    mode: str,
    delete: list[str],
    data: dict,
    *,
    minted: bool = False,
) -> Outcome | None:
    """The move to Held of a destructive update, its diff in ``data``'s store node; None
    when it need not wait (review off, a new object, nothing destructive, or the same
    update approved already: a job resumed at Processing after its approval).

    ``minted``: this run minted the ARK, so an object our inventory does not hold is new.
    In Merritt's modes one it does not hold may still be in Merritt (its local id bound by
    Merritt's own ingest, or its ARK given): nothing here says what the update changes, so
    it waits for a person, saying so."""
    if not enabled(profile):
        return None
    current = s.inventory.current_version(ark)
    in_merritt = stepowners.of_job(job.configuration) in stepowners.MERRITT_MODES
    if current is None and (minted or not in_merritt):
        return None
    version, files = current if current is not None else (None, [])
    entries = objectfiles.object_files(s.job_dir(job.jid))
    diff = updatediff.diff(files, updatediff.entries_as_files(entries), mode, delete, version)
    why = updatediff.why_destructive(diff, share(profile)) if current else [UNKNOWN]
    if not why:
        return None
    diff["why"] = why
    diff["held_at"] = t.now()
    earlier = review.review_of(job)
    if earlier and earlier.get("decision") == review.APPROVED and _same(earlier, diff):
        data["store"][review.KEY] = earlier
        return None
    data["store"][review.KEY] = diff
    return Outcome.move(JobStatus.HELD, f"{review.WAITING}: {'; '.join(why)}", data=data)


UNKNOWN = (
    "current version unknown: the object may exist in Merritt but not in this inventory "
    "(its ARK was given or bound to a local id, not minted by this job), so what the update "
    "changes is not known"
)


def _same(earlier: dict, diff: dict) -> bool:
    keys = ("version", "mode", "totals", "files")
    return all(earlier.get(k) == diff.get(k) for k in keys)


def changed(job: JobRecord, current: int | None) -> str | None:
    """Why ``job``'s reviewed diff no longer describes its update, or None: the object's
    version now (``current``) is not the one the diff compared with, so an approval would
    store changes nobody saw (a file another job added since, deleted unseen)."""
    got = review.review_of(job)
    if not got or got.get("version") is None or got["version"] == current:
        return None
    return (
        f"the object changed since the review (it compared version {got['version']}, the "
        f"object is now at {current if current is not None else 'no known version'}): "
        "resume it from Processing to compare it again"
    )


def lapsed(job: JobRecord) -> str | None:
    """In ``merritt-queue`` mode Merritt's storage fetches the files through the links
    Processing signed, which lapse after ``MQ_CONTENT_URL_MAX_AGE``: an older review would
    be approved only for Storing to fail."""
    if stepowners.of_job(job.configuration) != stepowners.MERRITT_QUEUE:
        return None
    got = review.review_of(job) or {}
    held = t.parse_timestamp(got.get("held_at") or job.last_modified)
    max_age = settings.MQ_CONTENT_URL_MAX_AGE
    if held is None or (datetime.now(held.tzinfo) - held).total_seconds() <= max_age:
        return None
    return (
        f"the review is older than the content links Merritt's storage would fetch the files "
        f"through ({max_age} seconds, MQ_CONTENT_URL_MAX_AGE): resume it from Processing, "
        "which signs them anew and asks for a new decision"
    )
