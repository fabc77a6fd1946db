"""The job mirror: read models filled by the reconciler from ZooKeeper, never by views."""

from django.db import models
from django.urls import reverse

from merritt_queue.core import review
from merritt_queue.core.states import JobStatus

JOB_STATUS_CHOICES = [(s.value, s.value) for s in JobStatus]


def awaiting_review() -> models.Q:
    """Jobs Held after Processing until a person approves or rejects their destructive update
    (``core.review``): the move wrote the message, and any later write replaces it. The
    status and last successful status are indexed together; the message sorts out the few."""
    return models.Q(
        status=JobStatus.HELD,
        last_successful_status=JobStatus.PROCESSING,
        message__startswith=review.WAITING,
    )


class Job(models.Model):
    """A job as last read from ZooKeeper (``/jobs/JID``)."""

    jid = models.CharField(max_length=20, unique=True)
    # No database constraint: the reconciler may see a job before its batch.
    batch = models.ForeignKey(
        "batches.Batch",
        to_field="bid",
        db_column="bid",
        db_constraint=False,
        null=True,
        on_delete=models.DO_NOTHING,
        related_name="jobs",
    )
    collection = models.CharField(max_length=100, blank=True, db_index=True)
    profile = models.CharField(max_length=100, blank=True)
    submitter = models.CharField(max_length=255, blank=True, db_index=True)
    status = models.CharField(max_length=20, choices=JOB_STATUS_CHOICES)
    last_successful_status = models.CharField(max_length=20, blank=True, db_index=True)
    retry_count = models.PositiveIntegerField(default=0)
    priority = models.PositiveSmallIntegerField(default=5)
    space_needed = models.BigIntegerField(default=0)
    local_id = models.CharField(max_length=255, blank=True, db_index=True)
    ark = models.CharField(max_length=255, blank=True, db_index=True)
    title = models.TextField(blank=True)
    message = models.TextField(blank=True)
    # The message's cause (ui.signatures.cause_of), written with it: causes are counted and
    # listed by this index, not by reading every message.
    signature = models.CharField(max_length=255, blank=True, default="")
    last_modified = models.DateTimeField(null=True, db_index=True)
    configuration = models.JSONField(default=dict)
    identifiers = models.JSONField(null=True)
    metadata = models.JSONField(null=True)
    inventory = models.JSONField(null=True)
    store = models.JSONField(null=True)
    locked = models.BooleanField(default=False)
    status_version = models.IntegerField(default=-1)
    read_at = models.DateTimeField()
    # When the job's nodes were found gone from ZooKeeper (cleanup, retention): the row stays
    # as its history, found by ARK, local id and title long after the queue forgot it.
    removed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-jid"]
        indexes = [
            models.Index(fields=["status", "-jid"]),
            models.Index(fields=["status", "priority", "jid"]),
            models.Index(fields=["collection", "-jid"]),
            models.Index(fields=["batch", "-jid"]),
            models.Index(fields=["status", "last_successful_status"]),
            models.Index(fields=["status", "signature"]),
            # The jobs a worker holds, oldest change first (/locks/): a few rows among
            # millions, found without reading the others.
            models.Index(
                fields=["last_modified"], condition=models.Q(locked=True), name="job_locked"
            ),
            # The dashboard's counts of what is still in the queue, from the index alone.
            models.Index(
                fields=["status"], condition=models.Q(removed_at=None), name="job_unremoved_status"
            ),
            # Covers a bulk action's summary (steering.actions.wholefilter): no row read.
            models.Index(
                fields=["status", "collection", "locked", "last_successful_status", "profile"],
                name="job_bulk_summary",
            ),
            # The jobs removed since a moment (mirror.moment): few among millions.
            models.Index(
                fields=["removed_at"],
                condition=models.Q(removed_at__isnull=False),
                name="job_removed_at",
            ),
        ]

    def __str__(self) -> str:
        return self.jid

    def get_absolute_url(self) -> str:
        """The job's page in the app (the Django admin's "View on site")."""
        return reverse("jobs:detail", args=[self.jid])


class JobEvent(models.Model):
    """One status write of a job: one row per status version (mirror.timeline).

    ``exact`` rows were told by their writer (the item's history node, or the store's
    write-through): their previous state and actor are the real ones. Other rows are
    what the mirror saw afterwards; a later exact row for the same version replaces one.
    ``from_status`` is empty when the previous state is not known (a jump: the versions
    between this row and the one before it were not observed).
    """

    jid = models.CharField(max_length=20, db_index=True)
    bid = models.CharField(max_length=20, blank=True, db_index=True)
    from_status = models.CharField(max_length=20, blank=True)
    # Indexed with ``at`` and ``bid`` (Meta): the dashboard's Throughput panel counts and
    # times the Completed and Failed rows of a week from that index alone.
    to_status = models.CharField(max_length=20)
    at = models.DateTimeField(db_index=True)
    message = models.TextField(blank=True)
    retry_count = models.PositiveIntegerField(default=0)
    # Who made it, as merritt_queue.core.history spells it: "admin:<username>",
    # "worker <host>:<pid>", "cleanup", "check_tree --repair", "Merritt ingest".
    actor = models.CharField(max_length=150, blank=True)
    status_version = models.IntegerField(default=-1)
    exact = models.BooleanField(default=False)

    class Meta:
        ordering = ["jid", "status_version"]
        indexes = [
            models.Index(fields=["to_status", "at", "bid"], name="jobevent_status_at_bid"),
            # The jobs that failed again and again (ui.quarantine): their Failed rows counted
            # per job from this index alone, in its order.
            models.Index(fields=["to_status", "jid"], name="jobevent_status_jid"),
            # The jobs written after a moment (mirror.moment), read from this index alone.
            models.Index(fields=["at", "jid"], name="jobevent_at_jid"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["jid", "status_version"], name="one_event_per_status_write"
            )
        ]


class MirrorState(models.Model):
    """When the mirror was last brought up to date, and how (shown as its freshness)."""

    name = models.CharField(max_length=50, unique=True)
    at = models.DateTimeField()
    detail = models.JSONField(default=dict)


class JobSteps(models.Model):
    """What each attempt at a job's steps did: the job's ``steps`` node as last read
    (merritt_queue.core.steprecord), for the job page, its export and the status API.

    Written by the mirror beside the job's row (``mirror.steps``) and rebuilt from the node
    by ``reconcile --full``; a row stays when its job's row is purged, like the timeline.
    """

    jid = models.CharField(max_length=20, unique=True)
    # The node's JSON (``StepRecord.as_json``): attempts oldest first, and what was dropped.
    record = models.JSONField(default=dict)
    # The job's status version the node was read or written at, and the node's last
    # attempt: an older read never replaces a newer one (``mirror.steps``).
    status_version = models.IntegerField(default=-1)
    last_attempt = models.CharField(max_length=100, blank=True)
    damaged = models.BooleanField(default=False)
    read_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.jid


class LockSpan(models.Model):
    """One lock node's life as the mirror's reads saw it (``mirror.lockspans``), so that the
    queue at a moment can say which locks were held then. The node's path and creation time
    name the span: a lock deleted and taken again is a new span. Its start is exact (the
    node's ctime); its end is known only to lie between ``last_seen_at`` and
    ``gone_seen_at``, the last read that found it and the first that did not."""

    path = models.CharField(max_length=400)
    kind = models.CharField(max_length=20)
    name = models.CharField(max_length=300)
    owner = models.CharField(max_length=30, blank=True)  # the ephemeral owner's session
    data = models.CharField(max_length=200, blank=True)
    taken_at = models.DateTimeField()
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    gone_seen_at = models.DateTimeField(null=True, blank=True)  # None: held at the last read

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["path", "taken_at"], name="lockspan_path_taken"),
        ]
        indexes = [
            models.Index(fields=["taken_at", "gone_seen_at"], name="lockspan_overlap"),
            models.Index(
                fields=["path"], condition=models.Q(gone_seen_at=None), name="lockspan_open"
            ),
        ]
