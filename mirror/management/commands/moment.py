"""``manage.py moment --at ISO [--to ISO] [--json]``: the queue as it stood at a moment
(states, holds, pauses, windows, locks), or what changed between two (mirror.moment), read from
the mirror's record; for incident review on the queue's host."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from mirror.moment import report, when
from mirror.moment.scope import EVERYTHING


class Command(BaseCommand):
    help = (
        "Show the queue as it stood at a moment (--at), or what changed between two "
        "(--at and --to), rebuilt from the recorded history."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--at",
            required=True,
            help="the moment, ISO 8601 (without a zone: the site's TIME_ZONE)",
        )
        parser.add_argument("--to", help="a later moment: print what changed from --at to it")
        parser.add_argument("--page", type=int, default=1, help="--to: the page of changed items")
        parser.add_argument("--json", action="store_true", help="print JSON, as the API answers")

    def handle(self, *args, **options):
        try:
            at = when.parse(options["at"])
            to = when.parse(options["to"]) if options["to"] else None
            if to is None:
                when.check(at)
            else:
                when.check_pair(at, to)
        except when.Refused as e:
            raise CommandError(str(e)) from None
        body = (
            report.moment(at, EVERYTHING)
            if to is None
            else report.between(at, to, EVERYTHING, options["page"])
        )
        if options["json"]:
            self.stdout.write(json.dumps(body, indent=2))
        else:
            self.stdout.write("\n".join(lines(body)))


def _states(counts: dict) -> str:
    return ", ".join(f"{s} {n}" for s, n in counts.items()) or "none"


def _released(lock: dict) -> str:
    if lock["gone_seen_at"] is None:
        return ", still held at the last read"
    return f", released between {lock['last_seen_at']} and {lock['gone_seen_at']}"


def lines(body: dict) -> list[str]:
    if "from" not in body:
        out = [f"The queue at {body['at']} (times in UTC)"]
        for kind in ("jobs", "batches"):
            c = body[kind]
            out.append(f"  {kind}: {_states(c['by_state'])}")
            if c["uncertain"]:
                out.append(
                    f"    {c['uncertain']} with changes not observed since: their state may differ"
                )
        pause = body["pause"]
        out.append(
            f"  queue: paused since {pause['since']} by {pause['by']}: {pause['reason']}"
            if pause
            else "  queue: running"
        )
        for queue, paused in body["access_pauses"].items():
            out.append(
                f"  access {queue}: paused since {paused['since']} by {paused['by']}: "
                f"{paused['reason']}"
                if paused
                else f"  access {queue}: running"
            )
        for h in body["holds"]:
            out.append(f"  hold: {h['target']} since {h['since']} by {h['by']}: {h['reason']}")
        for w in body["windows"]:
            out.append(
                f"  window {w['id']} ({w['target']}) {w['start']} to {w['end']}: {w['reason']}"
            )
        for lock in body["locks"]["held"]:
            out.append(f"  lock: {lock['path']} taken {lock['taken_at']}{_released(lock)}")
    else:
        out = [f"From {body['from']} to {body['to']} (times in UTC)"]
        for kind in ("jobs", "batches"):
            c = body[kind]
            out.append(f"  {kind} at {body['from']}: {_states(c['at_from'])}")
            out.append(f"  {kind} at {body['to']}: {_states(c['at_to'])}")
            changed = c["changed"]
            out.append(f"  {kind} that changed: {changed['total']}")
            key = "jid" if kind == "jobs" else "bid"
            for item in changed["items"]:
                out.append(f"    {item[key]} ({item['collection']}): {' → '.join(item['path'])}")
            if changed["more"]:
                out.append(f"    more: --page {changed['page'] + 1}")
        for h in body["holds"]:
            verb = "began" if h["began"] else "ended"
            out.append(f"  hold of {h['target']} {verb} {h['at']} by {h['by']}: {h['reason']}")
        for w in body["windows"]:
            verb = "began" if w["began"] else "ended"
            out.append(f"  window {w['id']} ({w['target']}) {verb} {w['at']}")
        for lock in body["locks"]["taken"]:
            out.append(f"  lock taken: {lock['path']} at {lock['taken_at']}{_released(lock)}")
        for lock in body["locks"]["released"]:
            out.append(f"  lock released: {lock['path']}{_released(lock)}")
    out.append(f"  {report.LOCKS_NOTE}")
    if body["missing"]["text"]:
        out.append(f"  missing: {body['missing']['text']}")
    return out
