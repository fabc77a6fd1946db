"""The ``mrt-add-manifest`` Merritt storage reads to add or update a version.

Storage reads it as checkm: the ``#%profile`` names ``mrt-add-manifest``, the ``#%columns``
are its row type's own (file URL, hash algorithm, hash value, size, last modified, file
name, MIME type), values go by position, and the last line must be ``#%eof``. It fetches
each row's URL itself, so every URL must be one storage can reach over HTTP. A name that
would split a row (a ``|``, a line break) is refused here, not mangled there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .manifest import ManifestError

PROFILE = "http://uc3.cdlib.org/registry/store/manifest/mrt-add-manifest"
HEAD = (
    "#%checkm_0.7",
    f"#%profile | {PROFILE}",
    "#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#",
    "#%prefix | nie: | http://www.semanticdesktop.org/ontologies/2007/01/19/nie/#",
    "#%columns | nfo:fileURL | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize"
    " | nfo:fileLastModified | nfo:fileName | nie:mimeType",
)


def add_manifest(entries: Iterable[dict], url_of: Callable[[str], str]) -> str:
    """The manifest of ``entries`` (``name``, ``size``, ``sha256``, ``mime_type``), each
    row's URL ``url_of(name)``."""
    rows, refused = [], []
    for e in entries:
        name = e["name"]
        if "|" in name or "\n" in name or "\r" in name:
            refused.append(f"file name {name!r} cannot be a row of Merritt storage's manifest")
            continue
        mime = e.get("mime_type") or ""
        rows.append(f"{url_of(name)} | sha256 | {e['sha256']} | {e['size']} |  | {name} | {mime}")
    if refused:
        raise ManifestError(refused)
    return "\n".join([*HEAD, *rows, "#%eof"]) + "\n"
