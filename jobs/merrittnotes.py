"""What a page says about a ``merritt-queue`` job's Storing and Recording.

Merritt's storage and inventory do those steps; our workers only watch. A page says who
has the job and since when, and when one of them failed it with a message that says
nothing (storage's "Store action failed: null"), what we know instead: which service,
which step, what it was given, and what to check. Read from the job's own nodes (its
``store_record``, ``store`` and ``inventory``), never from today's settings, except for
the checks an operator is pointed to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from merritt_queue.core import stepowners
from merritt_queue.core.sides import merritt_service_of
from merritt_queue.core.states import JobStatus
from pipeline import contentlinks

# The step Merritt failed a job in, from the last step it passed.
_FAILED_IN: dict[str, str] = {
    JobStatus.PROCESSING: JobStatus.STORING,
    JobStatus.STORING: JobStatus.RECORDING,
}


@dataclass(frozen=True)
class MerrittNote:
    service: str
    step: str
    given: list[tuple[str, str]]
    checks: list[str]


def shown_store(store: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The store node as a page shows it: a content URL without its signature, which
    would open the job's files to whoever reads the page."""
    url = (store or {}).get("manifest_url")
    if not isinstance(url, str) or f"/{contentlinks.URL_PREFIX}/" not in url:
        return store
    return dict(store or {}) | {"manifest_url": contentlinks.unsigned(url)}


def holder(configuration: Mapping[str, Any] | None, status: str) -> str | None:
    """Who has the job in ``status``, when it is a Merritt service."""
    return merritt_service_of(configuration, status)


def failure_note(
    configuration: Mapping[str, Any] | None,
    status: str,
    last_successful: str | None,
    store: Mapping[str, Any] | None,
    inventory: Mapping[str, Any] | None,
) -> MerrittNote | None:
    """What we know of a failure in a step Merritt did; None when ours did it."""
    if status != JobStatus.FAILED or stepowners.of_job(configuration) != stepowners.MERRITT_QUEUE:
        return None
    step = _FAILED_IN.get(last_successful or "")
    if step is None:
        return None
    store, inventory = store or {}, inventory or {}
    if step == JobStatus.STORING:
        given = [
            ("manifest_url", contentlinks.unsigned(str(store.get("manifest_url", "")))),
            ("mode", str(store.get("mode", ""))),
            ("delete", str(store.get("delete", "")) or "(none)"),
        ]
        node = str(store.get("mode", "")).split("/")[1:2] or ["?"]
        base = settings.MQ_CONTENT_BASE_URL or "(MQ_CONTENT_BASE_URL unset)"
        checks = [
            f"Merritt storage can reach {base}"
            " over HTTP: fetch the manifest URL from storage's host (a 404 there means the "
            "signature expired or the job moved on; resume it from Processing to sign anew)",
            f"storage node {node[0]} exists on Merritt storage and the profile names it",
            "the mode is add|update/<numeric node>/<ARK> and a delete key is present; "
            'otherwise storage says "Store Job data could not be processed"',
            "storage's own log for this job id: it writes the reason there, not in ZooKeeper",
        ]
        return MerrittNote("Merritt storage", step, given, checks)
    given = [("manifest_url", str(inventory.get("manifest_url", "")))]
    checks = [
        "Merritt inventory can reach Merritt storage at that URL (storage's object manifest)",
        "storage holds the object on that node: storage moved the job on, so it should",
        "inventory's own log for this job id, and its lock /locks/inventory/<ARK>",
    ]
    return MerrittNote("Merritt inventory", step, given, checks)
