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
    single = None if manifest_door.fetches_a_manifest(clean) else one_file(clean, upload)
    try:
        data = b"" if single else manifest if manifest is not None else _payload(clean, upload)
    except Exception as e:  # noqa: BLE001 - an unreadable payload is the summary's news
        return {UNAVAILABLE: f"the payload could not be read for the summary: {e}"}
    try:
        return summarise(
            data,
            profile=clean.get("profile", ""),
            collection=clean.get("collection", ""),
            single=single,
        )
    except Exception as e:  # noqa: BLE001 - the batch is taken; the operator reads why
        log.warning("no pre-flight summary for a batch of %s", clean.get("profile"), exc_info=True)
        return {UNAVAILABLE: f"the pre-flight summary failed: {e}"}


def summarise(
    data: bytes, *, profile: str, collection: str = "", single: dict | None = None
) -> dict:
    """The one call of the summariser (tests replace this function)."""
    from batches.preflight import summarise as preflight

    return dict(preflight(data, profile=profile, collection=collection, single=single))


def one_file(clean: dict, upload: Upload | None) -> dict:
    """A single-file submission's one row, from the submission itself: its bytes are the
    payload, never a listing. An upload's size is the whole file's and it has no URL to ask;
    a linked file is asked by HEAD as a manifest's rows are."""
    return {
        "url": None if upload is not None else clean.get("payload_url"),
        "size": upload.size if upload is not None else None,
        "ark": clean.get("primary_id"),
        "local_id": clean.get("local_id"),
    }


def _payload(clean: dict, upload: Upload | None) -> bytes:
    """A manifest's bytes when the door judged none (a caller in the process itself): an
    uploaded one's first bytes, or a linked one fetched now."""
    if upload is not None:
        return manifest_door._uploaded(upload)
    return manifest_door._linked(clean["payload_url"])
