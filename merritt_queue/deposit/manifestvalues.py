"""What one value of a manifest row must be: a URL, a digest, a size, a file name.

Each value is checked on its own, so a row's problems are all found in one pass, and the
checks of a file name are shared with whatever else names a file of an object (safepath):
a name that could escape the object's directory or break Merritt's checkm files is refused
wherever it comes from. URLs never carry credentials, since a row is stored in ZooKeeper and
shown on pages; a refused URL's message quotes it redacted.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from .digest import check_digest_format, normalise_algorithm
from .findings import Findings
from .fsnames import NAME_MAX, PART_SUFFIX, ark_name_problem
from .idtext import character_problem
from .urltext import hide_credentials, redact, userinfo_of

_DRIVE = re.compile(r"[A-Za-z]:")


@dataclass(frozen=True)
class Rules:
    """What a row is judged by: the manifest's kind and columns, and the deployment's URLs."""

    kind: str
    fields: tuple[str, ...]
    schemes: tuple[str, ...]
    rewrite: tuple[str, str] | None


def rewrite_url(url: str, rewrite: tuple[str, str]) -> str:
    """``url`` with the prefix ``rewrite[0]`` replaced by ``rewrite[1]`` (unchanged otherwise)."""
    old, new = rewrite
    return new + url[len(old) :] if url.startswith(old) else url


def check_url(n: int, url: str | None, rules: Rules, problems: Findings) -> str:
    if not url:
        problems.add("empty nfo:fileUrl", n, "nfo:fileUrl")
        return ""
    url = rewrite_url(url, rules.rewrite) if rules.rewrite else url
    problem = _url_problem(url, rules.schemes)
    if problem:
        problems.add(problem, n, "nfo:fileUrl", url)
    return url


def _url_problem(url: str, schemes: tuple[str, ...]) -> str | None:
    """Why ``url`` is refused, never quoting its credentials."""
    allowed = ", ".join(schemes)
    shown = hide_credentials(url)
    if _has_control(url):
        return f"URL {shown!r} contains control characters"
    parts = urlsplit(url)
    if not parts.scheme:
        return f"{shown!r} is not a URL (it has no scheme; allowed: {allowed})"
    if parts.scheme.lower() not in schemes:
        return f"URL scheme {parts.scheme!r} is not allowed (allowed: {allowed})"
    if not parts.hostname:
        return f"URL {shown!r} has no host"
    if userinfo_of(url):
        return (
            f"URL {redact(url)!r} holds a user name or password (user:password@host); "
            "credentials in URLs are not accepted"
        )
    return None


def check_digest(n: int, values: dict, problems: Findings):
    alg, value = values.get("hash_algorithm"), values.get("hash_value")
    if alg and not value:
        problems.add(
            f"nfo:hashAlgorithm {alg!r} is given without nfo:hashValue", n, "nfo:hashValue"
        )
    elif value and not alg:
        problems.add("nfo:hashValue is given without nfo:hashAlgorithm", n, "nfo:hashAlgorithm")
    elif alg and value:
        return _check_digest_pair(n, alg, value, problems)
    return None, None


def _check_digest_pair(n: int, alg: str, value: str, problems: Findings):
    try:
        alg = normalise_algorithm(alg)
    except ValueError as e:
        problems.add(str(e), n, "nfo:hashAlgorithm", alg)
        return None, None
    problem = check_digest_format(alg, value)
    if problem:
        problems.add(problem, n, "nfo:hashValue", value)
    return alg, value.lower()


def check_size(n: int, value: str | None, problems: Findings) -> int | None:
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()):
        problems.add(
            f"nfo:fileSize {value!r} is not a whole number of bytes (0 or more)",
            n,
            "nfo:fileSize",
            value,
        )
        return None
    return int(value)


def check_identifiers(n: int, values: dict, problems: Findings) -> None:
    """A row's local id and ARK, judged by the rules of the lock and the storage they name
    (an ARK's shape and owner are Processing's, ``pipeline.objects``)."""
    local = values.get("local_id")
    if local and (problem := character_problem("mrt:localIdentifier", local, node=True)):
        problems.add(problem, n, "mrt:localIdentifier", local)
    ark = values.get("primary_id")
    if ark and (problem := ark_name_problem(ark, "mrt:primaryIdentifier")):
        problems.add(problem, n, "mrt:primaryIdentifier", ark)


def check_file_name(n: int, name: str | None, url: str, problems: Findings) -> str:
    if name is None:
        return _url_file_name(n, url, problems)
    return _checked_file_name(n, name, problems)


def _url_file_name(n: int, url: str, problems: Findings) -> str:
    if not url:
        return ""  # the empty URL is reported already
    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    if not name:
        problems.add(
            "no file name: nfo:fileName is empty and the URL path ends with '/'",
            n,
            "nfo:fileName",
            url,
        )
        return ""
    return _checked_file_name(n, name, problems)


def _checked_file_name(n: int, name: str, problems: Findings) -> str:
    problem = file_name_problem(name)
    if problem:
        problems.add(problem, n, "nfo:fileName", name)
        return ""
    return normalise_file_name(name)


# The door and the workers (safepath) judge file names by this one rule. A file's own name is
# first written with PART_SUFFIX after it (``partfile``), so it gets that much less.
FILE_NAME_MAX = NAME_MAX - len(PART_SUFFIX.encode())


def file_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a file of an object, or None if it can."""
    if name.startswith("/") or _DRIVE.match(name):
        return f"file name {name!r} is absolute"
    if "\\" in name:
        return f"file name {name!r} contains a backslash"
    if _has_control(name):
        return f"file name {name!r} contains control characters"
    if problem := character_problem(f"file name {name!r}", name):
        return problem
    if ".." in name.split("/"):
        return f"file name {name!r} contains a '..' segment"
    if not normalise_file_name(name):
        return f"file name {name!r} is empty once normalised" if name else "empty file name"
    if any(len(os.fsencode(part)) > NAME_MAX for part in name.split("/")):
        return f"file name {name!r} has a segment over {NAME_MAX} bytes (the file system's limit)"
    if len(os.fsencode(name.rsplit("/", 1)[-1])) > FILE_NAME_MAX:
        return (
            f"file name {name!r} ends in a name over {FILE_NAME_MAX} bytes: the file system's "
            f"limit of {NAME_MAX}, less the {PART_SUFFIX!r} a download is written under"
        )
    return None


def normalise_file_name(name: str) -> str:
    """``name`` without empty and ``.`` segments: ``./a//b`` -> ``a/b``."""
    return "/".join(part for part in name.split("/") if part not in ("", "."))


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) == "Cc" for ch in text)
