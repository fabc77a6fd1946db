"""Merritt's access queue from the shell, as the pages show and steer it.

``manage.py access list [--queue small|large] [--status Failed ...]``: every request as
ZooKeeper holds it now; ``access show small/qid0000000042``: one, with its token and history.
``access requeue|delete|cleanup KEY... --user NAME --reason TEXT [--dry-run]``,
``access pause|unpause small|large --user NAME --reason TEXT [--dry-run]`` and
``access cleanup --older-than 7d --user NAME --reason TEXT [--dry-run]`` (every finished
request that old): each item is judged and printed as the confirmation page lists it, then,
without ``--dry-run``, taken as one admin action by ``--user`` at the versions just printed
(``accessui.steer``): the same role, collection scope, version guard and audit.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accessui import steer
from merritt_queue.core import access
from merritt_queue.project.runtime import get_store
from steering.maintenance.cleanup import age

ACTS = ("requeue", "delete", "cleanup", "pause", "unpause")


class Command(BaseCommand):
    help = "List, show and steer Merritt's access (assembly) queue."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(
            dest="verb", required=True, help="list, show, " + ", ".join(ACTS)
        )
        listing = sub.add_parser("list", help="every request, as ZooKeeper holds it now")
        listing.add_argument("--queue", choices=access.QUEUES, help="only this queue")
        listing.add_argument(
            "--status",
            action="append",
            choices=[s.value for s in access.AccessStatus],
            help="only requests in this status (may be given again)",
        )
        show = sub.add_parser("show", help="one request: its status, token and history")
        show.add_argument("key", help="e.g. small/qid0000000042")
        for verb in ACTS:
            act = sub.add_parser(verb, help=f"{verb} (judged and printed first)")
            if verb == "cleanup":
                act.add_argument("keys", nargs="*", help="requests (default: every finished one)")
                act.add_argument("--older-than", default="", help="e.g. 7d, 12h; 0 for any age")
            else:
                what = "queue (small or large)" if verb in ("pause", "unpause") else "request key"
                act.add_argument("keys", nargs="+", help=f"each {what}")
            act.add_argument("--user", required=True, help="who acts (recorded in the audit)")
            act.add_argument("--reason", default="", help="why (required unless --dry-run)")
            act.add_argument("--dry-run", action="store_true", help="only say what it would do")

    def handle(self, *args, verb: str, **options):
        if verb == "list":
            return self._list(options["queue"], options["status"])
        if verb == "show":
            return self._show(options["key"])
        return self._act(verb, **options)

    def _list(self, queue: str | None, statuses: list[str] | None) -> None:
        client = get_store(init=False).client
        items = access.read_queues(client, [queue] if queue else access.QUEUES)
        paused = access.paused(client)
        for q in [queue] if queue else access.QUEUES:
            self.stdout.write(f"{q} queue: {'paused' if paused[q] else 'running'}")
        for item in items:
            if statuses and item.status not in statuses:
                continue
            lock = " locked" if item.locked else ""
            self.stdout.write(
                f"{item.key}  {item.status or 'unreadable'} (v{item.status_version}){lock}  "
                f"{item.size if item.size is not None else '-'} bytes  node "
                f"{item.delivery_node if item.delivery_node is not None else '-'}  "
                f"{item.last_modified}  {item.message}".rstrip()
            )

    def _show(self, key: str) -> None:
        try:
            queue, qid = access.split_key(key)
        except ValueError as e:
            raise CommandError(str(e)) from None
        item = access.read_item(get_store(init=False).client, queue, qid)
        if item is None:
            raise CommandError(f"no access request {key}")
        self.stdout.write(
            f"{item.key}: {item.status or 'unreadable'} (version {item.status_version})"
        )
        for problem in item.problems:
            self.stdout.write(f"  problem: {problem}")
        self.stdout.write(f"  locked: {'yes' if item.locked else 'no'}")
        self.stdout.write(f"  last change: {item.last_modified or '-'}")
        self.stdout.write(f"  message: {item.message or '-'}")
        self.stdout.write(f"  token: {json.dumps(item.token, sort_keys=True)}")
        for e in item.history.entries:
            self.stdout.write(
                f"  v{e.version} {e.at} {e.from_status or '-'} -> {e.to_status} by {e.by}"
                f"{': ' + e.message if e.message else ''}"
            )

    def _act(self, verb: str, *, keys, user, reason, dry_run, **options) -> None:
        person = get_user_model().objects.filter(username=user, is_active=True).first()
        if person is None:
            raise CommandError(f"no active user {user!r}")
        if not dry_run and not reason.strip():
            raise CommandError("--reason is required (it is recorded in the audit trail)")
        older_than = _age(options.get("older_than", ""), verb, keys)
        try:
            judged = steer.judge(person, verb, list(keys), older_than)
        except steer.Refused as e:
            raise CommandError(str(e)) from None
        for name in judged.missing:
            self.stdout.write(f"{name}: no such {'queue' if verb.endswith('pause') else 'request'}")
        for p in judged.items:
            said = "applies" if p.applies else "does not apply"
            why = f": {p.why}" if p.why else ""
            self.stdout.write(f"{p.target.id} ({p.target.status}, v{p.target.version}) {said}{why}")
        if dry_run or not judged.applying:
            self.stdout.write("Dry run: nothing was changed." if dry_run else "Nothing to do.")
            return
        items = [(p.target.id, p.target.version) for p in judged.applying]
        try:
            record = steer.take(person, verb, items, reason, uuid.uuid4().hex)
        except steer.Refused as e:
            raise CommandError(str(e)) from None
        for row in steer.outcome(record):
            self.stdout.write(f"{row['item']}: {row['result']} {row['detail']}".rstrip())
        self.stdout.write(
            f"admin action {record.pk}: {record.done} done, {record.skipped} skipped, "
            f"{record.failed} failed"
        )


def _age(text: str, verb: str, keys) -> timedelta | None:
    if verb != "cleanup":
        return None
    if not text:
        if not keys:
            raise CommandError("cleanup of every finished request needs --older-than (e.g. 7d)")
        return None
    if text.strip() == "0":
        return timedelta(0)
    try:
        return age(text)
    except ValueError as e:
        raise CommandError(str(e)) from None
