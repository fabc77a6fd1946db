"""``manage.py check_manifest FILE|URL``: every error and warning of a manifest, nothing
submitted. A URL is fetched as the workers fetch manifests, under the same network policy."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from merritt_queue.deposit.manifestcheck import check_manifest, safe_value
from merritt_queue.deposit.urltext import redact
from merritt_queue.services.errors import ServiceError
from pipeline.capacity import batch_row_limit
from pipeline.services import build_fetcher


class Command(BaseCommand):
    help = (
        "Check a checkm manifest (a local file or an http(s) URL) as Merritt would judge it: "
        "list every error and warning with its line, field and value. Exit code 0 when the "
        "manifest is valid (warnings or not), 1 when it has errors."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", help="a manifest file, or the http(s) URL of one")

    def handle(self, *args, source: str, **opts):
        limit = settings.MQ_MAX_MANIFEST_BYTES
        data = _fetched(source, limit) if "://" in source else _read(Path(source))
        report = check_manifest(data, max_bytes=limit, max_batch_rows=batch_row_limit())
        verdict = "valid" if report.valid else "refused"
        self.stdout.write(
            f"{redact(source)}: {verdict}, {report.rows} row(s), "
            f"{len(report.errors)} error(s), {len(report.warnings)} warning(s)"
        )
        for label, findings in (("error", report.errors), ("warning", report.warnings)):
            for f in findings:
                where = f"line {f.line}" if f.line is not None else "manifest"
                field = f" {f.field}" if f.field else ""
                value = f" {safe_value(f.value)!r}" if f.value is not None else ""
                self.stdout.write(f"{label}: {where}{field}{value}: {f.message}")
        if not report.valid:
            sys.exit(1)


def _read(path: Path) -> bytes:
    if not path.is_file():
        raise CommandError(f"{path} is not a readable file")
    return path.read_bytes()


def _fetched(url: str, limit: int) -> bytes:
    fetcher = build_fetcher()
    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "manifest.checkm"
        try:
            fetcher.download(url, dest, max_bytes=limit)
        except ServiceError as e:  # the network policy's refusals are FetchErrors too
            raise CommandError(f"{redact(url)} could not be fetched: {e}") from None
        return dest.read_bytes()
