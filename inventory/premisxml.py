"""An object's history (``inventory.provenance``, in the words of ``premisterms``) as a
PREMIS 3.0 document.

The objects: the intellectual entity named by the ARK, one representation per version
(``ARK/vN``) and the version's files (``ARK/vN/name``) with the size and the digests the
inventory holds; then the events, oldest first, and the agents they name. The document
validates against the Library of Congress schema kept in ``schemas/`` (the tests check it).
"""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from inventory import premisterms as pv
from inventory.models import InventoryFile
from inventory.provenance import History

NS = "http://www.loc.gov/premis/v3"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
SCHEMA = Path(__file__).parent / "schemas" / "premis-v3-0.xsd"
SCHEMA_LOCATION = f"{NS} http://www.loc.gov/standards/premis/v3/premis.xsd"
# The inventory's digest columns and the names the LoC cryptographic hash vocabulary gives.
DIGESTS = (("md5", "MD5"), ("sha256", "SHA-256"))
HASH_URIS = {
    "MD5": "http://id.loc.gov/vocabulary/preservation/cryptographicHashFunctions/md5",
    "SHA-256": "http://id.loc.gov/vocabulary/preservation/cryptographicHashFunctions/sha256",
}
EVENT_TYPE_AUTHORITY = "http://id.loc.gov/vocabulary/preservation/eventType"


def _q(name: str) -> str:
    return f"{{{NS}}}{name}"


def _add(parent, name: str, text: str | None = None, **attrs):
    el = etree.SubElement(parent, _q(name), {k: v for k, v in attrs.items() if v})
    if text is not None:
        el.text = _clean(text)
    return el


def _clean(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold (a depositor's message may)."""
    return "".join(
        c
        for c in str(text)
        if c in "\t\n\r"
        or "\x20" <= c <= "\ud7ff"
        or "\ue000" <= c <= "\ufffd"
        or c >= "\U00010000"
    )


def document(h: History) -> bytes:
    root = etree.Element(_q("premis"), nsmap={"premis": NS, "xsi": XSI}, version="3.0")
    root.set(f"{{{XSI}}}schemaLocation", SCHEMA_LOCATION)
    _entity(root, h)
    for v in h.versions:
        _representation(root, h.obj.ark, v.number)
        for f in v.files.order_by("name").iterator():
            _file(root, h.obj.ark, v.number, f)
    for e in h.events:
        _event(root, e)
    for a in h.agents:
        _agent(root, a)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)


def _identifier(parent, prefix: str, id_type: str, value: str) -> None:
    el = _add(parent, f"{prefix}Identifier")
    _add(el, f"{prefix}IdentifierType", id_type)
    _add(el, f"{prefix}IdentifierValue", value)


def _object(root, kind: str, id_type: str, value: str):
    el = _add(root, "object")
    el.set(f"{{{XSI}}}type", f"premis:{kind}")
    _identifier(el, "object", id_type, value)
    return el


def _relationship(el, sub_type: str, id_type: str, value: str) -> None:
    rel = _add(el, "relationship")
    _add(rel, "relationshipType", "structural")
    _add(rel, "relationshipSubType", sub_type)
    related = _add(rel, "relatedObjectIdentifier")
    _add(related, "relatedObjectIdentifierType", id_type)
    _add(related, "relatedObjectIdentifierValue", value)


def _entity(root, h: History) -> None:
    el = _object(root, "intellectualEntity", pv.ARK, h.obj.ark)
    if h.obj.title:
        _add(el, "originalName", h.obj.title)
    for v in h.versions:
        _relationship(el, "is represented by", pv.VERSION, pv.version_id(h.obj.ark, v.number))


def _representation(root, ark: str, number: int) -> None:
    el = _object(root, "representation", pv.VERSION, pv.version_id(ark, number))
    _relationship(el, "represents", pv.ARK, ark)


def _file(root, ark: str, number: int, f: InventoryFile) -> None:
    el = _object(root, "file", pv.FILE, pv.file_id(ark, number, f.name))
    chars = _add(el, "objectCharacteristics")
    _add(chars, "compositionLevel", "0")
    for column, algorithm in DIGESTS:
        if value := getattr(f, column):
            fixity = _add(chars, "fixity")
            _add(fixity, "messageDigestAlgorithm", algorithm, valueURI=HASH_URIS[algorithm])
            _add(fixity, "messageDigest", value)
            _add(fixity, "messageDigestOriginator", pv.SOFTWARE)
    _add(chars, "size", str(f.size))
    fmt = _add(chars, "format")
    designation = _add(fmt, "formatDesignation")
    _add(designation, "formatName", f.mime_type or "unknown")
    _add(el, "originalName", f.name)
    _relationship(el, "is included in", pv.VERSION, pv.version_id(ark, number))


def _event(root, e: pv.Event) -> None:
    el = _add(root, "event")
    _identifier(el, "event", "merritt-queue", e.ident)
    authority = {"authority": "eventType", "authorityURI": EVENT_TYPE_AUTHORITY} if e.uri else {}
    _add(el, "eventType", e.kind, valueURI=e.uri, **authority)
    _add(el, "eventDateTime", e.at.isoformat())
    info = _add(el, "eventDetailInformation")
    _add(info, "eventDetail", e.detail)
    if e.outcome or e.outcome_note:
        outcome = _add(el, "eventOutcomeInformation")
        if e.outcome:
            _add(outcome, "eventOutcome", e.outcome)
        if e.outcome_note:
            detail = _add(outcome, "eventOutcomeDetail")
            _add(detail, "eventOutcomeDetailNote", e.outcome_note)
    for agent, role in e.agents:
        link = _add(el, "linkingAgentIdentifier")
        _add(link, "linkingAgentIdentifierType", agent.id_type)
        _add(link, "linkingAgentIdentifierValue", agent.name)
        _add(link, "linkingAgentRole", role, valueURI=pv.role_uri(role))
    for obj in e.objects:
        link = _add(el, "linkingObjectIdentifier")
        _add(link, "linkingObjectIdentifierType", obj.id_type)
        _add(link, "linkingObjectIdentifierValue", obj.value)
        if obj.role:
            _add(link, "linkingObjectRole", obj.role)


def _agent(root, a: pv.Agent) -> None:
    el = _add(root, "agent")
    _identifier(el, "agent", a.id_type, a.name)
    _add(el, "agentName", pv.SOFTWARE if a.kind == "software" and a.version else a.name)
    _add(el, "agentType", a.kind)
    if a.version:
        _add(el, "agentVersion", a.version)
    if a.note:
        _add(el, "agentNote", a.note)
