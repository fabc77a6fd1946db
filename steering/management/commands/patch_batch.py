"""Correct a batch's failed jobs from their corrected failed-rows manifest, and resume them.

``python manage.py patch_batch BID FILE --user NAME --reason TEXT [--dry-run]``

The manifest is judged and matched as the page's upload is (``steering.actions.batchpatch``);
the preview is printed, and without ``--dry-run`` taken as one admin action by ``--user``
(who needs the operator role for the batch's collection), audited with the reason.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from merritt_queue.core import jobparams
from merritt_queue.project.runtime import get_store
from steering.actions import batchpatch
from steering.permissions import collections_of


class Command(BaseCommand):
    help = "Correct and resume a batch's failed jobs from a corrected failed-rows manifest."

    def add_arguments(self, parser):
        parser.add_argument("bid", help="the batch, e.g. bid0000000008")
        parser.add_argument("file", help="the corrected failed-rows manifest")
        parser.add_argument("--user", required=True, help="who acts (recorded in the audit)")
        parser.add_argument("--reason", default="", help="why (required unless --dry-run)")
        parser.add_argument("--dry-run", action="store_true", help="only show the preview")

    def handle(self, *args, bid, file, user, reason, dry_run, **options):
        person = get_user_model().objects.filter(username=user, is_active=True).first()
        if person is None:
            raise CommandError(f"no active user {user!r}")
        if not dry_run and not reason.strip():
            raise CommandError("--reason is required (it is recorded in the audit trail)")
        data = Path(file).read_bytes()[: settings.MQ_MAX_MANIFEST_BYTES + 1]
        try:
            plan = batchpatch.plan(get_store(), bid, data, collections_of(person))
        except batchpatch.PatchRefused as e:
            raise CommandError("the corrections are refused:\n" + str(e)) from None
        self._show(plan)
        if dry_run or not plan.changes:
            self.stdout.write("Dry run: nothing was changed." if dry_run else "Nothing to do.")
            return
        signed = {"bid": bid, "items": plan.items(), "params": plan.params()}
        try:
            record = batchpatch.apply(person, signed | {"token": uuid.uuid4().hex}, reason)
        except (batchpatch.PatchRefused, PermissionDenied) as e:
            raise CommandError(str(e)) from None
        for item in record.items.filter(part_of="").order_by("id"):
            self.stdout.write(f"{item.item_id}: {item.result} {item.detail}".rstrip())
        self.stdout.write(
            f"admin action {record.pk}: {record.done} done, {record.skipped} skipped, "
            f"{record.failed} failed"
        )

    def _show(self, plan: batchpatch.Plan) -> None:
        for c in plan.changes:
            self.stdout.write(f"{c.job.jid} (line {c.line}) restarts at {c.step}:")
            for name, (before, after) in c.changes.items():
                self.stdout.write(
                    f"  {jobparams.LABELS[name]}: {jobparams.shown(before)} -> "
                    f"{jobparams.shown(after)}"
                )
        for r in plan.refused:
            self.stdout.write(f"line {r.line}{f' ({r.jid})' if r.jid else ''} refused: {r.why}")
        for line, jid in plan.unchanged:
            self.stdout.write(f"line {line} ({jid}): no change")
