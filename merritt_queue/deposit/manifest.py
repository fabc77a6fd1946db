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
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from ..services.netpolicy import redact, userinfo_of
from .digest import check_digest_format, normalise_algorithm
from .findings import Finding, Findings

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
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_DRIVE = re.compile(r"[A-Za-z]:")


@dataclass(frozen=True)
class ManifestRow:
    line: int
    url: str
    hash_algorithm: str | None
    hash_value: str | None
    file_size: int | None
    last_modified: str | None
    file_name: str
    mime_type: str | None
    primary_id: str | None
    local_id: str | None
    creator: str | None
    title: str | None
    date: str | None


@dataclass(frozen=True)
class Manifest:
    profile: str
    kind: str
    fields: tuple[str, ...]
    rows: tuple[ManifestRow, ...]


class ManifestError(ValueError):
    """The manifest is refused; ``problems`` lists why, one sentence each."""

    def __init__(self, problems: list[str], findings: list[Finding] | None = None):
        super().__init__("\n".join(problems))
        self.problems = problems
        self.findings = findings if findings is not None else [Finding(p) for p in problems]


def _refuse(message: str, line: int | None = None) -> ManifestError:
    finding = Finding(message, line)
    return ManifestError([finding.text], [finding])


def container_type(name: str) -> str | None:
    """``zip``, ``tar`` or ``tar.gz`` judging by the file name's extension, else None."""
    lower = name.lower()
    if lower.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    if lower.endswith(".tar"):
        return "tar"
    return "zip" if lower.endswith(".zip") else None


def rewrite_url(url: str, rewrite: tuple[str, str]) -> str:
    """``url`` with the prefix ``rewrite[0]`` replaced by ``rewrite[1]`` (unchanged otherwise)."""
    old, new = rewrite
    return new + url[len(old) :] if url.startswith(old) else url


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
    allowed_schemes: tuple[str, ...] = ("http", "https"),
    base_url_rewrite: tuple[str, str] | None = None,
) -> tuple[Manifest | None, Findings]:
    """Everything found in ``data``: the manifest of its valid rows (None when ``data`` cannot
    be a manifest at all), its errors and the warnings about what Merritt accepts anyway."""
    problems = Findings()
    try:
        text = _decode(data, max_bytes, problems)
        scan = _scan(text, max_rows, problems)
    except ManifestError as e:
        problems.errors = list(e.findings)
        return None, problems
    profile, kind = _profile(scan, problems)
    fields = _fields(scan, kind, problems)
    rules = _Rules(kind, fields, tuple(s.lower() for s in allowed_schemes), base_url_rewrite)
    rows = _rows(scan, rules, problems) if fields else ()
    _check_end(scan, problems)
    return Manifest(profile, kind, fields, rows), problems


# --- decoding and scanning ---------------------------------------------------------------


_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def _decode(data: bytes | str, max_bytes: int, problems: Findings) -> str:
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > max_bytes:
        raise _refuse(f"the manifest is {size} bytes, over the limit of {max_bytes} bytes")
    if isinstance(data, str):
        return data.removeprefix("\ufeff")
    _refuse_non_text(data)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = len(_LINE_BREAK.split(data[: e.start].decode("utf-8-sig", "replace")))
        problems.add(f"not UTF-8: byte 0x{data[e.start]:02x} at offset {e.start}", line)
        return data.decode("utf-8-sig", "replace")


def _refuse_non_text(data: bytes) -> None:
    """UTF-16/32 and binary files: one clear sentence instead of a problem on every line."""
    encoding = next((name for bom, name in _WIDE_BOMS if data.startswith(bom)), None)
    if encoding:
        raise _refuse(
            f"the manifest is {encoding} (it starts with a {encoding} byte order mark); "
            "save it as UTF-8"
        )
    nul = data.find(b"\0")
    if nul < 0:
        return
    line = data[:nul].count(b"\n") + 1
    if _looks_wide(data):
        raise _refuse(
            f"NUL byte at offset {nul}: the manifest is not a text file "
            "(UTF-16 without a byte order mark, or binary); save it as UTF-8",
            line,
        )
    # A stray NUL in UTF-8 text: calling it UTF-16 would send the depositor the wrong way.
    raise _refuse(
        f"NUL byte at line {line}, offset {nul}: a UTF-8 manifest cannot hold NUL bytes; remove it"
    )


def _looks_wide(data: bytes) -> bool:
    """UTF-16/32 text of mostly ASCII: a NUL in at least every other byte of its start."""
    head = data[:256]
    pairs = [head[i : i + 2] for i in range(0, len(head) - 1, 2)]
    return bool(pairs) and sum(b"\0" in pair for pair in pairs) * 4 >= len(pairs) * 3


@dataclass
class _Scan:
    headers: dict[str, list[tuple[int, list[str]]]] = field(default_factory=dict)
    rows: list[tuple[int, str]] = field(default_factory=list)
    eof_line: int | None = None


def _scan(text: str, max_rows: int, problems: Findings) -> _Scan:
    scan = _Scan()
    raw = _LINE_BREAK.split(text)
    if raw[-1] == "":
        raw.pop()  # what follows the last line break is no line
    lines = [(n, line.strip()) for n, line in enumerate(raw, 1) if line.strip()]
    if not lines:
        raise _refuse("the manifest is empty")
    if lines[0][1].startswith("<"):
        # A login or error page served in place of the manifest: its lines mean nothing here.
        raise _refuse(
            "this is an HTML or XML document, not a checkm manifest "
            "(the URL may lead to a web page, a login or an error page)",
            lines[0][0],
        )
    lines = _declaration(lines, problems)
    for n, line in lines:
        if scan.eof_line is not None:
            problems.add("text after #%eof", n, value=line)
            return scan
        _scan_line(scan, n, line, max_rows, problems)
    if scan.eof_line is not None and scan.eof_line < len(raw):
        problems.warn(
            "blank lines after #%eof: Merritt's ingest ignores them, its validator does not",
            scan.eof_line + 1,
        )
    return scan


def _declaration(lines: list[tuple[int, str]], problems: Findings) -> list[tuple[int, str]]:
    """The lines after the ``#%checkm_0.7`` declaration, which Merritt's ingest does without;
    a declaration of another version or format still refuses the manifest."""
    n, first = lines[0]
    declared = _cells(first)[0].lower()
    if declared == "#%checkm_0.7":
        return lines[1:]
    if declared.startswith("#%checkm"):
        problems.add("not a checkm 0.7 manifest (first line must be #%checkm_0.7)", n, value=first)
        return lines[1:]
    problems.warn(
        "no #%checkm_0.7 line: Merritt's ingest does without it, its validator asks for it", n
    )
    return lines


def _scan_line(scan: _Scan, n: int, line: str, max_rows: int, problems: Findings) -> None:
    if line.startswith("#%"):
        cells = _cells(line)
        keyword = cells[0][2:].lower()
        scan.headers.setdefault(keyword, []).append((n, cells[1:]))
        if keyword == "eof":
            scan.eof_line = n
    elif line.startswith("#"):
        return  # a comment
    elif len(scan.rows) < max_rows:
        scan.rows.append((n, line))
    elif len(scan.rows) == max_rows:
        problems.add(f"more than {max_rows} rows", n)
        scan.rows.append((n, ""))  # a marker, so the problem is reported once


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.split("|")]


# --- headers -----------------------------------------------------------------------------


def _single_header(scan: _Scan, keyword: str, problems: Findings) -> tuple[int, list[str]] | None:
    found = scan.headers.get(keyword, [])
    for n, _ in found[1:]:
        problems.add(f"second #%{keyword} line (the first is line {found[0][0]})", n)
    return found[0] if found else None


def _profile(scan: _Scan, problems: Findings) -> tuple[str, str]:
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


def _fields(scan: _Scan, kind: str, problems: Findings) -> tuple[str, ...]:
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


def _check_end(scan: _Scan, problems: Findings) -> None:
    if not scan.rows:
        problems.add("no rows: the manifest lists nothing to ingest")
    if scan.eof_line is None:
        problems.add("no #%eof line: the manifest looks truncated")


# --- rows --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rules:
    kind: str
    fields: tuple[str, ...]
    schemes: tuple[str, ...]
    rewrite: tuple[str, str] | None


def _rows(scan: _Scan, rules: _Rules, problems: Findings) -> tuple[ManifestRow, ...]:
    rows = [_row(n, line, rules, problems) for n, line in scan.rows if line]
    valid = [row for row in rows if row is not None]
    if rules.kind == "object":
        _check_unique(valid, "file_name", "file name", problems)
    elif rules.kind:
        _check_unique(valid, "local_id", "mrt:localIdentifier", problems)
    return tuple(valid)


def _row(n: int, line: str, rules: _Rules, problems: Findings) -> ManifestRow | None:
    cells = _cells(line)
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
    url = _check_url(n, values.get("url"), rules, problems)
    algorithm, digest = _check_digest(n, values, problems)
    size = _check_size(n, values.get("file_size"), problems)
    name = _file_name(n, values.get("file_name"), url, problems)
    if len(problems) > before:
        return None
    fixed = {"url": url, "hash_algorithm": algorithm, "hash_value": digest, "file_size": size}
    return _make_row(n, values | fixed | {"file_name": name})


def _make_row(n: int, values: dict) -> ManifestRow:
    fields: dict[str, Any] = {attr: values.get(attr) for attr in FIELDS.values()}
    return ManifestRow(line=n, **fields)


def _check_url(n: int, url: str | None, rules: _Rules, problems: Findings) -> str:
    if not url:
        problems.add("empty nfo:fileUrl", n, "nfo:fileUrl")
        return ""
    url = rewrite_url(url, rules.rewrite) if rules.rewrite else url
    problem = _url_problem(url, rules.schemes)
    if problem:
        problems.add(problem, n, "nfo:fileUrl", url)
    return url


def _url_problem(url: str, schemes: tuple[str, ...]) -> str | None:
    allowed = ", ".join(schemes)
    if _has_control(url):
        return f"URL {url!r} contains control characters"
    parts = urlsplit(url)
    if not parts.scheme:
        return f"{url!r} is not a URL (it has no scheme; allowed: {allowed})"
    if parts.scheme.lower() not in schemes:
        return f"URL scheme {parts.scheme!r} is not allowed (allowed: {allowed})"
    if not parts.hostname:
        return f"URL {url!r} has no host"
    if userinfo_of(url):
        return (
            f"URL {redact(url)!r} holds a user name or password (user:password@host); "
            "credentials in URLs are not accepted"
        )
    return None


def _check_digest(n: int, values: dict, problems: Findings):
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


def _check_size(n: int, value: str | None, problems: Findings) -> int | None:
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


def _file_name(n: int, name: str | None, url: str, problems: Findings) -> str:
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


def file_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a file of an object, or None if it can."""
    if name.startswith("/") or _DRIVE.match(name):
        return f"file name {name!r} is absolute"
    if "\\" in name:
        return f"file name {name!r} contains a backslash"
    if _has_control(name):
        return f"file name {name!r} contains control characters"
    if ".." in name.split("/"):
        return f"file name {name!r} contains a '..' segment"
    if not normalise_file_name(name):
        return f"file name {name!r} is empty once normalised" if name else "empty file name"
    return None


def normalise_file_name(name: str) -> str:
    """``name`` without empty and ``.`` segments: ``./a//b`` -> ``a/b``."""
    return "/".join(part for part in name.split("/") if part not in ("", "."))


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) == "Cc" for ch in text)


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
