from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from batches.submission import TEXT_FIELDS, SubmissionError, Upload, submit


class Command(BaseCommand):
    help = "Submit a batch (a URL or a local file) and print its batch id."

    def add_arguments(self, parser):
        for field in TEXT_FIELDS:
            parser.add_argument(f"--{field.replace('_', '-')}", dest=field)
        parser.add_argument("--file", type=Path, help="a local file to upload as the payload")

    def handle(self, *args, **opts):
        data = {k: opts[k] for k in TEXT_FIELDS if opts.get(k) is not None}
        upload = None
        try:
            if opts["file"]:
                path = opts["file"]
                if not path.is_file():
                    raise CommandError(f"{path} is not a readable file")
                upload = Upload(path.name, path.open("rb"), path.stat().st_size)
            result = submit(data, upload)
        except SubmissionError as e:
            raise CommandError("nothing was submitted:\n  " + "\n  ".join(e.problems)) from None
        finally:
            if upload:
                upload.file.close()
        note = " (duplicate: this batchID was already submitted)" if result.duplicate else ""
        self.stdout.write(f"{result.bid}{note}")
