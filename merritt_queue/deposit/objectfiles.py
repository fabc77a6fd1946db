"""The files Processing writes beside the depositor's content.

``mrt-erc.txt`` (ERC kernel metadata as ANVL), ``mrt-dc.xml`` (Dublin Core)
and the checkm storage manifest listing every file with its size and digest; beside the
object, the description of its files that Storing and Recording read back.
Depositor text is escaped, never interpreted.
"""

from __future__ import annotations

import json
import mimetypes
from pathlib import Path
from xml.sax.saxutils import escape

from .digest import bytes_digests, file_digests

ERC_KEYS = (("who", "erc_who"), ("what", "erc_what"), ("when", "erc_when"))
DIGESTS = ("md5", "sha256")


def _anvl_value(value: str) -> str:
    # ANVL continues a value on lines that start with white space.
    lines = [line.strip() for line in str(value).replace("%", "%25").splitlines()] or [""]
    return "\n    ".join(line for line in lines if line) or "(:unav)"


def erc_text(meta: dict, ark: str) -> str:
    rows = [f"{key}: {_anvl_value(meta.get(field) or '(:unav)')}" for key, field in ERC_KEYS]
    where = meta.get("erc_where")
    rows.append(f"where: {ark}")
    if where and where != ark:
        rows.append(f"where: {_anvl_value(where)}")
    return "erc:\n" + "\n".join(rows) + "\n"


def dublin_core_xml(meta: dict, ark: str) -> str:
    fields = (
        ("creator", meta.get("erc_who")),
        ("title", meta.get("erc_what")),
        ("date", meta.get("erc_when")),
        ("identifier", ark),
    )
    body = "".join(f"  <dc:{name}>{escape(str(v))}</dc:{name}>\n" for name, v in fields if v)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<dc xmlns:dc="http://purl.org/dc/elements/1.1/">\n'
        f"{body}</dc>\n"
    )


def describe_files(
    root: Path, subdirs: list[str], written: dict[str, bytes] | None = None
) -> list[dict]:
    """Every file under ``root/<subdir>``: name relative to root, size, md5, sha256, mime type.
    ``written``: the bytes of files the caller has just written, by name, digested as they
    are instead of read back."""
    written = written or {}
    entries = []
    for sub in subdirs:
        base = root / sub
        for path in sorted(p for p in base.rglob("*") if p.is_file()) if base.exists() else []:
            name = path.relative_to(root).as_posix()
            data = written.get(name)
            if data is None:
                digests, size = file_digests(path, DIGESTS), path.stat().st_size
            else:
                digests, size = bytes_digests(data, DIGESTS), len(data)
            entries.append(
                {
                    "name": name,
                    "size": size,
                    "md5": digests["md5"],
                    "sha256": digests["sha256"],
                    "mime_type": mimetypes.guess_type(path.name)[0] or "application/octet-stream",
                }
            )
    return entries


# The object's files as Processing described them, kept in the job's working directory
# (outside producer/ and system/, so never stored as part of the object).
DESCRIPTION = "object-files.json"
OBJECT_SUBDIRS = ["producer", "system"]


def save_description(root: Path, entries: list[dict]) -> None:
    (root / DESCRIPTION).write_text(json.dumps(entries), encoding="utf-8")


def object_files(root: Path) -> list[dict]:
    """The object's files as Processing described them, read back instead of digested again.

    Storing and Recording used to digest every file anew, two more md5 and sha256 passes
    over the whole object. Reading the description is safe because storage checks every
    byte it copies against these digests, so a file changed since Processing fails
    Storing instead of being stored. Without a readable description (a directory from
    before it existed, or a write lost in a crash) the files are described afresh.
    """
    try:
        entries = json.loads((root / DESCRIPTION).read_text(encoding="utf-8"))
        if isinstance(entries, list) and all(
            isinstance(e, dict) and {"name", "size", "md5", "sha256"} <= e.keys() for e in entries
        ):
            return entries
    except (OSError, ValueError):
        pass
    return describe_files(root, OBJECT_SUBDIRS)


def storage_manifest(entries: list[dict], root: Path) -> str:
    head = [
        "#%checkm_0.7",
        "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-ingest-manifest",
        "#%prefix | mrt: | http://merritt.cdlib.org/terms#",
        "#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#",
        "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize "
        "| nfo:fileLastModified | nfo:fileName | mrt:mimeType",
    ]
    rows = [
        f"{(root / e['name']).as_uri()} | sha256 | {e['sha256']} | {e['size']} |  | "
        f"{e['name']} | {e['mime_type']}"
        for e in entries
    ]
    return "\n".join([*head, *rows, "#%eof"]) + "\n"
