"""``manage.py preflight FILE|URL --profile P``: the pre-flight summary of a submission
(``batches.preflight``), nothing submitted. A URL is fetched as ``check_manifest`` fetches
it, under the network policy."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from batches.management.commands.check_manifest import _fetched, _read
from batches.preflight import summarise
from merritt_queue.deposit.urltext import redact


class Command(BaseCommand):
    help = (
        "Print the pre-flight summary of a manifest or a single file (a local file or an "
        "http(s) URL) as if submitted with --profile: rows, declared and HEAD-measured "
        "bytes, the URLs tried, duplicate local ids, the objects it would update, the "
        "jobs of other batches already at work on them and the predicted finish."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", help="a manifest or file, or the http(s) URL of one")
        parser.add_argument("--profile", required=True, help="the profile to submit with")
        parser.add_argument(
            "--collection", default="", help="the collection, when not the profile's own"
        )
        parser.add_argument(
            "--exclude-batch", default="", help="a batch whose own jobs are not in flight"
        )
        parser.add_argument(
            "--head-sample",
            type=int,
            default=None,
            help="how many URLs to ask by HEAD (default MQ_PREFLIGHT_HEAD_SAMPLE)",
        )
        parser.add_argument("--json", action="store_true", help="print the summary as JSON")

    def handle(self, *args, source: str, profile: str, **opts):
        limit = settings.MQ_MAX_MANIFEST_BYTES
        data = _fetched(source, limit) if "://" in source else _read(Path(source))
        try:
            found = summarise(
                data,
                profile=profile,
                collection=opts["collection"],
                exclude_bid=opts["exclude_batch"],
                head_sample=opts["head_sample"],
            )
        except LookupError as e:
            raise CommandError(str(e)) from None
        if opts["json"]:
            self.stdout.write(json.dumps(found, indent=2))
            return
        self.stdout.write(f"{redact(source)}: {text(found)}")
        for line in details(found):
            self.stdout.write(line)


def text(s: dict) -> str:
    return (
        f"{s['kind'] or 'unreadable'}, {s['rows']} row(s), {s['jobs']} job(s), declared "
        f"{s['declared_bytes']} bytes ({s['rows_without_size']} row(s) without a size), "
        f"measured {s['measured_bytes']} bytes over {s['measured_rows']} URL(s), "
        f"{s['problems']} problem(s)"
    )


def details(s: dict) -> list[str]:
    finish = s["predicted_finish"]
    when = f"at {finish['at']}" if finish["at"] else "no forecast"
    lines = [f"predicted finish: {when} ({finish['basis']})"]
    for x in s["sample"]:
        answer = x["status"] if x["status"] is not None else "no answer"
        size = x["bytes"] if x["bytes"] is not None else "unknown"
        problem = f": {x['error']}" if x["error"] else ""
        lines.append(f"HEAD line {x['line']} {x['url']}: {answer}, {size} bytes{problem}")
    for d in s["duplicate_local_ids"]:
        lines.append(f"duplicate local id {d['local_id']!r} on lines {d['lines']}")
    for u in s["updates"]:
        lines.append(f"update: line {u['line']} {u['local_id']!r} -> {u['ark']} {u['title']!r}")
    for j in s["in_flight"]:
        lines.append(
            f"in flight: line {j['line']} {j['local_id'] or j['ark']!r} in job {j['jid']} "
            f"of batch {j['bid']} ({j['status']})"
        )
    return lines
