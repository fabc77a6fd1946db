from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from batches.submission import TEXT_FIELDS, SubmissionError, Upload, submit


class Command(BaseCommand):
    help = (
        "Submit a batch (a URL or a local file) and print its batch id. A shell on the queue "
        "host is already full control of it, so the command is trusted: it records the "
        "--submitter it is given. With --as-user it submits as that user instead, with that "
        "user's rights checked as for the API."
    )

    def add_arguments(self, parser):
        for field in TEXT_FIELDS:
            parser.add_argument(f"--{field.replace('_', '-')}", dest=field)
        parser.add_argument("--file", type=Path, help="a local file to upload as the payload")
        parser.add_argument(
            "--as-user", help="submit as this user (rights checked; submitter is this user)"
        )

    def handle(self, *args, **opts):
        data = {k: opts[k] for k in TEXT_FIELDS if opts.get(k) is not None}
        by = None
        if opts["as_user"]:
            by = get_user_model().objects.filter(username=opts["as_user"]).first()
            if by is None:
                raise CommandError(f"nothing was submitted: no user {opts['as_user']!r}")
        upload = None
        try:
            if opts["file"]:
                path = opts["file"]
                if not path.is_file():
                    raise CommandError(f"{path} is not a readable file")
                upload = Upload(path.name, path.open("rb"), path.stat().st_size)
            result = submit(data, upload, by=by, via=None if by else "manage.py submit")
        except SubmissionError as e:
            raise CommandError("nothing was submitted:\n  " + "\n  ".join(e.problems)) from None
        finally:
            if upload:
                upload.file.close()
        note = " (duplicate: this batchID was already submitted)" if result.duplicate else ""
        self.stdout.write(f"{result.bid}{note}")
