"""A submitted manifest judged at the door, by the check page's own checker.

Guarantees: a submission of a manifest type is accepted only when its manifest, uploaded or
linked, has no error the check page would list and is of the kind its type takes; otherwise
``ManifestRefused`` lists every error, as the check API lists them, and nothing is written.
A linked manifest is fetched now through the workers' fetch path (network policy,
MQ_MAX_MANIFEST_BYTES) with one attempt of at most ``DOOR_SECONDS``, for a person waits;
one that cannot be read now is refused, saying why, rather than accepted only to fail.
The batch handler fetches it again when it plans the jobs (Merritt's way): what was judged
here is what the link held at the door.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings

from merritt_queue.core.planning import MANIFEST_KIND, type_to_pick
from merritt_queue.deposit.manifestcheck import check_manifest, safe_value
from merritt_queue.services.errors import ServiceError
from pipeline.capacity import batch_row_limit
from pipeline.services import door_fetcher
from pipeline.submitted import SubmissionError, Upload

DOOR_SECONDS = 20.0


class ManifestRefused(SubmissionError):
    """``report`` is the check API's answer for the manifest: valid, errors, warnings,
    profile, rows."""

    def __init__(self, report: dict):
        super().__init__([problem_text(e) for e in report["errors"]], status=400)
        self.report = report


def problem_text(item: dict) -> str:
    """One finding of a report as one line: where, then what."""
    where = ", ".join(str(p) for p in (item["line"] and f"line {item['line']}", item["field"]) if p)
    return f"{where}: {item['message']}" if where else item["message"]


def fetches_a_manifest(clean: dict) -> bool:
    return clean.get("type") in MANIFEST_KIND


def judge(clean: dict, upload: Upload | None) -> bytes | None:
    """Raise ManifestRefused unless ``clean``'s manifest (``upload``, else its
    ``payload_url``) would be planned into jobs; other types pass untouched (None). Answers
    the bytes judged, for the arrival's summary to read rather than fetch a link again."""
    if not fetches_a_manifest(clean):
        return None
    kind = clean["type"]
    data = _uploaded(upload) if upload else _linked(clean["payload_url"])
    limit = settings.MQ_MAX_MANIFEST_BYTES
    report = check_manifest(data, max_bytes=limit, max_batch_rows=batch_row_limit())
    shown = report.as_json()
    if report.kind and (pick := type_to_pick(kind, report.kind)):
        shown["errors"].append(_item(pick, "type", kind))
    if shown["errors"]:
        shown["valid"] = False
        raise ManifestRefused(shown)
    return data


def _uploaded(upload: Upload) -> bytes:
    """The upload's first bytes, one past the limit so the checker says it is too long;
    the file is left at its start to be saved."""
    upload.file.seek(0)
    data = upload.file.read(settings.MQ_MAX_MANIFEST_BYTES + 1)
    upload.file.seek(0)
    return data


def _linked(url: str) -> bytes:
    limit = settings.MQ_MAX_MANIFEST_BYTES
    with tempfile.TemporaryDirectory(prefix="mq-door-") as folder:
        dest = Path(folder) / "manifest.checkm"
        try:
            door_fetcher(DOOR_SECONDS).download(url, dest, max_bytes=limit)
        except ServiceError as e:
            message = (
                f"the manifest cannot be read now: {safe_value(str(e))}; check the link and "
                "submit again, or upload the manifest instead"
            )
            report = {"valid": False, "errors": [_item(message, "payload_url", url)]}
            raise ManifestRefused(report | {"warnings": [], "profile": "", "rows": 0}) from None
        return dest.read_bytes()


def _item(message: str, field: str, value: str) -> dict:
    return {"line": None, "field": field, "value": safe_value(value), "message": message}
