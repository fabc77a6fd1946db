"""The deletion requests a second administrator approves (``MQ_TWO_PERSON_DELETION``).

``python manage.py deletion_requests list [--all]``
``python manage.py deletion_requests show ID``
``python manage.py deletion_requests approve|reject|withdraw ID --as NAME --reason TEXT``

The same rules as the pages (``steering.twoperson.requests``): ``--as`` acts with their role
and collections, is recorded in the audit trail, and may not approve their own request.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from steering.models import DeletionRequest
from steering.twoperson import requests as life
from steering.twoperson import showing

DECISIONS = {"approve": life.approve, "reject": life.reject, "withdraw": life.withdraw}


class Command(BaseCommand):
    help = "List, show, approve, reject or withdraw two-person deletion requests."

    def add_arguments(self, parser):
        parser.add_argument("verb", choices=["list", "show", *DECISIONS], help="what to do")
        parser.add_argument("id", nargs="?", type=int, help="the request (show and decisions)")
        parser.add_argument(
            "--as", dest="as_user", default="", help="who decides (recorded in the audit)"
        )
        parser.add_argument("--reason", default="", help="why (required to decide)")
        parser.add_argument("--all", action="store_true", help="list decided requests too")

    def handle(self, *args, verb, id, as_user, reason, all, **options):
        life.expire_old()
        if verb == "list":
            return self._list(all)
        if id is None:
            raise CommandError(f"{verb} needs the request's ID")
        req = DeletionRequest.objects.filter(pk=id).first()
        if req is None:
            raise CommandError(f"no deletion request {id}")
        if verb == "show":
            return self._show(req)
        person = get_user_model().objects.filter(username=as_user, is_active=True).first()
        if person is None:
            raise CommandError(f"--as: no active user {as_user!r}")
        if not reason.strip():
            raise CommandError("--reason is required (it is recorded in the audit trail)")
        try:
            record = DECISIONS[verb](req, person, reason)
        except (life.Refused, PermissionDenied) as e:
            raise CommandError(str(e)) from None
        req.refresh_from_db()
        self.stdout.write(
            f"request {req.pk}: {req.state} by {req.approver_name}; admin action {record.pk} "
            f"({record.action}): {record.done} done, {record.skipped} skipped, "
            f"{record.failed} failed"
        )

    def _list(self, everything: bool) -> None:
        rows = DeletionRequest.objects.all()
        if not everything:
            rows = rows.filter(state=DeletionRequest.REQUESTED)
        for r in rows:
            self.stdout.write(
                f"{r.pk}\t{r.state}\t{life.label(r.action)}\t{r.count} item(s)\t"
                f"{r.requester_name}\t{r.created:%Y-%m-%d %H:%M}\t{r.reason}"
            )
        if not rows:
            self.stdout.write("No request is waiting." if not everything else "No request.")

    def _show(self, req: DeletionRequest) -> None:
        self.stdout.write(
            f"request {req.pk}: {life.label(req.action)}, {req.state}; requested by "
            f"{req.requester_name} on {req.created:%Y-%m-%d %H:%M}: {req.reason}"
        )
        if req.approver_name:
            self.stdout.write(f"{req.state} by {req.approver_name}: {req.decision_reason}")
        if req.selection:
            self.stdout.write(f"all matching {req.selection}: {req.count} when requested")
        for c, status, n in (req.shown or {}).get("by", []):
            self.stdout.write(f"  {c or '-'} {status}: {n}")
        if req.action == "cleanup":
            for item_id, status, detail in (req.shown or {}).get("rows", []):
                self.stdout.write(f"  {item_id} ({status or 'folder'}): {detail}")
            return
        for row in showing.now(req):
            along = ", ".join(f"{j} ({s})" for j, s, goes, _ in row.get("jobs", []) if goes)
            changed = f"changed since the request, now {row['now']}" if row["changed"] else ""
            self.stdout.write(
                f"  {row['id']} {row.get('collection') or '-'} {row['status']} "
                f"v{row['version']} {changed}{' with ' + along if along else ''}".rstrip()
            )
