"""checkm 0.7 manifests of Merritt submissions: parsing and complete validation.

Guarantees of ``parse_manifest``:
- it returns a Manifest only if the whole manifest is valid; otherwise it raises ONE
  ManifestError listing every problem found (at most 200, then "... and N more"), so a
  librarian fixes the manifest in one round trip;
- problems tied to a line start with ``line N:``; the ones about the whole document
  (``no #%profile line``, ``no #%fields line``, ``no rows``, ``no #%eof line``) name none;
  each is also kept as a ``Finding`` with its line, checkm field and value;
- the size limit is checked before the bytes are decoded, the row limit while scanning;
- a document that cannot be a checkm manifest (UTF-16/32, NUL bytes, an HTML or XML page)
  is refused with that one sentence, not a problem per line; a NUL byte in text that is
  not UTF-16-shaped is named as ``NUL byte at line N, offset M``, never called UTF-16;
- what Merritt's ingest accepts is accepted, with a warning (``parse_findings``; warnings
  never refuse): no ``#%checkm_0.7`` line (another ``#%checkm`` version is refused), no
  ``#%fields`` line (the profile's ``STANDARD_FIELDS`` are assumed), columns in another
  order than the profile's, blank lines after ``#%eof``;
- columns are mapped by the ``#%fields`` header (field names are case-insensitive), never
  by position, except the standard columns assumed without it; unknown fields are
  ignored, unknown ``#%`` headers too;
- every row URL uses an allowed scheme, has a host and holds no credentials (``user:pw@``,
  never repeated in a message); every file name is relative,
  free of ``..``, backslashes and control characters, and is stored normalised
  (``./a//b`` -> ``a/b``); digest algorithms are stored by their hashlib name and digest
  values in lower case;
- no field is longer than its ``FIELD_LIMITS`` entry.

Decoding and sorting lines is checkmscan's, the checks of one value of a row manifestvalues';
this module reads the headers and makes rows of what they found.
"""

from __future__ import annotations

import re
from typing import Any

from ..core.manifests import Manifest, ManifestRow
from .checkmscan import ManifestError, Scan, decode, scan_lines, split_cells
from .findings import Findings
from .manifestvalues import (
    Rules,
    check_digest,
    check_file_name,
    check_identifiers,
    check_size,
    check_url,
)

MAX_BYTES = 10 * 1024 * 1024
MAX_ROWS = 100_000

PROFILES = {
    "mrt-ingest-manifest": "object",
    "mrt-single-file-batch-manifest": "files",
    "mrt-batch-manifest": "manifests",
    "mrt-container-batch-manifest": "containers",
}
# checkm field name -> ManifestRow attribute
FIELDS = {
    "nfo:fileUrl": "url",
    "nfo:hashAlgorithm": "hash_algorithm",
    "nfo:hashValue": "hash_value",
    "nfo:fileSize": "file_size",
    "nfo:fileLastModified": "last_modified",
    "nfo:fileName": "file_name",
    "mrt:mimeType": "mime_type",
    "mrt:primaryIdentifier": "primary_id",
    "mrt:localIdentifier": "local_id",
    "mrt:creator": "creator",
    "mrt:title": "title",
    "mrt:date": "date",
}
# Longest value of each field, in characters: every value ends up in a job's ZooKeeper
# nodes, which must stay far below ZooKeeper's 1 MB request limit. Free text gets what a
# submission's own erc fields get.
FIELD_LIMITS = {
    "nfo:fileUrl": 2048,
    "nfo:hashAlgorithm": 32,
    "nfo:hashValue": 256,
    "nfo:fileSize": 20,
    "nfo:fileLastModified": 64,
    "nfo:fileName": 1024,
    "mrt:mimeType": 255,
    "mrt:primaryIdentifier": 255,
    "mrt:localIdentifier": 255,
    "mrt:creator": 10_000,
    "mrt:title": 10_000,
    "mrt:date": 1_000,
}
# The columns Merritt's ingest assumes when a manifest has no #%fields line (the built-in
# column lists of mrt-core2's ManifestRowIngest and ManifestRowBatch; see docs/merritt.md).
_FILE_COLUMNS = (
    "nfo:fileUrl",
    "nfo:hashAlgorithm",
    "nfo:hashValue",
    "nfo:fileSize",
    "nfo:fileLastModified",
    "nfo:fileName",
)
_BATCH_COLUMNS = (
    *_FILE_COLUMNS,
    "mrt:primaryIdentifier",
    "mrt:localIdentifier",
    "mrt:creator",
    "mrt:title",
    "mrt:date",
)
STANDARD_FIELDS = {
    "object": (*_FILE_COLUMNS, "mrt:mimeType"),
    "files": _BATCH_COLUMNS,
    "manifests": _BATCH_COLUMNS,
    "containers": _BATCH_COLUMNS,
}
_CANONICAL = {name.lower(): name for name in FIELDS}
BATCH_KINDS = ("files", "manifests", "containers")
_PROFILE_LINE = re.compile(r"^[ \t]*#%profile[ \t]*\|[ \t]*(\S+)", re.IGNORECASE | re.MULTILINE)


def container_type(name: str) -> str | None:
    """``zip``, ``tar`` or ``tar.gz`` judging by the file name's extension, else None."""
    lower = name.lower()
    if lower.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    if lower.endswith(".tar"):
        return "tar"
    return "zip" if lower.endswith(".zip") else None


def parse_manifest(
    data: bytes | str,
    *,
    max_bytes: int = MAX_BYTES,
    max_rows: int = MAX_ROWS,
    allowed_schemes: tuple[str, ...] = ("http", "https"),
    base_url_rewrite: tuple[str, str] | None = None,
) -> Manifest:
    """The valid manifest in ``data``, or ManifestError listing all its problems."""
    manifest, found = parse_findings(
        data,
        max_bytes=max_bytes,
        max_rows=max_rows,
        allowed_schemes=allowed_schemes,
        base_url_rewrite=base_url_rewrite,
    )
    if manifest is None or found.errors:
        raise ManifestError(found.error_texts(), found.errors)
    return manifest


def parse_findings(
    data: bytes | str,
    *,
    max_bytes: int = MAX_BYTES,
    max_rows: int = MAX_ROWS,
    max_batch_rows: int | None = None,
    allowed_schemes: tuple[str, ...] = ("http", "https"),
    base_url_rewrite: tuple[str, str] | None = None,
) -> tuple[Manifest | None, Findings]:
    """Everything found in ``data``: the manifest of its valid rows (None when ``data`` cannot
    be a manifest at all), its errors and the warnings about what Merritt accepts anyway.

    ``max_batch_rows``: the most rows a batch manifest may have (a batch's jobs,
    ``pipeline.capacity.batch_row_limit``), judged while scanning, so the rows past it are
    never checked."""
    problems = Findings()
    try:
        text = decode(data, max_bytes, problems)
        why = ""
        if max_batch_rows is not None and _declared_kind(text) in BATCH_KINDS:
            max_rows = min(max_rows, max_batch_rows)
            why = f": a batch may have at most {max_batch_rows} (MQ_MAX_BATCH_JOBS)"
        scan = scan_lines(text, max_rows, problems, why)
    except ManifestError as e:
        problems.errors = list(e.findings)
        return None, problems
    profile, kind = _profile(scan, problems)
    fields = _fields(scan, kind, problems)
    rules = Rules(kind, fields, tuple(s.lower() for s in allowed_schemes), base_url_rewrite)
    rows = _rows(scan, rules, problems) if fields else ()
    _check_end(scan, problems)
    return Manifest(profile, kind, fields, rows), problems


# --- headers -----------------------------------------------------------------------------


def _declared_kind(text: str) -> str | None:
    """The kind the first ``#%profile`` line names, read before the lines are scanned."""
    found = _PROFILE_LINE.search(text)
    return PROFILES.get(found[1].rstrip("/").rsplit("/", 1)[-1].lower()) if found else None


def _single_header(scan: Scan, keyword: str, problems: Findings) -> tuple[int, list[str]] | None:
    found = scan.headers.get(keyword, [])
    for n, _ in found[1:]:
        problems.add(f"second #%{keyword} line (the first is line {found[0][0]})", n)
    return found[0] if found else None


def _profile(scan: Scan, problems: Findings) -> tuple[str, str]:
    expected = ", ".join(PROFILES)
    header = _single_header(scan, "profile", problems)
    if header is None:
        problems.add(f"no #%profile line (expected one of: {expected})")
        return "", ""
    n, values = header
    url = values[0] if values else ""
    kind = PROFILES.get(url.rstrip("/").rsplit("/", 1)[-1].lower())
    if not url:
        problems.add("#%profile has no value", n, "#%profile")
    elif kind is None:
        problems.add(f"unknown profile {url!r} (expected one of: {expected})", n, "#%profile", url)
    return url, kind or ""


def _fields(scan: Scan, kind: str, problems: Findings) -> tuple[str, ...]:
    header = _single_header(scan, "fields", problems)
    standard = STANDARD_FIELDS.get(kind)
    if header is None and standard is None:
        problems.add("no #%fields line (it must list nfo:fileUrl)")
        return ()
    if header is None:
        problems.warn(
            "no #%fields line: the profile's standard columns are assumed, in this order: "
            + " | ".join(standard or ())
        )
        return standard or ()
    n, names = header
    fields = tuple(_CANONICAL.get(name.lower(), name) for name in names)
    ok = _check_field_names(n, fields, problems)
    if ok and standard:
        _check_field_order(n, fields, standard, problems)
    return fields if ok else ()


def _check_field_order(n: int, fields: tuple[str, ...], standard, problems: Findings) -> None:
    """Columns are mapped by name here; Merritt's validator wants the profile's order."""
    listed = [f for f in fields if f in standard]
    expected = [f for f in standard if f in listed]
    if listed != expected:
        problems.warn(
            "#%fields lists the columns in another order than the profile's "
            f"({' | '.join(expected)}): Merritt's ingest maps them by name, its validator "
            "expects that order",
            n,
            value=" | ".join(fields),
        )


def _check_field_names(n: int, fields: tuple[str, ...], problems: Findings) -> bool:
    before = len(problems)
    for column, name in enumerate(fields, 1):
        if not name:
            problems.add(f"#%fields has an empty field name (column {column})", n)
        elif fields.index(name) != column - 1:
            problems.add(f"#%fields lists {name} twice", n)
    if "nfo:fileUrl" not in fields:
        problems.add("#%fields does not list nfo:fileUrl", n)
    return len(problems) == before


def _check_end(scan: Scan, problems: Findings) -> None:
    if not scan.rows:
        problems.add("no rows: the manifest lists nothing to ingest")
    if scan.eof_line is None:
        problems.add("no #%eof line: the manifest looks truncated")


# --- rows --------------------------------------------------------------------------------


def _rows(scan: Scan, rules: Rules, problems: Findings) -> tuple[ManifestRow, ...]:
    rows = [_row(n, line, rules, problems) for n, line in scan.rows if line]
    valid = [row for row in rows if row is not None]
    if rules.kind == "object":
        _check_unique(valid, "file_name", "file name", problems)
    elif rules.kind:
        _check_unique(valid, "local_id", "mrt:localIdentifier", problems)
    return tuple(valid)


def _row(n: int, line: str, rules: Rules, problems: Findings) -> ManifestRow | None:
    cells = split_cells(line)
    if len(cells) > len(rules.fields):
        problems.add(
            f"{len(cells)} cells but #%fields lists {len(rules.fields)} (extra '|')", n, value=line
        )
        return None
    before = len(problems)
    for f, c in zip(rules.fields, cells, strict=False):
        if f in FIELD_LIMITS and len(c) > FIELD_LIMITS[f]:
            problems.add(f"{f} is longer than {FIELD_LIMITS[f]} characters", n, f, c)
    if len(problems) > before:
        return None  # the other checks would quote the oversized value back
    values = {
        FIELDS[f]: c or None for f, c in zip(rules.fields, cells, strict=False) if f in FIELDS
    }
    url = check_url(n, values.get("url"), rules, problems)
    algorithm, digest = check_digest(n, values, problems)
    size = check_size(n, values.get("file_size"), problems)
    name = check_file_name(n, values.get("file_name"), url, problems)
    check_identifiers(n, values, problems)
    if len(problems) > before:
        return None
    fixed = {"url": url, "hash_algorithm": algorithm, "hash_value": digest, "file_size": size}
    return _make_row(n, values | fixed | {"file_name": name})


def _make_row(n: int, values: dict) -> ManifestRow:
    fields: dict[str, Any] = {attr: values.get(attr) for attr in FIELDS.values()}
    return ManifestRow(line=n, **fields)


def _check_unique(rows: list[ManifestRow], attr: str, label: str, problems: Findings) -> None:
    first: dict[str, int] = {}
    for row in rows:
        value = getattr(row, attr)
        if value is None:
            continue
        if value in first:
            problems.add(
                f"duplicate {label} {value!r} (first on line {first[value]})",
                row.line,
                "nfo:fileName" if attr == "file_name" else "mrt:localIdentifier",
                value,
            )
        else:
            first[value] = row.line
