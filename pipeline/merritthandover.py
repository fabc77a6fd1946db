"""What a ``merritt-queue`` job's Processing hands Merritt's storage and inventory.

mrt-ingest's HandlerTransfer and ProcessConsumer leave a job in Storing with two nodes
written, and so does this: ``store`` (``manifest_url``, ``mode``, ``delete``), which
storage's consumer reads, and ``inventory`` (``manifest_url``, ``mode``), which
inventory's consumer reads once storage moved the job to Recording. The store manifest is
an ``mrt-add-manifest`` served, with every file it lists, at this job's signed URLs
(``contentlinks``); inventory's is storage's own object manifest,
``<MERRITT_STORAGE_URL>/manifest/<node>/<ARK percent-encoded>``, whose last segment is the
key of inventory's object lock. Both nodes are written in the multi that moves the job
to Storing and lets go of it (the runner's commit of Processing's success).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from django.conf import settings

from merritt_queue.deposit.addmanifest import add_manifest
from pipeline import contentlinks


def storage_object_manifest_url(node: str, ark: str) -> str:
    base = settings.MERRITT_STORAGE_URL.rstrip("/")
    return f"{base}/manifest/{node}/{quote(ark, safe='')}"


def store_data(
    jid: str, work: Path, entries: list[dict], *, node: str, ark: str, mode: str, delete: str
) -> dict:
    text = add_manifest(entries, lambda name: contentlinks.signed_url(jid, name))
    (work / contentlinks.MANIFEST_NAME).write_text(text, encoding="utf-8")
    return {
        "store": {
            "manifest_url": contentlinks.signed_url(jid, contentlinks.MANIFEST_NAME),
            "mode": mode,
            "delete": delete,
        },
        "inventory": {"manifest_url": storage_object_manifest_url(node, ark), "mode": ""},
    }
