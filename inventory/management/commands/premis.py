"""``manage.py premis ARK [--version N] [-o FILE]``: an object's history as PREMIS XML.

Run on the queue's host, as the other maintenance commands are, so it reads every
collection: whoever can run it can read the database itself.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from inventory import premisxml, provenance
from inventory.models import InventoryObject


class Command(BaseCommand):
    help = (
        "Write an object's preservation history (ingestion, digests, fixity checks, the ARK, "
        "storage, inventory, and the queue's holds, releases, edits, resumes, failures and "
        "deletions, with who decided each) as a PREMIS 3.0 XML document."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version names the object's version here, as the issue and the docs spell it:
        # it replaces Django's own --version (which prints Django's).
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("ark", help="the object's ARK, e.g. ark:/99999/fk4abc")
        parser.add_argument(
            "--version",
            dest="object_version",
            type=int,
            metavar="N",
            help="only version N of the object: its files and the events of the job that "
            "made it (default: the whole object)",
        )
        parser.add_argument(
            "-o",
            "--output",
            metavar="FILE",
            help="write the document to FILE instead of the standard output",
        )

    def handle(self, *args, **options):
        ark, version = options["ark"], options["object_version"]
        obj = InventoryObject.objects.filter(ark=ark).first()
        if obj is None:
            raise CommandError(f"the inventory holds no object {ark}")
        if version is not None and not obj.versions.filter(number=version).exists():
            raise CommandError(f"{ark} has no version {version}")
        body = premisxml.document(provenance.object_history(obj, version))
        if options["output"]:
            Path(options["output"]).write_bytes(body)
            self.stderr.write(f"wrote {options['output']} ({len(body)} bytes)")
        else:
            self.stdout.write(body.decode(), ending="")
