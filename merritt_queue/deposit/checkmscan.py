"""The bytes of a checkm manifest turned into lines: decoded, and sorted into headers and rows.

A document that cannot be a manifest at all (too large, UTF-16/32, binary, a web page) is
refused here with one sentence, before any line is judged, so the depositor is not handed a
problem for each of its lines. What a header's values or a row's cells mean is not judged here.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

from .findings import Finding, Findings

LINE_BREAK = re.compile(r"\r\n|\r|\n")


class ManifestError(ValueError):
    """The manifest is refused; ``problems`` lists why, one sentence each."""

    def __init__(self, problems: list[str], findings: list[Finding] | None = None):
        super().__init__("\n".join(problems))
        self.problems = problems
        self.findings = findings if findings is not None else [Finding(p) for p in problems]


def _refuse(message: str, line: int | None = None) -> ManifestError:
    finding = Finding(message, line)
    return ManifestError([finding.text], [finding])


_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def decode(data: bytes | str, max_bytes: int, problems: Findings) -> str:
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > max_bytes:
        raise _refuse(f"the manifest is {size} bytes, over the limit of {max_bytes} bytes")
    if isinstance(data, str):
        return data.removeprefix("\ufeff")
    _refuse_non_text(data)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = len(LINE_BREAK.split(data[: e.start].decode("utf-8-sig", "replace")))
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
class Scan:
    headers: dict[str, list[tuple[int, list[str]]]] = field(default_factory=dict)
    rows: list[tuple[int, str]] = field(default_factory=list)
    eof_line: int | None = None


def scan_lines(text: str, max_rows: int, problems: Findings, why: str = "") -> Scan:
    """The lines sorted; rows past ``max_rows`` are refused (``why`` says by what rule)
    and kept from the row checks, which cost the most."""
    scan = Scan()
    raw = LINE_BREAK.split(text)
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
        _scan_line(scan, n, line, max_rows, problems, why)
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
    declared = split_cells(first)[0].lower()
    if declared == "#%checkm_0.7":
        return lines[1:]
    if declared.startswith("#%checkm"):
        problems.add("not a checkm 0.7 manifest (first line must be #%checkm_0.7)", n, value=first)
        return lines[1:]
    problems.warn(
        "no #%checkm_0.7 line: Merritt's ingest does without it, its validator asks for it", n
    )
    return lines


def _scan_line(scan: Scan, n: int, line: str, max_rows: int, problems: Findings, why: str) -> None:
    if line.startswith("#%"):
        cells = split_cells(line)
        keyword = cells[0][2:].lower()
        scan.headers.setdefault(keyword, []).append((n, cells[1:]))
        if keyword == "eof":
            scan.eof_line = n
    elif line.startswith("#"):
        return  # a comment
    elif len(scan.rows) < max_rows:
        scan.rows.append((n, line))
    elif len(scan.rows) == max_rows:
        problems.add(f"more than {max_rows} rows{why}", n)
        scan.rows.append((n, ""))  # a marker, so the problem is reported once


def split_cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.split("|")]
