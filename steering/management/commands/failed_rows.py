"""Write a batch's failed rows: the checkm manifest of its Failed jobs, as the batch came in.

``python manage.py failed_rows BID [-o FILE]`` (standard output without ``-o``).
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from merritt_queue.project.runtime import get_store
from steering.actions import batchpatch


class Command(BaseCommand):
    help = "Write the manifest of a batch's failed jobs, each row after why it failed."

    def add_arguments(self, parser):
        parser.add_argument("bid", help="the batch, e.g. bid0000000008")
        parser.add_argument("-o", "--output", help="the file to write (default: standard output)")

    def handle(self, *args, bid: str, output: str | None, **options):
        try:
            text = batchpatch.failed_rows(get_store(), bid)
        except batchpatch.PatchRefused as e:
            raise CommandError(str(e)) from None
        if output:
            Path(output).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text, ending="")
