"""A container that is a BagIt bag, in Downloading: checked, split, its bag-info read.

Checked in Downloading, right after the unpack and before ``producer/`` is published: a bag
that does not match its manifests fails the job there, before Processing mints an ARK or
Storing stores anything, and the whole payload is read once, by the worker that already
holds it on its disk. Its payload (``data/``'s contents) becomes ``producer/``; its tag
files (bagit.txt, bag-info.txt, the manifests) are kept as the object's system files,
``system/bag/``, the deposit's own record of what was sent, as Merritt keeps its
``mrt-delete.txt`` there (``identify._take_delete_file``).

bag-info.txt fields fill the job's metadata and local id only where the depositor's form or
manifest left them empty: the depositor's given values win.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from merritt_queue.core import steplog
from merritt_queue.core.store import JobRecord
from merritt_queue.deposit import bags
from merritt_queue.deposit.containers import ContainerError
from merritt_queue.deposit.fields import TEXT_FIELDS
from merritt_queue.deposit.idtext import character_problem

# Where the bag's tag files are stored, under the object's system/ folder.
TAGS = "bag"
# Each field of the ERC and the bag-info tags it is read from, the first one given.
INFO_FIELDS = {
    "erc_what": ("Title", "External-Description"),
    "erc_who": ("Contact-Name", "Source-Organization"),
    "erc_when": ("Bagging-Date",),
}
LOCAL_ID_TAG = "External-Identifier"
# A failed bag's message stays within what a status message and its history entry keep.
MAX_MESSAGE = 480
MAX_NOTED = 40


class BagRefused(ContainerError):
    """The container is a bag that does not check; the message says what does not match
    (a ContainerError: the job fails with it, as with any container refused)."""


@dataclass(frozen=True)
class Unbagged:
    tags: Path
    info: dict[str, str]


def unbag(staging: Path, archive_name: str) -> Unbagged | None:
    """When ``staging/producer`` (the unpacked container) is a bag: check it (``BagRefused``
    when it does not), then leave its payload as ``staging/producer`` and its tag files in
    ``staging/bag``. None when the container is no bag: nothing is changed."""
    producer = staging / "producer"
    found = bags.find_bag(producer)
    if found is None:
        return None
    unpacked = staging / "unpacked"
    os.rename(producer, unpacked)
    bag_dir = unpacked / found.relative_to(producer)
    check = bags.check_bag(bag_dir)
    _note(archive_name, check)
    if not check.valid:
        raise BagRefused(refusal(archive_name, check.problems))
    tags = staging / TAGS
    bags.split_bag(bag_dir, producer, tags)
    return Unbagged(tags, check.info)


def _note(name: str, check: bags.BagCheck) -> None:
    """The step's record: the whole verdict, then each mismatch with both digests."""
    by_kind = {k: [p.path for p in check.problems if p.kind == k] for k in ("missing", "extra")}
    mismatches = [p for p in check.problems if p.kind == "mismatch"]
    steplog.note(
        "bag",
        file=name,
        valid=check.valid,
        algorithms=check.algorithms,
        mismatched=len(mismatches),
        missing=by_kind["missing"],
        extra=by_kind["extra"],
        problems=[str(p) for p in check.problems if p.kind == "bag"],
    )
    for p in mismatches[:MAX_NOTED]:
        steplog.note(
            "digest",
            file=p.path,
            expected={p.algorithm: p.expected},
            computed={p.algorithm: p.got},
            ok=False,
        )


def refusal(name: str, problems: list[bags.BagProblem]) -> str:
    """One message naming the problems, as many as fit; the rest are counted."""
    counts = [
        (sum(p.kind == kind for p in problems), what)
        for kind, what in (
            ("mismatch", "digest mismatch(es)"),
            ("missing", "missing file(s)"),
            ("extra", "file(s) not in the manifest"),
        )
    ]
    said = ", ".join(f"{n} {what}" for n, what in counts if n)
    head = f"{name}: the bag does not check" + (f" ({said})" if said else "") + ": "
    shown: list[str] = []
    for p in problems:
        text = p.said()
        if len(head) + len("; ".join([*shown, text])) > MAX_MESSAGE - 60:
            break
        shown.append(text)
    rest = len(problems) - len(shown)
    tail = f"; and {rest} more (in the step's record)" if rest else ""
    return head + "; ".join(shown) + tail


def filled(job: JobRecord, info: dict[str, str], local_ids_accepted: bool) -> dict:
    """The data nodes bag-info fills: ``metadata`` and ``identifiers`` with the fields the
    depositor left empty, none when there is nothing to fill."""
    data: dict = {}
    meta = dict(job.metadata or {})
    for name, tags in INFO_FIELDS.items():
        value = next((info[t] for t in tags if info.get(t)), "")
        if value and not meta.get(name):
            meta[name] = value[: TEXT_FIELDS[name]]
    if meta != (job.metadata or {}):
        data["metadata"] = meta
    ids = dict(job.identifiers or {})
    given = ids.get("local_id") or (job.configuration or {}).get("local_id")
    local = info.get(LOCAL_ID_TAG, "")[: TEXT_FIELDS["local_id"]]
    if local and not given:
        if problem := _local_id_problem(local, local_ids_accepted):
            steplog.note("bag-info", ignored=LOCAL_ID_TAG, problem=problem)
        else:
            data["identifiers"] = {"primary_id": ids.get("primary_id") or "", "local_id": [local]}
    return data


def _local_id_problem(local: str, accepted: bool) -> str | None:
    if not accepted:
        return "the profile takes no local ids"
    return character_problem(LOCAL_ID_TAG, local, node=True)


def filled_names(job: JobRecord, data: dict) -> list[str]:
    """What ``filled`` filled, for the step's message."""
    given = job.metadata or {}
    names = [k.removeprefix("erc_") for k in data.get("metadata") or {} if not given.get(k)]
    return names + (["local id"] if "identifiers" in data else [])
