"""Reading mrt-store's state answers (``t=json``) in the shapes the service really sends.

mrt-store renders ``ObjectState``, ``VersionState`` and ``FileState`` with mrt-core2's
``formatter/JSONFormatter``: the state's XML (``formatter/XMLFormatter``, one element per
getter, each prefixed with the state's namespace, ``obj``, ``ver`` or ``fil``, per
``resources/XMLManifestNS.txt``) converted by org.json's ``XML.toJSONObject``. What follows
from that, and is relied on here:

- The root is one key, ``obj:objectState`` / ``ver:versionState`` / ``fil:fileState``, whose
  object also carries ``xmlns:<prefix>``.
- A repeated element is a JSON list, but a single one is the bare value, and an absent one
  (a version with no files) no key at all: every list is read with ``as_list``.
- Text that reads as a number or boolean arrives as one (``ver:identifier``, ``fil:size``),
  other text as a string; both are accepted.
- A version's ``ver:fileStates`` holds only ``ver:fileState`` *URLs*
  (``<storage>/state/<node>/<ark>/<version>/<file>``, ARK and file name each
  ``URLEncoder``-encoded: mrt-store ``store/tools/StoreUtil.buildContentURL``,
  ``store/VersionState.getFileStates``). A file's size and digest are only in its own state:
  ``fil:size`` and ``fil:messageDigest``, ``<algorithm>=<hex>`` (mrt-core2
  ``core/MessageDigest.toString``, algorithm named as ``MessageDigestType``, ``sha256``).

This module reads answers; it makes no request.
"""

from __future__ import annotations

from urllib.parse import unquote_plus, urlsplit

from ..deposit.digest import normalise_algorithm
from .errors import StorageError
from .versions import StoredFile


def as_list(value) -> list:
    """org.json's list of one is the bare value, its list of none no value at all."""
    if value is None or value == "":
        return []
    return value if isinstance(value, list) else [value]


def root(data, name: str) -> dict:
    """The state under its root key (``ver:versionState``); StorageError if it is not there."""
    state = data.get(name) if isinstance(data, dict) else None
    if not isinstance(state, dict):
        raise StorageError(f"storage answered without {name}", retryable=True)
    return state


def number(state: dict, key: str) -> int:
    try:
        return int(str(state[key]))
    except (KeyError, ValueError):
        raise StorageError(f"storage answered without a number in {key}", retryable=True) from None


def version_count(data) -> int:
    return number(root(data, "obj:objectState"), "obj:numVersions")


def version_number(data) -> int:
    return number(root(data, "ver:versionState"), "ver:identifier")


def file_names(data) -> list[str]:
    """The names of a version's files, read from their state URLs (no file state fetched)."""
    state = root(data, "ver:versionState")
    urls = as_list((state.get("ver:fileStates") or {}).get("ver:fileState"))
    return [file_name_of(str(url)) for url in urls]


def file_name_of(state_url: str) -> str:
    """The file a state URL names: its last path segment, ``URLEncoder``-decoded."""
    segment = urlsplit(state_url).path.rsplit("/", 1)[-1]
    if not segment:
        raise StorageError(f"storage named a file state without a file: {state_url!r}")
    return unquote_plus(segment)


def stored_file(name: str, data) -> StoredFile:
    """``name``'s size and digests from its file state."""
    state = root(data, "fil:fileState")
    digests = {}
    for text in as_list(state.get("fil:messageDigest")):
        algorithm, _, value = str(text).partition("=")
        try:
            digests[normalise_algorithm(algorithm)] = value.strip().lower()
        except ValueError:
            continue  # an algorithm we cannot compute tells us nothing
    return StoredFile(name, number(state, "fil:size"), digests)
