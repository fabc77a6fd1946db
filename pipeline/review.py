"""The end of Processing: whether a new version of an existing object waits for a person.

A version that deletes files, or replaces more than a share of the current version's bytes,
is held (``merritt_queue.core.review``) when the job's profile, or else the site
(``MQ_DESTRUCTIVE_REVIEW``), asks for it. The current version is the one the local inventory
recorded last, which every mode of storing records (``merritt-queue`` jobs too, when Merritt
is heard): a version stored but not yet recorded is not known here, so its update is compared
with the version before it.
"""

from __future__ import annotations

from django.conf import settings

from batches.models import Profile
from merritt_queue.core import review
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
) -> Outcome | None:
    """The move to Held of a destructive update, its diff in ``data``'s store node; None
    when it need not wait (review off, a new object, nothing destructive, or the same
    update approved already: a job resumed at Processing after its approval)."""
    if not enabled(profile):
        return None
    current = s.inventory.current_version(ark)
    if current is None:
        return None
    version, files = current
    entries = objectfiles.object_files(s.job_dir(job.jid))
    diff = updatediff.diff(files, updatediff.entries_as_files(entries), mode, delete, version)
    why = updatediff.why_destructive(diff, share(profile))
    if not why:
        return None
    diff["why"] = why
    earlier = review.review_of(job)
    if earlier and earlier.get("decision") == review.APPROVED and _same(earlier, diff):
        data["store"][review.KEY] = earlier
        return None
    data["store"][review.KEY] = diff
    return Outcome.move(JobStatus.HELD, f"{review.WAITING}: {'; '.join(why)}", data=data)


def _same(earlier: dict, diff: dict) -> bool:
    keys = ("version", "mode", "totals", "files")
    return all(earlier.get(k) == diff.get(k) for k in keys)
