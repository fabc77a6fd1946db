"""The pre-flight summary assembled: the listing, its bytes, the HEAD sample, the matches
in the mirror and the forecast, as one JSON-ready dictionary (``VERSION`` 1; its keys are
described in docs/usage.md and stay as they are: a batch's approval keeps the summary)."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from batches.models import Profile

from . import matches
from .forecast import predicted_finish
from .listing import one_file, read
from .measure import sample

VERSION = 1
# The longest list a summary carries of each kind; ``counts`` has their full lengths.
LIST_LIMIT = 200


def summarise(
    data: bytes,
    *,
    profile: str,
    collection: str = "",
    exclude_bid: str = "",
    head_sample: int | None = None,
    single: dict | None = None,
) -> dict:
    """What submitting ``data`` (a manifest, or a single file's bytes) with ``profile``
    would do. ``collection``: the profile's unless given; ``exclude_bid``: the batch the
    summary is of, whose own jobs are not "in flight elsewhere"; ``head_sample``: how many
    URLs to ask by HEAD (``MQ_PREFLIGHT_HEAD_SAMPLE`` unless given); ``single``: a
    single-file submission's one row (``listing.one_file``) in place of ``data``, its URL
    asked as a manifest's. ``LookupError`` for an unknown profile; nothing else raises for
    what the data holds."""
    own = Profile.objects.filter(name=profile).values_list("collection", flat=True).first()
    if own is None:
        raise LookupError(f"no profile {profile!r}")
    collection = collection or own
    now = timezone.now()
    listing = read(data) if single is None else one_file(single)
    rows = listing.rows
    size = settings.MQ_PREFLIGHT_HEAD_SAMPLE if head_sample is None else head_sample
    heads = sample([r for r in rows if r.url], size, settings.MQ_PREFLIGHT_SECONDS)
    measured = [h["bytes"] for h in heads if h["bytes"] is not None]
    arks = matches.arks_of(rows, collection)
    found = {
        "duplicate_local_ids": matches.duplicate_local_ids(rows),
        "updates": matches.updates(rows, collection, arks),
        "in_flight": matches.in_flight(rows, collection, arks, exclude_bid),
    }
    own_size = listing.single_size
    return {
        "version": VERSION,
        "computed_at": now.isoformat(),
        "profile": profile,
        "collection": collection,
        "kind": listing.kind,
        "rows": 1 if own_size is not None else len(rows),
        "jobs": listing.jobs,
        "declared_bytes": own_size if own_size is not None else sum(r.file_size or 0 for r in rows),
        "rows_without_size": sum(1 for r in rows if r.file_size is None),
        "measured_bytes": own_size if own_size is not None else sum(measured),
        "measured_rows": 1 if own_size is not None else len(measured),
        "sample": heads,
        **{key: items[:LIST_LIMIT] for key, items in found.items()},
        "counts": {key: len(items) for key, items in found.items()},
        "predicted_finish": predicted_finish(listing.jobs, now, exclude_bid),
        "problems": listing.problems,
    }
