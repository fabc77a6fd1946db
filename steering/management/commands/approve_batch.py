"""Approve or reject a batch that awaits approval, or list those that do.

``python manage.py approve_batch --list [--user NAME]``
``python manage.py approve_batch BID --user NAME --reason TEXT [--reject] [--status-version N]``

A decision is the page's Approve or Reject (``steering.actions.decisions``): ``--user`` needs
the operator role for the batch's collection, the reason is recorded and sent to the
depositor, and a batch changed since ``--status-version`` (by default the version the mirror shows)
is left as it is.
"""

from __future__ import annotations

import uuid

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from steering.actions import decisions


class Command(BaseCommand):
    help = "Approve (or --reject) a batch awaiting approval; --list shows those that await it."

    def add_arguments(self, parser):
        parser.add_argument("bid", nargs="?", help="the batch, e.g. bid0000000008")
        parser.add_argument("--list", action="store_true", help="list the awaiting batches")
        parser.add_argument("--user", default="", help="who acts (recorded in the audit)")
        parser.add_argument("--reason", default="", help="why (required; the depositor reads it)")
        parser.add_argument("--reject", action="store_true", help="reject instead of approving")
        parser.add_argument(
            "--status-version", type=int, dest="seen", help="the status version you saw"
        )

    def handle(self, *args, bid, list, user, reason, reject, seen, **options):
        person = self._person(user, required=not list)
        if list:
            return self._list(person)
        if not bid:
            raise CommandError("name the batch (or give --list)")
        try:
            done = decisions.decide(
                person,
                bid,
                approve=not reject,
                reason=reason,
                token=uuid.uuid4().hex,
                version=seen,
            )
        except decisions.Refused as e:
            raise CommandError(str(e)) from None
        verb = "rejected" if reject else "approved"
        if done.result != "done":
            raise CommandError(f"{bid} was not {verb} ({done.result}): {done.detail}")
        self.stdout.write(f"{bid} {verb}: now {done.status} (admin action {done.record.pk})")

    def _person(self, name: str, *, required: bool):
        if not name:
            if required:
                raise CommandError("--user is required (it is recorded in the audit trail)")
            return None
        person = get_user_model().objects.filter(username=name, is_active=True).first()
        if person is None:
            raise CommandError(f"no active user {name!r}")
        return person

    def _list(self, person) -> None:
        rows = decisions.awaiting_all() if person is None else decisions.awaiting(person)
        if not rows:
            self.stdout.write("No batch awaits approval.")
        for b in rows:
            summary = (b.approval or {}).get("summary") or {}
            note = summary.get("unavailable") or f"summary: {len(summary)} field(s)"
            self.stdout.write(
                f"{b.bid} v{b.status_version} {b.collection or '-'} {b.profile} "
                f"{b.submitter} asked {(b.approval or {}).get('requested_at', '?')} ({note})"
            )
