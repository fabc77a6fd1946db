"""A job's per-job parameters: what an administrator may edit on a failed job before resuming
it, where each lives in the job's nodes, and how far back the job must restart to use it.

Pure: the store writes what ``edited`` returns (``store.jobedits``); the door checks the
values (``steering.actions.editing``). The nodes keep the shape the planner writes
(``core.planning``) and MerrittZK reads (docs/zk-tree.md): ``configuration`` holds the
payload URL, digest, local id and ``title``; ``identifiers`` the local ids beside the ARK;
``metadata`` the ERC fields.
"""

from __future__ import annotations

from dataclasses import dataclass

from .states import JOB_STEPS, JobStatus, resume_choices, resume_target

J = JobStatus

# The fields, in the order the form and the audit list them.
FETCHED = ("payload_url", "digest_type", "digest_value")
DESCRIBED = ("erc_what", "erc_who", "erc_when", "erc_where", "local_id")
FIELDS = FETCHED + DESCRIBED
# What a batch manifest's row also gives a job, changed only by a corrected row
# (``deposit.rowmatch``): the checkm parser has judged them, no form offers them.
ROW_ONLY = ("filename", "file_size")
ALL_FIELDS = FIELDS + ROW_ONLY
LABELS = {
    "payload_url": "payload URL",
    "digest_type": "digest algorithm",
    "digest_value": "digest value",
    "erc_what": "title (erc_what)",
    "erc_who": "creator (erc_who)",
    "erc_when": "date (erc_when)",
    "erc_where": "where (erc_where)",
    "local_id": "local id",
    "filename": "file name",
    "file_size": "file size",
}

# The latest step a job may restart at to use each field: a new URL is sized again
# (Estimating reserves the disk for it), a new digest is checked by the download that fetches
# the bytes, and the ERC fields and local id are read by Processing (the ARK, mrt-erc.txt).
LATEST_STEP = {
    "payload_url": J.ESTIMATING,
    "digest_type": J.DOWNLOADING,
    "digest_value": J.DOWNLOADING,
    **{name: J.PROCESSING for name in DESCRIBED},
    # The size bounds the reservation; the name is the one the download saves the bytes as.
    "file_size": J.ESTIMATING,
    "filename": J.DOWNLOADING,
}
ORDER = (J.PENDING, *JOB_STEPS)


def current(configuration: dict | None, identifiers: dict | None, metadata: dict | None) -> dict:
    """Each field as the job carries it ("" when it has none)."""
    config, ids, meta = configuration or {}, identifiers or {}, metadata or {}
    local_ids = ids.get("local_id") or []
    local = local_ids[0] if isinstance(local_ids, list) and local_ids else config.get("local_id")
    values = {
        "payload_url": config.get("payload_url"),
        "digest_type": config.get("digest_type"),
        "digest_value": config.get("digest_value"),
        "local_id": local,
        **{name: meta.get(name) for name in ("erc_what", "erc_who", "erc_when", "erc_where")},
        "filename": config.get("filename"),
        "file_size": _size_text(config.get("file_size")),
    }
    return {name: value if isinstance(value, str) else "" for name, value in values.items()}


def _size_text(size: object) -> str | None:
    """A size as the other fields are shown: text ("" for none)."""
    if isinstance(size, bool) or not isinstance(size, int | str):
        return None
    return str(size)


def changes_of(before: dict, after: dict) -> dict[str, tuple[str, str]]:
    """The fields ``after`` changes: name -> (before, after), in ``ALL_FIELDS`` order."""
    return {
        name: (before.get(name, ""), after[name])
        for name in ALL_FIELDS
        if name in after and after[name] != before.get(name, "")
    }


@dataclass(frozen=True)
class Edited:
    """The job's data nodes after an edit (None: the node is not written)."""

    configuration: dict
    identifiers: dict | None
    metadata: dict | None


def edited(
    configuration: dict | None,
    identifiers: dict | None,
    metadata: dict | None,
    changes: dict[str, str],
) -> Edited:
    """The nodes with ``changes`` (name -> new value, "" to clear) applied, other keys kept.

    The local id is changed where Processing reads it (``identifiers.local_id`` first, then
    ``configuration.local_id``); an ARK the job already has stays with it, and so do the
    local ids after the first, which a job of Merritt's may carry (MerrittZK splits its
    depositor's ``a;b``) and the form neither shows nor edits. ``title`` in the
    configuration follows ``erc_what``, as the planner writes it.
    """
    unknown = set(changes) - set(ALL_FIELDS)
    if unknown:
        raise ValueError(f"not a per-job parameter: {', '.join(sorted(unknown))}")
    config = dict(configuration or {})
    for name in (*FETCHED, "filename"):
        if name in changes:
            _put(config, name, changes[name])
    if "file_size" in changes:
        # The planner writes a manifest's size as a number (``planning._row_job``).
        size = changes["file_size"]
        if size:
            config["file_size"] = int(size)
        else:
            config.pop("file_size", None)
    ids = dict(identifiers) if identifiers is not None else None
    if "local_id" in changes:
        new = changes["local_id"]
        _put(config, "local_id", new)
        if ids is not None or new:
            ids = ids or {"primary_id": ""}
            others = ids.get("local_id")
            others = others[1:] if isinstance(others, list) else []
            ids["local_id"] = [new, *others] if new else others
    meta = dict(metadata) if metadata is not None else None
    erc = {n: changes[n] for n in ("erc_what", "erc_who", "erc_when", "erc_where") if n in changes}
    if erc:
        meta = meta or {}
        for name, value in erc.items():
            _put(meta, name, value)
    if "erc_what" in changes:
        _put(config, "title", changes["erc_what"])
    return Edited(config, ids, meta)


def _put(node: dict, key: str, value: str) -> None:
    if value:
        node[key] = value
    else:
        node.pop(key, None)


def latest_step(changed: list[str] | set[str] | tuple[str, ...]) -> str:
    """The latest step a job edited in ``changed`` may restart at."""
    steps = [LATEST_STEP[name] for name in changed]
    return min(steps, key=ORDER.index) if steps else JOB_STEPS[-1]


def resume_steps(last_successful: str | None, changed) -> tuple[str, ...]:
    """The steps an edited failed job may restart at: those a resume allows, no later than
    the step that uses the earliest field changed."""
    latest = ORDER.index(latest_step(changed))
    return tuple(s for s in resume_choices(last_successful) if ORDER.index(s) <= latest)


def default_step(last_successful: str | None, changed) -> str:
    """Where an edited job restarts unless the person chooses: where a resume would, or the
    latest step that uses what changed, whichever comes first."""
    target, latest = resume_target(last_successful), latest_step(changed)
    return min(target, latest, key=ORDER.index)


def describe(changes: dict) -> str:
    """``changes`` (name -> (before, after)) as the audit shows them, one field a line."""
    return "\n".join(
        f"{LABELS.get(name, name)}: {shown(before)} -> {shown(after)}"
        for name, (before, after) in changes.items()
    )


def shown(value: str) -> str:
    """A field's value as a sentence quotes it."""
    return repr(value) if value else "(none)"
