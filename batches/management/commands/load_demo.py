"""Load the demo: a profile, an admin user, an API token, and one batch of each kind.

Safe to run again: the profile and user are kept, and each demo batch has a
fixed ``batchID``, so a second run is answered "duplicate" and creates nothing.

``--updates`` is the demo's second stage, run once the workers are up: it waits
until the first version of the demo's updated object is stored, then submits the
update (an update of an object not yet stored would fail, or race the first version).
"""

import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from batches.models import ApiToken, Profile
from door.submission import SubmissionError, submit
from inventory.models import InventoryVersion, LocalIdentifier
from merritt_queue.core.errors import NotFound
from merritt_queue.core.states import BatchStatus
from merritt_queue.project.runtime import get_store
from notifications.models import SUBMISSION, WEBHOOK, Subscription

SAMPLES = Path(settings.BASE_DIR) / "tests" / "fixtures" / "merritt-sample-files"
SAMPLE_PREFIX = "https://raw.githubusercontent.com/CDLUC3/mrt-doc/main/sampleFiles/"
# The demo's notification receiver, and where it reads its subscription's id and secret.
RECEIVER = "{receiver}"
RECEIVER_BATCH = "demo-object-manifest"
SECRET_FILE = Path(settings.BASE_DIR) / "var" / "run" / "demo-receiver.secret"
# batchID, type, payload, title, further fields
DEMO_BATCHES = [
    ("demo-file", "file", "goldenDragon.jpg", "Golden Dragon Restaurant Sign", {}),
    ("demo-container", "container", "huskyChicken.zip", "Husky Chicken", {}),
    # Subscribed to every event, sent to the demo's receiver (scripts/demo_receiver.py).
    (
        RECEIVER_BATCH,
        "object-manifest",
        "4blocks.checkm",
        "Motel Capri",
        {"notify_url": RECEIVER, "notify_events": "all"},
    ),
    ("demo-files", "single-file-batch-manifest", "sampleBatchOfFiles.checkm", "", {}),
    ("demo-manifests", "batch-manifest", "sampleBatchOfManifests.checkm", "", {}),
    ("demo-containers", "container-batch-manifest", "sampleBatchOfContainers.checkm", "", {}),
    ("demo-brain-v1", "container", "brain_v1.zip", "Brain", {"local_id": "brain"}),
]
# The second stage: Merritt's brain_v2 adds brain.tif to brain_v1's four images.
UPDATE_LOCAL_ID = "brain"
UPDATE_AFTER = "demo-brain-v1"
DEMO_UPDATES = [
    (
        "demo-brain-v2",
        "container",
        "brain_v2.zip",
        "Brain",
        {"local_id": UPDATE_LOCAL_ID, "submission_mode": "update"},
    ),
]
# A batch in one of these will not store the first version later: waiting longer is pointless.
# The demo owner's ARK (test NAAN): local-id locks are named after it, as Merritt's are.
DEMO_OWNER_ARK = "ark:/99999/fk4owner"
SETTLED = {BatchStatus.COMPLETED, BatchStatus.FAILED, BatchStatus.DELETED}


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument(
            "--content-dir",
            type=Path,
            default=Path(settings.BASE_DIR) / "var" / "demo-content",
            help="where to write the demo's files (default: var/demo-content)",
        )
        parser.add_argument(
            "--content-url",
            default="http://127.0.0.1:8001/",
            help="the URL at which --content-dir is served (default: http://127.0.0.1:8001/)",
        )
        parser.add_argument(
            "--receiver-url",
            default="http://127.0.0.1:8002/events",
            help="the demo's notification receiver, sent the events of one demo batch "
            "(default: http://127.0.0.1:8002/events)",
        )
        parser.add_argument("--password", default="admin", help="the demo admin's password")
        parser.add_argument(
            "--updates",
            action="store_true",
            help="submit the demo's update batch, once the object it updates is stored",
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=120,
            help="with --updates: seconds to wait for the first version (then submit anyway)",
        )

    def handle(self, *args, **opts):
        profile = self._profile()
        base = opts["content_url"].rstrip("/") + "/"
        if opts["updates"]:
            # A demo started again finds its update submitted already: it says so, and neither
            # waits nor announces a submission it will not make.
            todo = [u for u in DEMO_UPDATES if not self._already_there(u[0])]
            if todo:
                self._wait_for_first_version(profile.collection, opts["wait"])
                self._submit_all(profile, base, todo)
            return
        self._user(opts["password"])
        self._content(opts["content_dir"], base)
        self._submit_all(profile, base, DEMO_BATCHES, receiver=opts["receiver_url"])
        self._secret()

    def _submit_all(self, profile: Profile, base: str, batches, receiver: str = "") -> None:
        for batch_id, kind, name, title, extra in batches:
            extra = {k: v.format(receiver=receiver) for k, v in extra.items()}
            data = {
                "profile": profile.name,
                "submitter": "demo",
                "type": kind,
                "payload_url": base + name,
                "batchID": batch_id,
                "erc_what": title,
                **extra,
            }
            try:
                result = submit({k: v for k, v in data.items() if v})
            except SubmissionError as e:
                self.stderr.write(f"{batch_id}: {'; '.join(e.problems)}")
                continue
            note = "already there" if result.duplicate else "submitted"
            self.stdout.write(f"{batch_id}: {note} as {result.bid}")

    def _already_there(self, batch_id: str) -> bool:
        bid = get_store().batches.find_batch_by_uuid(batch_id)
        if bid:
            self.stdout.write(f"{batch_id}: already there as {bid}")
        return bool(bid)

    def _wait_for_first_version(self, collection: str, timeout: float) -> None:
        self.stdout.write(
            f"waiting (at most {timeout:g} s) for the first version of local id "
            f"{UPDATE_LOCAL_ID!r}, to submit its update"
        )
        deadline = time.monotonic() + timeout
        while True:
            if self._stored(collection):
                self.stdout.write(f"local id {UPDATE_LOCAL_ID!r} is stored; submitting its update")
                return
            status = self._batch_status(UPDATE_AFTER)
            if status in SETTLED:
                self.stdout.write(
                    f"batch {UPDATE_AFTER} is {status} without storing local id "
                    f"{UPDATE_LOCAL_ID!r}; submitting its update anyway (it may fail)"
                )
                return
            if time.monotonic() >= deadline:
                self.stdout.write(
                    f"waited {timeout:g} s and local id {UPDATE_LOCAL_ID!r} is not stored yet "
                    f"(batch {UPDATE_AFTER}: {status or 'not found'}); submitting its update "
                    "anyway: it waits for the first version or fails with the reason"
                )
                return
            time.sleep(1)

    @staticmethod
    def _stored(collection: str) -> bool:
        ark = (
            LocalIdentifier.objects.filter(collection=collection, local_id=UPDATE_LOCAL_ID)
            .values_list("ark", flat=True)
            .first()
        )
        return bool(ark) and InventoryVersion.objects.filter(obj__ark=ark).exists()

    @staticmethod
    def _batch_status(batch_id: str) -> str | None:
        store = get_store()
        bid = store.batches.find_batch_by_uuid(batch_id)
        if not bid:
            return None
        try:
            return store.batches.get_batch(bid).status
        except NotFound:  # removed by cleanup meanwhile
            return None

    def _profile(self) -> Profile:
        profile, created = Profile.objects.get_or_create(
            name="demo",
            defaults={
                "collection": "demo",
                "owner": "Demo Library",
                "owner_ark": DEMO_OWNER_ARK,
                "notification_emails": "depositor@example.org",
                "notify_on_queue": True,
                "minter_shoulder": "ark:/99999/fk4",
            },
        )
        if not profile.owner_ark:  # a demo profile loaded before profiles had one
            profile.owner_ark = DEMO_OWNER_ARK
            profile.save(update_fields=["owner_ark"])
        self.stdout.write(f"profile demo {'created' if created else 'kept'}")
        return profile

    def _secret(self) -> None:
        """The demo receiver's copy of its subscription's id and secret, as a depositor
        keeps them from the submission's answer; looked up, so that a second run (the batch
        a duplicate, the answer without them) writes them too."""
        subscription = (
            Subscription.objects.filter(
                batch_uuid=RECEIVER_BATCH, channel=WEBHOOK, source=SUBMISSION
            )
            .order_by("-id")
            .first()
        )
        if subscription is None:
            self.stderr.write(f"{RECEIVER_BATCH}: no webhook subscription; the receiver has none")
            return
        SECRET_FILE.parent.mkdir(parents=True, exist_ok=True)
        SECRET_FILE.touch(mode=0o600)
        SECRET_FILE.write_text(f"{subscription.pk} {subscription.secret}\n")

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
