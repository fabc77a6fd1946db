"""The fields a depositor gives, checked as every door checks them: a submission
(``door.submission``) and an administrator's edit of a failed job (``steering.actions.editing``).

Pure: no Django, no network (the workers' fetch checks a URL's addresses, ``netpolicy``).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from urllib.parse import urlsplit

from . import safepath
from .digest import check_digest_format, normalise_algorithm
from .idtext import character_problem
from .urltext import userinfo_of

TEXT_FIELDS = {
    "profile": 100,
    "submitter": 255,
    "on_behalf_of": 150,
    "type": 40,
    "payload_url": 2048,
    "filename": 255,
    "batchID": 100,
    "erc_who": 10_000,
    "erc_what": 10_000,
    "erc_when": 1_000,
    "erc_where": 1_000,
    "digest_type": 20,
    "digest_value": 128,
    "local_id": 255,
    "primary_id": 255,
    "submission_mode": 10,
    "response_type": 20,
}


def field_problems(data: Mapping, fields: Mapping[str, int] = TEXT_FIELDS) -> list[str]:
    """Unknown fields, non-strings, over-long values and control characters; ``fields``: the
    names allowed and their lengths (a submission adds its subscription's)."""
    problems = [f"unknown field {k!r}" for k in data if k not in fields and k != "file"]
    for key, limit in fields.items():
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            problems.append(f"{key} must be a string, not {type(value).__name__}")
        elif len(value) > limit:
            problems.append(f"{key} is longer than {limit} characters")
        elif any(unicodedata.category(ch) == "Cc" for ch in value):
            problems.append(
                f"{key} contains a control character (tab, line break, NUL ...); "
                "submitted fields are single lines of printable text"
            )
    local = data.get("local_id")
    if isinstance(local, str) and not any(p.startswith("local_id ") for p in problems):
        if problem := character_problem("local_id", local, node=True):
            problems.append(problem)
    name = data.get("filename")
    if (
        isinstance(name, str)
        and name.strip()
        and not any(p.startswith("filename ") for p in problems)
    ):
        if problem := name_problem(name.strip()):
            problems.append(f"filename: {problem}")
    return problems


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be the one file a file or container submission stores: the
    workers' rule (``safepath``), and one name, not a path."""
    if problem := safepath.name_problem(name):
        return problem
    if "/" in name:
        return f"file name {name!r} must be one name, without '/'"
    return None


def url_problems(url: str, field: str = "payload_url") -> list[str]:
    """Why ``url`` may not be a URL a depositor gives in ``field`` (a payload to fetch, an
    endpoint to notify): what needs no name lookup. The workers check its addresses again,
    before every connection (``netpolicy``)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return [f"{field} must be an http or https URL, not {parts.scheme or 'a bare path'!r}"]
    if not parts.hostname:
        return [f"{field} has no host"]
    if userinfo_of(url):
        return [
            f"{field} holds a user name or password (user:password@host); "
            "credentials in URLs are not accepted"
        ]
    try:
        parts.port  # noqa: B018 (it raises for a port out of range)
    except ValueError:
        return [f"{field}: the port is not a number between 0 and 65535"]
    return []


def digest_problems(clean: dict) -> list[str]:
    """A digest given whole, for a single file or container, in its algorithm's format;
    normalises ``clean["digest_type"]``."""
    alg, value = clean.get("digest_type"), clean.get("digest_value")
    if not alg and not value:
        return []
    if not (alg and value):
        return ["digest_type and digest_value go together: give both or neither"]
    if clean.get("type") not in ("file", "container"):
        return ["a digest applies to a single file or container submission only"]
    try:
        clean["digest_type"] = normalise_algorithm(alg)
    except ValueError as e:
        return [str(e)]
    problem = check_digest_format(clean["digest_type"], value)
    return [problem] if problem else []
