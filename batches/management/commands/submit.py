import argparse
import getpass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from door.submission import (
    TEXT_FIELDS,
    SubmissionError,
    Upload,
    judge_manifest,
    prepare,
    submit,
    workers_problem,
)
from merritt_queue.core.planning import SUBMISSION_TYPES

# What each submission field means, for --help; the same fields as the API's JSON.
FIELD_HELP = {
    "profile": "the ingest profile (names the collection, e.g. demo)",
    "submitter": "who submits, recorded on the batch (default: your login name on this host)",
    "on_behalf_of": "the person the batch is submitted for (an active user of the queue)",
    "type": "what the payload is: " + ", ".join(SUBMISSION_TYPES),
    "payload_url": "the http(s) URL of the payload (or use --file)",
    "filename": "the payload's file name, when the URL does not end with it",
    "batchID": "your own id for the batch; sending the same id again does not submit twice",
    "erc_who": "the object's creator (ERC who)",
    "erc_what": "the object's title (ERC what)",
    "erc_when": "the object's date (ERC when)",
    "erc_where": "the object's place or local reference (ERC where)",
    "digest_type": "the checksum type of --digest-value (md5, sha-256, ...)",
    "digest_value": "the payload's checksum",
    "local_id": "the object's local identifier in its collection",
    "primary_id": "the ARK of an existing object to add a version to",
    "submission_mode": "add (default) or update",
    "response_type": "the format of the depositor's report",
    "notify_url": "an http(s) endpoint sent this batch's events, signed (docs/usage.md)",
    "notify_events": "which events: all (default), failures or completion",
    "notify_emails": "addresses e-mailed this batch's failures and completion, comma-separated",
}


def option(field: str) -> str:
    """``--batch-id`` for ``batchID``: every option in lower case with dashes."""
    return "--" + field.replace("ID", "_id").replace("_", "-")


class Command(BaseCommand):
    help = (
        "Submit a batch (a URL or a local file) and print its batch id. A shell on the queue "
        "host is already full control of it, so the command is trusted: it records the "
        "--submitter it is given (your login name by default). With --as-user it submits as "
        "that user instead, with that user's rights checked as for the API. --dry-run only "
        "checks the submission, as the door would, but for the queue's room (asked of ZooKeeper "
        "when submitting)."
    )

    def add_arguments(self, parser):
        for field in TEXT_FIELDS:
            name = option(field)
            parser.add_argument(
                name,
                dest=field,
                metavar=name[2:].upper().replace("-", "_"),
                help=FIELD_HELP.get(field),
            )
            old = f"--{field.replace('_', '-')}"
            if old != name:  # the spelling of earlier versions, kept for scripts
                parser.add_argument(old, dest=field, help=argparse.SUPPRESS)
        parser.add_argument("--file", type=Path, help="a local file to upload as the payload")
        parser.add_argument(
            "--as-user", help="submit as this user (rights checked; submitter is this user)"
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="check the submission and say what is wrong, without submitting",
        )

    def handle(self, *args, **opts):
        data = {k: opts[k] for k in TEXT_FIELDS if opts.get(k) is not None}
        by = None
        if opts["as_user"]:
            by = get_user_model().objects.filter(username=opts["as_user"]).first()
            if by is None:
                raise CommandError(f"nothing was submitted: no user {opts['as_user']!r}")
        else:
            data.setdefault("submitter", getpass.getuser())
        upload = None
        try:
            if opts["file"]:
                path = opts["file"]
                if not path.is_file():
                    raise CommandError(f"{path} is not a readable file")
                upload = Upload(path.name, path.open("rb"), path.stat().st_size)
            via = None if by else "manage.py submit"
            if opts["dry_run"]:
                return self._check(data, upload, by, via)
            result = submit(data, upload, by=by, via=via)
        except SubmissionError as e:
            raise CommandError("nothing was submitted:\n  " + "\n  ".join(e.problems)) from None
        finally:
            if upload:
                upload.file.close()
        note = " (duplicate: this batchID was already submitted)" if result.duplicate else ""
        if result.awaiting_approval:
            note = " (awaiting approval: its profile asks an operator to approve it first)"
        self.stdout.write(f"{result.bid}{note}")
        if hook := result.webhook:
            self.stdout.write(
                f"webhook subscription {hook['subscription_id']}, signing secret "
                f"{hook['secret']} (not shown again)"
            )

    def _check(self, data: dict, upload: Upload | None, by, via: str | None) -> None:
        try:
            clean = prepare(data, upload, by=by, via=via, mind_workers=False)
            judge_manifest(clean, upload)  # the manifest too, as submitting would
        except SubmissionError as e:
            problems = [p for p in [workers_problem()] if p] + e.problems
            raise CommandError("this would be refused:\n  " + "\n  ".join(problems)) from None
        if problem := workers_problem():
            raise CommandError(
                f"the submission is well-formed ({clean['type']} to profile {clean['profile']} "
                f"as {clean['submitter']}), but this would be refused:\n  {problem}"
            )
        self.stdout.write(
            f"would submit: {clean['type']} to profile {clean['profile']} "
            f"as {clean['submitter']} (nothing was submitted)"
        )
