"""Approve (or reject) a destructive update that waits Held after Processing.

``python manage.py approve_update JID --user NAME --reason TEXT [--reject] [--dry-run]``

Shows what the update changes of the object's current version, then takes the decision as
the same audited admin action the job page takes (``steering.actions.reviewdoor``), by
``--user`` (who needs the operator role for the job's collection), on the job as shown: a
job that moved meanwhile is skipped, never decided blindly.
"""

from __future__ import annotations

import uuid

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from merritt_queue.core import review
from steering.actions import reviewdoor, reviews

CHANGES = ("deleted", "replaced", "added", "carried")


class Command(BaseCommand):
    help = "Approve or reject a destructive update waiting Held after Processing."

    def add_arguments(self, parser):
        parser.add_argument("jid", help="the job, e.g. jid0000000008")
        parser.add_argument("--user", required=True, help="who decides (recorded in the audit)")
        parser.add_argument("--reason", default="", help="why (required unless --dry-run)")
        parser.add_argument(
            "--reject", action="store_true", help="reject: the job fails, the object stays"
        )
        parser.add_argument("--dry-run", action="store_true", help="only show the diff")

    def handle(self, *args, jid, user, reason, reject, dry_run, **options):
        person = get_user_model().objects.filter(username=user, is_active=True).first()
        if person is None:
            raise CommandError(f"no active user {user!r}")
        if not dry_run and not reason.strip():
            raise CommandError("--reason is required (it is recorded in the audit trail)")
        try:
            job, collection = reviewdoor.read(jid)
        except reviewdoor.Refused as e:
            raise CommandError(str(e)) from None
        self._show(job)
        name = reviews.REJECT if reject else reviews.APPROVE
        if problem := reviewdoor.why_not(person, job, collection, name):
            raise CommandError(f"{jid} cannot be decided by {user}: {problem}")
        if dry_run:
            self.stdout.write("Dry run: nothing was changed.")
            return
        decision = "reject" if reject else "approve"
        try:
            record, _ = reviewdoor.decide(
                person, jid, decision, reason, version=job.status_version, token=uuid.uuid4().hex
            )
        except reviewdoor.Refused as e:
            raise CommandError(str(e)) from None
        done = reviewdoor.outcome(record, False)
        self.stdout.write(f"{jid}: {done['result']} {done['detail']}".rstrip())
        self.stdout.write(f"admin action {record.pk}")
        if done["result"] != "done":
            raise CommandError(f"{jid} was not {decision}d: {done['detail']}")

    def _show(self, job) -> None:
        diff = review.review_of(job)
        self.stdout.write(f"{job.jid} is {job.status}: {job.message}")
        if diff is None:
            return
        self.stdout.write(
            f"compared with version {diff.get('version')} "
            f"({diff.get('current_files')} files, {diff.get('current_bytes')} bytes):"
        )
        totals, files = diff.get("totals") or {}, diff.get("files") or {}
        for change in CHANGES:
            got = totals.get(change) or {}
            files_n, bytes_n = got.get("files", 0), got.get("bytes", 0)
            self.stdout.write(f"  {change}: {files_n} files, {bytes_n} bytes")
            if change in ("deleted", "replaced"):
                for name, before, after in files.get(change) or []:
                    self.stdout.write(f"    {name} ({before} -> {after} bytes)")
        if files.get("left_out"):
            self.stdout.write(f"  ({files['left_out']} more names not listed)")
