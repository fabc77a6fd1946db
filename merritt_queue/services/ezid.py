"""Minting ARKs through EZID and keeping their metadata there, as Merritt's ingest does
(mrt-ingest's MintUtil and HandlerMinter).

What EZID is told, in one ANVL body (``text/plain; charset=UTF-8``):

- ``erc``: the whole ERC record (who, what, when, and a ``where`` for the ARK and one for the
  object's local ids), not separate ``erc.*`` elements: EZID's ERC profile has no
  ``erc.where``, and Merritt sends the record;
- ``mrt.creator``: the profile's context; ``_owner``: the profile's EZID co-owner;
- ``_target``: the object's landing page (``target_pattern``), once the ARK is known;
- ``_status: reserved`` and ``_export: no`` for an administrative object.

Guarantees:

- ``mint`` sends one POST to ``/shoulder/<shoulder>`` and never retries on its own: a POST
  whose answer was lost may have minted already, so repeating it is the caller's decision
  (``retryable``). EZID keeps no tokens: a re-run after such a loss mints a second ARK. With
  ``tokens``, an ARK EZID did hand back is kept under the job's token before ``mint``
  returns it, so a re-run whose step never saved it (a worker cut off between the answer
  and the save) gets it back instead of minting again (``minttokens.py``).
- ``describe`` reads the identifier (GET ``/id/<ark>``) and writes only when what EZID holds
  differs from what Merritt would send: POST ``/id/<ark>`` with every element, or, for an
  identifier EZID does not know (one minted elsewhere), PUT ``/id/<ark>?update_if_exists=yes``
  as Merritt's ingest falls back to. It is idempotent: after a reply lost on the way back,
  calling it again finds the change made and sends nothing; if the change was not made, it
  sends the same body again. A title, creator or date the new version does not give is kept
  as EZID has it, as Merritt keeps the previous version's.
"""

from __future__ import annotations

import re
from dataclasses import replace
from string import Formatter
from urllib.parse import quote

import requests

from . import calllog, httputil, transport
from .errors import MinterError
from .minter import NO_CITATION, Citation, parse_shoulder
from .minttokens import MintTokens

DEFAULT_TARGET_PATTERN = "https://merritt.cdlib.org/m/{ark}"
_KERNEL = ("who", "what", "when")
_LINE_BREAK = re.compile(r"\s*(?:\r\n|\r|\n)\s*")


def anvl_escape(text: str, *, name: bool = False) -> str:
    """EZID's ANVL escaping: ``%`` and line ends always, ``:`` in element names too."""
    pattern = "[%:\r\n]" if name else "[%\r\n]"
    return re.sub(pattern, lambda m: f"%{ord(m.group(0)):02X}", text)


def anvl_unescape(text: str) -> str:
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def anvl(metadata: dict[str, str]) -> str:
    """An ANVL body; elements with an empty value are left out."""
    return "\n".join(
        f"{anvl_escape(k, name=True)}: {anvl_escape(v)}" for k, v in metadata.items() if v
    )


def parse_anvl(text: str) -> dict[str, str]:
    """EZID's ANVL answer (after its status line) as decoded names and values."""
    elements = {}
    for line in text.splitlines():
        name, colon, value = line.partition(":")
        if colon and name.strip():
            elements[anvl_unescape(name.strip())] = anvl_unescape(value.strip())
    return elements


def target_pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot make a landing page URL; None when it can (or is empty)."""
    if not pattern:
        return None
    try:
        fields = {name for _, name, _, _ in Formatter().parse(pattern) if name is not None}
    except ValueError as e:
        return f"it is not a format pattern ({e})"
    if fields != {"ark"}:
        return "it must name {ark} (the ARK, percent-encoded) and no other field"
    if not re.match(r"https?://[^/{}]+", pattern):
        return "it must be an http or https URL with a host"
    return None


def landing_page(pattern: str, ark: str) -> str:
    """The object's landing page: ``pattern`` with ``{ark}`` percent-encoded whole, as Merritt
    encodes it (``ark%3A%2F13030%2F...``); ANVL escaping then doubles each ``%`` on the wire,
    as Merritt's double encoding does."""
    return pattern.format(ark=quote(ark, safe="")) if pattern else ""


def erc_record(citation: Citation, ark: str = "") -> str:
    """The ERC record Merritt sends as ``erc``: one ``label: value`` line each, who, what,
    when, then ``where`` the ARK and ``where`` each other place; what is missing is left out.
    A line break inside a value becomes an ERC continuation line, so the record stays one."""
    rows = [(label, getattr(citation, label)) for label in _KERNEL]
    rows += [("where", w) for w in _dedup([ark, *citation.where])]
    return "".join(f"{label}: {_fold(value)}\n" for label, value in rows if value.strip())


def erc_rows(record: str) -> list[tuple[str, str]]:
    """An ERC record's (label, value) pairs in order, continuation lines joined, as EZID
    reads the record (its first record only)."""
    rows: list[tuple[str, str]] = []
    for line in record.splitlines():
        if not line.strip():
            if rows:
                break
            continue
        if line[0].isspace() and rows:
            label, value = rows[-1]
            rows[-1] = (label, f"{value} {line.strip()}".strip())
        elif ":" in line:
            label, _, value = line.partition(":")
            rows.append((label.strip().lower(), value.strip()))
    return rows


def _fold(value: str) -> str:
    return _LINE_BREAK.sub("\n    ", value.strip())


def _dedup(values: list[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


class EzidMinter:
    """EZID's API at ``base_url``: mint on a shoulder, and keep each identifier's metadata."""

    def __init__(
        self,
        base_url: str,
        username: str,
        password: str,
        timeout: float = 30,
        session_factory=requests.Session,
        target_pattern: str = DEFAULT_TARGET_PATTERN,
        tokens: MintTokens | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password
        self.timeout = timeout
        self.session_factory = session_factory
        self.target_pattern = target_pattern
        self.tokens = tokens

    def mint(self, shoulder: str, *, citation: Citation = NO_CITATION, token: str = "") -> str:
        """A new ARK on ``shoulder``, told what Merritt tells EZID when minting: the ARK
        (and so its landing page) is not known yet, so neither is sent; ``describe`` adds
        them. With ``tokens``, ``token``'s ARK once minted is handed back again until it is
        forgotten (see the module's guarantees)."""
        parse_shoulder(shoulder)
        if token and self.tokens and (kept := self.tokens.recall(shoulder, token)):
            return kept
        url = f"{self.base_url}/shoulder/{quote(shoulder, safe=':/')}"
        resp = self._send("POST", url, anvl(self._elements(citation, "")))
        text = self._answer(resp, f"could not mint on {shoulder}", ok=(201,))
        ark = anvl_unescape(text.split("|")[0].strip())
        if not ark.startswith(shoulder):
            raise MinterError(f"EZID minted {ark!r}, which is not on shoulder {shoulder}")
        if token and self.tokens:
            return self.tokens.keep(shoulder, token, ark)
        return ark

    def forget(self, shoulder: str, token: str) -> None:
        if self.tokens:
            self.tokens.forget(shoulder, token)

    def describe(self, ark: str, citation: Citation) -> bool:
        """Bring ``ark``'s metadata at EZID in line with ``citation`` (see the module's
        guarantees); True when something was sent."""
        url = f"{self.base_url}/id/{quote(ark, safe=':/')}"
        held = self._read(url, ark)
        if held is None:
            body = anvl(self._elements(citation, ark))
            resp = self._send("PUT", f"{url}?update_if_exists=yes", body)
            self._answer(resp, f"could not create {ark}", ok=(200, 201))
            return True
        wanted = self._elements(_carry_over(citation, held.get("erc", "")), ark)
        if held.get("_status", "reserved") != "reserved":
            wanted.pop("_status", None)  # EZID never takes a public identifier back
        if not _differs(wanted, held):
            return False
        resp = self._send("POST", url, anvl(wanted))
        self._answer(resp, f"could not update {ark}", ok=(200,))
        return True

    def _elements(self, citation: Citation, ark: str) -> dict[str, str]:
        """The elements Merritt sends, in its order; empty ones are left out by ``anvl``."""
        elements = {
            "erc": erc_record(citation, ark),
            "mrt.creator": citation.creator,
            "_target": landing_page(self.target_pattern, ark) if ark else "",
            "_owner": citation.owner,
        }
        if citation.admin:
            elements |= {"_status": "reserved", "_export": "no"}
        return {k: v for k, v in elements.items() if v}

    def _read(self, url: str, ark: str) -> dict[str, str] | None:
        """The identifier's elements; None when EZID has no such identifier."""
        resp = self._send("GET", url, None)
        if resp.status_code == 400 and "no such identifier" in _first_line(resp):
            return None
        text = self._answer(resp, f"could not read {ark}", ok=(200,))
        if anvl_unescape(text.strip()).lower() != ark.lower():
            raise MinterError(f"EZID answered for {text.strip()!r} when asked for {ark}")
        body = resp.content.decode("utf-8", "replace")
        return parse_anvl(body.partition("\n")[2])

    def _send(self, method: str, url: str, body: str | None) -> requests.Response:
        headers = {"Accept": "text/plain"}
        if body is not None:
            headers["Content-Type"] = "text/plain; charset=UTF-8"
        return calllog.logged(
            "ezid-call",
            method,
            url,
            lambda: transport.call_operator(
                self.session_factory,
                method,
                url,
                error=MinterError,
                who=f"EZID at {self.base_url}",
                data=None if body is None else body.encode("utf-8"),
                headers=headers,
                auth=(self.username, self.password),
                timeout=self.timeout,
            ),
        )

    def _answer(self, resp: requests.Response, failed: str, ok: tuple[int, ...]) -> str:
        """What follows ``success:``; MinterError (retryable on 5xx, 408, 429) otherwise."""
        first = _first_line(resp)
        if resp.status_code in ok and first.startswith("success:"):
            return first.removeprefix("success:").strip()
        said = anvl_unescape(first.removeprefix("error:").strip()) or "(no message)"
        status = httputil.status_text(resp)
        if resp.status_code == 401:
            raise MinterError(
                f"EZID refused the credentials of user {self.username!r} ({status}): {said}"
            )
        raise MinterError(
            f"EZID {failed} ({status}): {said}",
            retryable=httputil.is_retryable_status(resp.status_code),
        )


def _first_line(resp: requests.Response) -> str:
    text = resp.content.decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else ""


def _carry_over(citation: Citation, held_erc: str) -> Citation:
    """``citation`` with what it does not give taken from the record EZID holds: the kernel
    elements left blank, and every place already named, the new ones after them (Merritt
    appends a version's local ids to the object's)."""
    held = erc_rows(held_erc)
    kernel = {label: value for label, value in held if label in _KERNEL and value}
    places = [value for label, value in held if label == "where"]
    # Merritt names several local ids in one ``where``, separated by ``;``.
    named = {part.strip() for place in places for part in place.split(";")}
    return replace(
        citation,
        who=citation.who or kernel.get("who", ""),
        what=citation.what or kernel.get("what", ""),
        when=citation.when or kernel.get("when", ""),
        where=tuple(_dedup([*places, *(w for w in citation.where if w not in named)])),
    )


def _differs(wanted: dict[str, str], held: dict[str, str]) -> bool:
    for name, value in wanted.items():
        if name == "erc":
            if erc_rows(value) != erc_rows(held.get("erc", "")):
                return True
        elif held.get(name) != value:
            return True
    return False
