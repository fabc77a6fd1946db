"""Load the demo: a profile, an admin user, an API token, and one batch of each kind.

Safe to run again: the profile and user are kept, and each demo batch has a
fixed ``batchID``, so a second run is answered "duplicate" and creates nothing.
"""

from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from batches.models import ApiToken, Profile
from batches.submission import SubmissionError, submit

SAMPLES = Path(settings.BASE_DIR) / "tests" / "fixtures" / "merritt-sample-files"
SAMPLE_PREFIX = "https://raw.githubusercontent.com/CDLUC3/mrt-doc/main/sampleFiles/"
DEMO_BATCHES = [
    ("demo-file", "file", "goldenDragon.jpg", "Golden Dragon Restaurant Sign"),
    ("demo-container", "container", "huskyChicken.zip", "Husky Chicken"),
    ("demo-object-manifest", "object-manifest", "4blocks.checkm", "Motel Capri"),
    ("demo-files", "single-file-batch-manifest", "sampleBatchOfFiles.checkm", ""),
    ("demo-manifests", "batch-manifest", "sampleBatchOfManifests.checkm", ""),
    ("demo-containers", "container-batch-manifest", "sampleBatchOfContainers.checkm", ""),
]


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument(
            "--content-dir", type=Path, default=Path(settings.BASE_DIR) / "var" / "demo-content"
        )
        parser.add_argument("--content-url", default="http://127.0.0.1:8001/")
        parser.add_argument("--password", default="admin", help="the demo admin's password")

    def handle(self, *args, **opts):
        profile = self._profile()
        self._user(opts["password"])
        base = opts["content_url"].rstrip("/") + "/"
        self._content(opts["content_dir"], base)
        for batch_id, kind, name, title in DEMO_BATCHES:
            data = {
                "profile": profile.name,
                "submitter": "demo",
                "type": kind,
                "payload_url": base + name,
                "batchID": batch_id,
                "erc_what": title,
            }
            try:
                result = submit({k: v for k, v in data.items() if v})
            except SubmissionError as e:
                self.stderr.write(f"{batch_id}: {'; '.join(e.problems)}")
                continue
            note = "already there" if result.duplicate else "submitted"
            self.stdout.write(f"{batch_id}: {note} as {result.bid}")

    def _profile(self) -> Profile:
        profile, created = Profile.objects.get_or_create(
            name="demo",
            defaults={
                "collection": "demo",
                "owner": "Demo Library",
                "notification_emails": "depositor@example.org",
                "notify_on_queue": True,
                "minter_shoulder": "ark:/99999/fk4",
            },
        )
        self.stdout.write(f"profile demo {'created' if created else 'kept'}")
        return profile

    def _user(self, password: str) -> None:
        users = get_user_model()
        user = users.objects.filter(username="admin").first()
        if user is None:
            user = users.objects.create_superuser("admin", "admin@example.org", password)
            self.stdout.write(f"user admin created (password: {password})")
        if not user.api_tokens.exists():
            _, key = ApiToken.issue(user, "demo")
            self.stdout.write(f"API token for admin: {key}")

    def _content(self, target: Path, base: str) -> None:
        """Serveable copies of the sample files, manifests pointing at ``base``."""
        target.mkdir(parents=True, exist_ok=True)
        for f in SAMPLES.iterdir():
            data = f.read_bytes()
            if f.suffix == ".checkm":
                data = data.replace(SAMPLE_PREFIX.encode(), base.encode())
            (target / f.name).write_bytes(data)
