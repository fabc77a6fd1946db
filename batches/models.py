"""Profiles (collection configuration) and API tokens; batches themselves live in ZooKeeper."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models, transaction
from django.urls import reverse

from merritt_queue.core import stepowners
from merritt_queue.core.approval import shown_status as approval_shown_status
from merritt_queue.core.states import BatchStatus
from merritt_queue.services.minter import ADMIN_AGGREGATES
from notifications.mailbox import validate_mailbox_lines

mnemonic_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9_-]{0,99}$",
    "Use lower-case letters, digits, '-' and '_' (the collection's mnemonic).",
)


def mnemonic_problem(mnemonic: str) -> str | None:
    """Why ``mnemonic`` cannot name a collection (it becomes a ZooKeeper path segment)."""
    if mnemonic_validator.regex.match(mnemonic):  # type: ignore[union-attr]
        return None
    return f"{mnemonic[:100]!r} is not a collection mnemonic: {mnemonic_validator.message}"


shoulder_validator = RegexValidator(
    r"^ark:/\d{5,}/[a-z0-9]+$", "A minter shoulder looks like ark:/99999/fk4."
)


owner_ark_validator = RegexValidator(
    r"^ark:/\d{5,}/[0-9A-Za-z][0-9A-Za-z._-]*$",
    "The owner's ARK looks like ark:/13030/j2rn30xp (ark:/, the NAAN's digits, /, a name).",
)


def shoulder_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def validate_shoulder_lines(text: str) -> None:
    """Every line is one shoulder, as ``minter_shoulder`` is; the error names the bad ones."""
    bad = [s for s in shoulder_lines(text) if not shoulder_validator.regex.match(s)]  # type: ignore[union-attr]
    if bad:
        raise ValidationError(
            f"{', '.join(repr(s[:100]) for s in bad)}: put one shoulder a line, each like "
            "ark:/99999/fk4 (ark:/, the NAAN's digits, /, lower-case letters and digits)."
        )


def new_notify_secret() -> str:
    return secrets.token_hex(32)


NOTIFY_EVENT_CHOICES = [
    ("all", "every state entry of the batch and of each job"),
    ("failures", "failures only"),
    ("completion", "completion only (the batch's report)"),
]


AGGREGATE_CHOICES = [
    ("", "content"),
    ("MRT-collection", "collection (administrative)"),
    ("MRT-owner", "owner (administrative)"),
    ("MRT-service-level-agreement", "service-level agreement (administrative)"),
]


class Profile(models.Model):
    """How a collection ingests: who is told, how it is identified and where it is stored."""

    LOCAL_IDS_REFUSED = (
        "profile {name} has no owner's ARK, so a local id's lock cannot be named as Merritt's "
        "ingest names it; objects with local ids are refused until an administrator sets "
        "the profile's owner's ARK (ark:/NAAN/name, as in Merritt's profile)"
    )

    def local_ids_refusal(self) -> str | None:
        """Why this profile's objects may not carry local ids (no owner's ARK to lock by)."""
        return None if self.owner_ark else self.LOCAL_IDS_REFUSED.format(name=self.name)

    name = models.SlugField(
        max_length=100, unique=True, help_text="The profile name depositors submit."
    )
    collection = models.CharField(max_length=100, validators=[mnemonic_validator], db_index=True)
    owner = models.CharField(
        max_length=255, blank=True, help_text="Who owns the collection, as people name them."
    )
    owner_ark = models.CharField(
        "owner's ARK",
        max_length=255,
        blank=True,
        validators=[owner_ark_validator],
        help_text=(
            "The owner's ARK, as in Merritt's profile (owner: ark:/13030/...). Merritt's "
            "ingest names a local id's lock after it, so both ingests must use the same one; "
            "without it, submissions with local ids are refused."
        ),
    )
    notification_emails = models.TextField(
        blank=True,
        help_text="Addresses told about each batch, one per line or comma-separated.",
        validators=[validate_mailbox_lines],
    )
    notify_on_queue = models.BooleanField(
        default=False, help_text="Also e-mail when a batch has been turned into jobs."
    )
    callback_url = models.URLField(blank=True, help_text="Called with JSON when a job completes.")
    notify_url = models.URLField(
        "default notification endpoint",
        blank=True,
        max_length=2048,
        help_text=(
            "Sent signed events of each batch that names no endpoint of its own (the "
            "depositor's subscription, docs/usage.md)."
        ),
    )
    notify_events = models.CharField(
        "default events",
        max_length=12,
        choices=NOTIFY_EVENT_CHOICES,
        default="completion",
        help_text="Which events the default endpoint is sent.",
    )
    mail_failures = models.BooleanField(
        "e-mail failures as they happen",
        default=False,
        help_text=(
            "Also e-mail the addresses above each job's failure when it happens (a minute's "
            "failures in one message), not only in the batch's report."
        ),
    )
    # The key the secrets of the profile's default webhook subscriptions derive from
    # (notifications.keys): its receiver holds it too. Kept in clear, as an HMAC needs it;
    # shown once in the admin, on creation and on rotation.
    notify_secret = models.CharField(max_length=64, default=new_notify_secret, editable=False)
    default_priority = models.PositiveSmallIntegerField(
        default=5, validators=[MaxValueValidator(99)], help_text="0 is served first, 99 last."
    )
    minter_shoulder = models.CharField(max_length=100, validators=[shoulder_validator])
    storage_node = models.CharField(max_length=100, default="local")
    store_record = models.CharField(
        "who stores and records",
        max_length=20,
        blank=True,
        choices=[("", "the site's choice (MQ_STORE_RECORD)")]
        + [(mode, f"{mode}: {text}") for mode, text in stepowners.MODE_TEXT.items()],
        help_text=(
            "Who does Storing and Recording for this profile's new submissions; jobs "
            "already submitted keep what they were submitted under (docs/merritt.md)."
        ),
    )
    approval_required = models.BooleanField(
        "new batches wait for approval",
        default=False,
        help_text=(
            "Each new batch of this profile waits, Held and shown as Awaiting approval with "
            "a pre-flight summary, until an operator approves or rejects it; the depositor "
            "is told either way. Batches already submitted are not affected."
        ),
    )
    review_destructive = models.CharField(
        "destructive updates wait for a person",
        max_length=3,
        blank=True,
        choices=[
            ("", "the site's choice (MQ_DESTRUCTIVE_REVIEW)"),
            ("on", "on: wait before Storing"),
            ("off", "off: store at once"),
        ],
        help_text=(
            "A new version that deletes files, or replaces more than the share below of the "
            "object's bytes, waits Held after Processing until a person approves or rejects "
            "it (docs/usage.md)."
        ),
    )
    review_replace_share = models.FloatField(
        "share of bytes replaced that waits",
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="0 to 1; empty: the site's MQ_DESTRUCTIVE_REPLACE_SHARE.",
    )
    allow_external_ids = models.BooleanField(
        "accept identifiers minted elsewhere",
        default=False,
        help_text=(
            "Let depositors give an ARK (primary_id) that this repository did not mint, to "
            "start a new object under it. Only ARKs under the shoulders below are accepted. "
            "Leave off unless the collection's ARKs come from another minter."
        ),
    )
    external_shoulders = models.TextField(
        "shoulders of identifiers minted elsewhere",
        blank=True,
        validators=[validate_shoulder_lines],
        help_text=(
            "One ARK shoulder a line, e.g. ark:/13030/m5. Used only when the box above is on."
        ),
    )
    ezid_owner = models.CharField(
        "EZID co-owner",
        max_length=255,
        blank=True,
        help_text=(
            "The EZID user made owner of the ARKs of this profile (sent as _owner; Merritt's "
            "profile EZID_co-owner). Empty: the user the queue signs in to EZID as."
        ),
    )
    context = models.CharField(
        max_length=255,
        blank=True,
        help_text="Sent to EZID as mrt.creator with every ARK (Merritt's profile Context).",
    )
    aggregate = models.CharField(
        max_length=40,
        blank=True,
        choices=AGGREGATE_CHOICES,
        help_text=(
            "What the objects are (Merritt's profile Aggregate). A collection, owner or "
            "service-level agreement object is administrative: its ARK stays reserved at "
            "EZID and is not exported."
        ),
    )
    created = models.DateTimeField(auto_now_add=True)
    modified = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.allow_external_ids and not shoulder_lines(self.external_shoulders):
            raise ValidationError(
                {
                    "external_shoulders": "Name at least one shoulder: identifiers minted "
                    "elsewhere are accepted only under the shoulders listed here."
                }
            )
        if self.store_record_mode in stepowners.MERRITT_MODES and (
            problem := stepowners.storage_node_problem(self.storage_node)
        ):
            raise ValidationError({"storage_node": f"{problem}, as this profile's Storing is."})

    @property
    def store_record_mode(self) -> str:
        """Who stores and records this profile's new submissions (``stepowners``)."""
        return stepowners.chosen(self.store_record, settings.MQ_STORE_RECORD)

    @property
    def administrative(self) -> bool:
        """Its objects describe the repository (collections, owners, agreements), as
        Merritt's ingest tells them apart for EZID."""
        return self.aggregate in ADMIN_AGGREGATES

    @property
    def external_shoulder_list(self) -> list[str]:
        """The shoulders under which a depositor's own ARK is accepted (when allowed)."""
        return shoulder_lines(self.external_shoulders)

    def rotate_notify_secret(self) -> str:
        """A new key, returned to be shown once (its default receiver must be given it); the
        secrets of the profile's default subscriptions are derived from it in the same
        transaction, so no delivery is signed with a secret its receiver cannot derive."""
        from notifications.rekey import rederive

        with transaction.atomic():
            self.notify_secret = new_notify_secret()
            self.save(update_fields=["notify_secret"])
            rederive(self)
        return self.notify_secret

    @property
    def emails(self) -> list[str]:
        raw = self.notification_emails.replace(",", "\n").splitlines()
        return [e.strip() for e in raw if e.strip()]


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token for the submission API; only its hash is kept."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"

    @classmethod
    def issue(cls, user, name: str) -> tuple[ApiToken, str]:
        """Create a token; the clear key is returned once and never stored."""
        key = secrets.token_urlsafe(32)
        return cls.objects.create(user=user, name=name, key_hash=_hash(key)), key

    @classmethod
    def lookup(cls, key: str) -> ApiToken | None:
        """The live token of this key; a revoked one, or one of a deactivated user, is none."""
        tokens = cls.objects.filter(key_hash=_hash(key), revoked=False, user__is_active=True)
        return tokens.select_related("user").first()

    def rotate(self) -> str:
        """Give the token a new key (the old one stops working at once); returns it once."""
        key = secrets.token_urlsafe(32)
        self.key_hash = _hash(key)
        self.save(update_fields=["key_hash"])
        return key


# --- the mirror: read models filled by the reconciler, never written by views -----------

BATCH_STATUS_CHOICES = [(s.value, s.value) for s in BatchStatus]


class Batch(models.Model):
    """A batch as last read from ZooKeeper (``/batches/BID``)."""

    bid = models.CharField(max_length=20, unique=True)
    uuid = models.CharField("batchID", max_length=100, blank=True, db_index=True)
    collection = models.CharField(max_length=100, blank=True, db_index=True)
    profile = models.CharField(max_length=100, blank=True)
    submitter = models.CharField(max_length=255, blank=True, db_index=True)
    type = models.CharField(max_length=40, blank=True)
    title = models.TextField(blank=True)
    submitted = models.DateTimeField(null=True, db_index=True)
    status = models.CharField(max_length=20, choices=BATCH_STATUS_CHOICES, db_index=True)
    message = models.TextField(blank=True)
    last_modified = models.DateTimeField(null=True, db_index=True)
    submission = models.JSONField(default=dict)
    status_report = models.JSONField(null=True)
    # The ``approval`` node (``core.approval``): set while the batch awaits approval.
    approval = models.JSONField(null=True, blank=True)
    acquired = models.BooleanField(default=False)
    locked = models.BooleanField(default=False)
    # Jobs per status, kept by the reconciler so the list needs no per-row count query.
    job_counts = models.JSONField(default=dict)
    job_total = models.PositiveIntegerField(default=0)
    status_version = models.IntegerField(default=-1)
    read_at = models.DateTimeField()
    # As ``Job.removed_at``: the batch's nodes are gone from the queue, its row is history.
    removed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-bid"]
        verbose_name_plural = "batches"
        indexes = [
            models.Index(fields=["status", "-bid"]),
            models.Index(fields=["collection", "-bid"]),
            # The batches removed since a moment (mirror.moment).
            models.Index(
                fields=["removed_at"],
                condition=models.Q(removed_at__isnull=False),
                name="batch_removed_at",
            ),
        ]

    def __str__(self) -> str:
        return self.bid

    def get_absolute_url(self) -> str:
        """The batch's page in the app (the Django admin's "View on site")."""
        return reverse("batches:detail", args=[self.bid])

    @property
    def awaiting_approval(self) -> bool:
        return self.approval is not None and self.status == BatchStatus.HELD

    @property
    def shown_status(self) -> str:
        """Its status as a person reads it: a batch awaiting approval is in a state of its
        own (``merritt_queue.core.approval``), Held to ZooKeeper."""
        return approval_shown_status(self.status, self.approval)


class BatchEvent(models.Model):
    """One status write of a batch: one row per status version, as ``JobEvent`` for jobs."""

    bid = models.CharField(max_length=20, db_index=True)
    from_status = models.CharField(max_length=20, blank=True)
    to_status = models.CharField(max_length=20, db_index=True)
    at = models.DateTimeField(db_index=True)
    message = models.TextField(blank=True)
    actor = models.CharField(max_length=150, blank=True)
    status_version = models.IntegerField(default=-1)
    exact = models.BooleanField(default=False)

    class Meta:
        ordering = ["bid", "status_version"]
        constraints = [
            models.UniqueConstraint(
                fields=["bid", "status_version"], name="one_batch_event_per_status_write"
            )
        ]


class Collection(models.Model):
    """A collection and its hold (``/locks/collections/<mnemonic>``)."""

    mnemonic = models.CharField(max_length=100, unique=True)
    held = models.BooleanField(default=False, db_index=True)
    held_by = models.CharField(max_length=150, blank=True)
    held_reason = models.TextField(blank=True)
    held_at = models.DateTimeField(null=True)
    read_at = models.DateTimeField(null=True)

    class Meta:
        ordering = ["mnemonic"]

    def __str__(self) -> str:
        return self.mnemonic
