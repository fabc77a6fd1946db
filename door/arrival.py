"""What a batch of a profile that asks for approval carries when it arrives: the ``approval``
node of ``merritt_queue.core.approval``, with its pre-flight summary computed now, once.

The summary is ``batches.preflight.summarise``'s, reached only through ``summarise`` below
(imported when first needed: the door does not load the batches app's modules before the
apps are ready). A summariser that fails still lets the batch in, its summary then saying
why there is none (``{"unavailable": why}``). A summary never refuses a submission: the
operator who reads it decides.
"""

from __future__ import annotations

import logging

from batches.models import Profile
from door import manifest_door
from merritt_queue.core import approval as ap
from pipeline.submitted import Upload

log = logging.getLogger(__name__)

UNAVAILABLE = "unavailable"


def required(profile_name: str) -> bool:
    return Profile.objects.filter(name=profile_name, approval_required=True).exists()


def request(clean: dict, upload: Upload | None, *, manifest: bytes | None = None) -> dict | None:
    """The ``approval`` node for ``clean`` (a submission the door accepted), or None when its
    profile does not ask for approval. ``manifest``: the manifest's bytes as the door judged
    them (``manifest_door.judge``), read instead of fetching its link again."""
    profile = clean.get("profile", "")
    if not required(profile):
        return None
    return ap.node(profile, summary(clean, upload, manifest=manifest))


def summary(clean: dict, upload: Upload | None, *, manifest: bytes | None = None) -> dict:
    try:
        data = manifest if manifest is not None else _payload(clean, upload)
    except Exception as e:  # noqa: BLE001 - an unreadable payload is the summary's news
        return {UNAVAILABLE: f"the payload could not be read for the summary: {e}"}
    try:
        return summarise(
            data, profile=clean.get("profile", ""), collection=clean.get("collection", "")
        )
    except Exception as e:  # noqa: BLE001 - the batch is taken; the operator reads why
        log.warning("no pre-flight summary for a batch of %s", clean.get("profile"), exc_info=True)
        return {UNAVAILABLE: f"the pre-flight summary failed: {e}"}


def summarise(data: bytes, *, profile: str, collection: str = "") -> dict:
    """The one call of the summariser (tests replace this function)."""
    from batches.preflight import summarise as preflight

    return dict(preflight(data, profile=profile, collection=collection))


def _payload(clean: dict, upload: Upload | None) -> bytes:
    """The bytes the summary reads when the door judged no manifest (a caller in the process
    itself): an uploaded file's first bytes, or a linked manifest fetched now; nothing for a
    single linked file."""
    if upload is not None:
        return manifest_door._uploaded(upload)
    if manifest_door.fetches_a_manifest(clean):
        return manifest_door._linked(clean["payload_url"])
    return b""
