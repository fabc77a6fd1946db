"""The audit trail of admin actions, and who may act on which collections."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from steering.windows.timing import Rule

VIEWER, OPERATOR, ADMINISTRATOR = "viewer", "operator", "administrator"


def group_names(user) -> frozenset[str]:
    """The user's groups, read once per user object (one request's pages ask several times)."""
    names = getattr(user, "_mq_group_names", None)
    if names is None:
        names = frozenset(user.groups.values_list("name", flat=True))
        user._mq_group_names = names
    return names


# Submitting is a right of its own, beside the steering ranks (batches.rights).
DEPOSITOR = "depositor"

# The maintenance operations (``steering.maintenance.operations``): one of each may run at a time.
MAINTENANCE = ("check-tree", "reconcile-full", "cleanup")


class AdminAction(models.Model):
    """One action taken by a person: what, on what, why, and how each item fared."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    username = models.CharField(max_length=150)
    action = models.CharField(max_length=40, db_index=True)
    scope = models.CharField(max_length=20)
    reason = models.TextField()
    # The list filter behind "all N matching", as a query string, when that was the selection.
    selection = models.TextField(blank=True)
    params = models.JSONField(default=dict)
    started = models.DateTimeField(auto_now_add=True, db_index=True)
    finished = models.DateTimeField(null=True)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    # Guards double submits: the confirmation page's token may be executed once.
    token = models.CharField(max_length=64, unique=True)
    # The [id, version] pairs to act on, kept so a queued action (mq-admin) can run them.
    pending_items = models.JSONField(default=list, blank=True)
    # What a maintenance operation found (findings, drift, what went), or why it failed.
    report = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-started"]
        constraints = [
            # A second start of a running operation fails here, whatever raced it.
            models.UniqueConstraint(
                fields=["action"],
                condition=models.Q(finished__isnull=True, action__in=MAINTENANCE),
                name="one_running_maintenance_of_a_kind",
            )
        ]

    def __str__(self) -> str:
        return f"{self.action} by {self.username}"

    @property
    def progress(self) -> int:
        """Items handled so far, whatever their result."""
        return self.done + self.skipped + self.failed

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, self.progress * 100 // self.total)


class AdminActionItem(models.Model):
    RESULTS = [("done", "done"), ("skipped", "skipped"), ("failed", "failed")]
    # What the audit shows of each item, in order (the admin's inline, the CSV export).
    AUDIT_FIELDS = (
        "item_id",
        "collection",
        "before_status",
        "before_version",
        "after_status",
        "after_version",
        "result",
        "detail",
    )

    admin_action = models.ForeignKey(AdminAction, on_delete=models.CASCADE, related_name="items")
    item_id = models.CharField(max_length=100, db_index=True)
    collection = models.CharField(max_length=100, blank=True, db_index=True)
    before_status = models.CharField(max_length=20, blank=True)
    after_status = models.CharField(max_length=20, blank=True)
    before_version = models.IntegerField(null=True)
    after_version = models.IntegerField(null=True)
    result = models.CharField(max_length=10, choices=RESULTS)
    detail = models.TextField(blank=True)
    # The item this one was acted on with (a batch's job deleted with it): not counted in
    # the action's totals, which count the items the person chose.
    part_of = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["admin_action", "id"]


class CollectionScope(models.Model):
    """Limits a person's actions to some collections; no row means every collection.

    For submitting, a depositor's row is an allow-list: a depositor with no row (or an empty
    list) may submit to no collection (batches.rights).
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scope"
    )
    collections = models.JSONField(default=list, help_text='Collection mnemonics, e.g. ["demo"].')

    def __str__(self) -> str:
        return f"{self.user}: {', '.join(self.collections)}"

    def clean(self) -> None:
        from batches.models import mnemonic_problem

        if not isinstance(self.collections, list) or not all(
            isinstance(m, str) for m in self.collections
        ):
            raise ValidationError({"collections": 'a list of mnemonics, e.g. ["demo"]'})
        problems = [p for m in self.collections if (p := mnemonic_problem(m))]
        if problems:
            raise ValidationError({"collections": problems})


class MaintenanceWindow(models.Model):
    """A scheduled queue pause or collection hold, one-off or weekly (``steering.windows.timing``).

    Never deleted: a cancelled window keeps its row, as the history of what was planned.
    The ``applied_*`` fields are what the scheduler did (``steering.windows.scheduler``), kept here
    so that a dispatcher started again neither misses an occurrence nor applies one twice.
    """

    QUEUE, COLLECTION = "queue", "collection"
    # Merritt's access (assembly) queues, paused by their own locks (docs/access-queue.md).
    ACCESS_SMALL, ACCESS_LARGE = "access-small", "access-large"
    ACCESS_SCOPES = {ACCESS_SMALL: "small", ACCESS_LARGE: "large"}
    SCOPES = [
        (QUEUE, "the whole queue (pause)"),
        (COLLECTION, "one collection (hold)"),
        (ACCESS_SMALL, "the small access queue (pause)"),
        (ACCESS_LARGE, "the large access queue (pause)"),
    ]
    ONCE, WEEKLY = "none", "weekly"
    RECURRENCES = [(ONCE, "once"), (WEEKLY, "weekly")]
    WEEKDAYS = list(
        enumerate(("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"))
    )

    scope = models.CharField(max_length=20, choices=SCOPES)
    collection = models.CharField(max_length=100, blank=True, db_index=True)
    recurrence = models.CharField(max_length=10, choices=RECURRENCES, default=ONCE)
    # Once: the window itself. Weekly: the first and the last moment an occurrence may begin
    # (either may be empty).
    start = models.DateTimeField(null=True, blank=True)
    end = models.DateTimeField(null=True, blank=True)
    weekday = models.PositiveSmallIntegerField(null=True, blank=True, choices=WEEKDAYS)
    time_of_day = models.TimeField(null=True, blank=True)
    duration = models.DurationField(null=True, blank=True)
    time_zone = models.CharField(max_length=64, default="UTC")
    reason = models.TextField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by_name = models.CharField(max_length=150)
    created = models.DateTimeField(auto_now_add=True)
    cancelled = models.DateTimeField(null=True, blank=True, db_index=True)
    cancelled_by = models.CharField(max_length=150, blank=True)
    cancel_reason = models.TextField(blank=True)
    # The occurrence applied now (start and end), None when none is; when it was applied.
    applied_start = models.DateTimeField(null=True, blank=True)
    applied_end = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    # Whether the hold is on because a window set it (this one, or one it overlapped): only
    # then may its end release it. A hold a person had set before stays.
    owns_hold = models.BooleanField(default=False)
    # The end of the last occurrence ended or recorded as missed: nothing before is looked at.
    handled_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return f"window {self.pk} ({self.target})"

    @property
    def target(self) -> str:
        """What it holds: ``queue`` or ``collection <mnemonic>``."""
        if self.scope in self.ACCESS_SCOPES:
            return f"{self.ACCESS_SCOPES[self.scope]} access queue"
        return "queue" if self.scope == self.QUEUE else f"collection {self.collection}"

    def rule(self) -> Rule:
        return Rule(
            start=self.start,
            end=self.end,
            weekly=self.recurrence == self.WEEKLY,
            weekday=self.weekday,
            time_of_day=self.time_of_day,
            duration=self.duration,
            zone=self.time_zone or "UTC",
        )


class ResumeRun(models.Model):
    """A resume of many failed jobs at a chosen pace (``steering.runs``): its plan, the jobs
    and the versions the confirmation showed, is its items, stored once; the dispatcher's
    tick resumes them a slice at a time (``steering.runs.driver``). Its admin action
    (``job.resume``) keeps each job's audit row, as a resume taken at once does."""

    PER_MINUTE, IN_FLIGHT = "per_minute", "in_flight"
    MODES = [(PER_MINUTE, "jobs per minute"), (IN_FLIGHT, "jobs at a time")]
    RUNNING, PAUSED, STOPPED, CANCELLED, FINISHED = (
        "running",
        "paused",
        "stopped",
        "cancelled",
        "finished",
    )
    STATES = [(s, s) for s in (RUNNING, PAUSED, STOPPED, CANCELLED, FINISHED)]

    action = models.OneToOneField(AdminAction, on_delete=models.CASCADE, related_name="run")
    mode = models.CharField(max_length=20, choices=MODES)
    rate = models.PositiveIntegerField()
    # Stops itself when more than this share of the resumed jobs that finished failed again
    # with one cause, once at least ``stop_min`` finished.
    stop_share = models.FloatField()
    stop_min = models.PositiveIntegerField()
    state = models.CharField(max_length=20, choices=STATES, default=RUNNING, db_index=True)
    why = models.TextField(blank=True)  # why it stopped, was cancelled or paused
    # Per minute: when the next job is due (the pace kept across ticks and restarts).
    next_at = models.DateTimeField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-pk"]

    def __str__(self) -> str:
        return f"resume run {self.pk}"

    @property
    def live(self) -> bool:
        return self.state in (self.RUNNING, self.PAUSED)


class ResumeRunItem(models.Model):
    """One job of a resume run and how it fared: waiting, being resumed (``sending``, until
    its audit row is read back), resumed, then completed or failed again (with the cause),
    or skipped (it moved since the confirmation, or is quarantined) or not resumed."""

    WAITING, SENDING, RESUMED = "waiting", "sending", "resumed"
    SKIPPED, NOT_RESUMED = "skipped", "not_resumed"
    COMPLETED, FAILED_AGAIN, DELETED = "completed", "failed_again", "deleted"

    run = models.ForeignKey(ResumeRun, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    jid = models.CharField(max_length=20)
    version = models.IntegerField(null=True)
    state = models.CharField(max_length=20, default=WAITING)
    after_version = models.IntegerField(null=True)
    cause = models.CharField(max_length=255, blank=True)
    message = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "position"]
        indexes = [models.Index(fields=["run", "state", "position"], name="resumerunitem_next")]
        constraints = [
            models.UniqueConstraint(fields=["run", "position"], name="one_item_per_position")
        ]


class DeletionRequest(models.Model):
    """A deletion asked for by one administrator, to be approved by another
    (``steering.twoperson``, ``MQ_TWO_PERSON_DELETION``): what it deletes, as judged when it
    was asked (each item at its version, or the list's filter and its count), and each half
    as an ``AdminAction``: the request (``deletion.request``) and the decision (the deletion
    itself when approved, ``deletion.reject`` or ``deletion.withdraw`` otherwise)."""

    REQUESTED, APPROVED, REJECTED, WITHDRAWN, EXPIRED = (
        "requested",
        "approved",
        "rejected",
        "withdrawn",
        "expired",
    )
    STATES = [(s, s) for s in (REQUESTED, APPROVED, REJECTED, WITHDRAWN, EXPIRED)]
    KINDS = [("jobs", "jobs"), ("batch", "batch"), ("purge", "purge")]

    kind = models.CharField(max_length=10, choices=KINDS)
    action = models.CharField(max_length=40)  # the action approving runs: job.delete, cleanup...
    # [id, version] pairs as judged when asked; empty for a filter or a cleanup.
    items = models.JSONField(default=list, blank=True)
    # What the request page lists: each item with its status, collection, size and what goes
    # with it; a filter's counts by collection; a cleanup's nodes and folders.
    shown = models.JSONField(default=dict, blank=True)
    params = models.JSONField(default=dict, blank=True)  # the action's own (filter moment...)
    selection = models.TextField(blank=True)  # the list's filter of an "all matching" request
    count = models.PositiveIntegerField(default=0)
    # The collections of its items: whoever approves must act on every one.
    collections = models.JSONField(default=list, blank=True)
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    requester_name = models.CharField(max_length=150)
    reason = models.TextField()
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    state = models.CharField(max_length=10, choices=STATES, default=REQUESTED, db_index=True)
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approver_name = models.CharField(max_length=150, blank=True)
    decided = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    # The confirmation's token: a request confirmed twice is made once.
    token = models.CharField(max_length=64, unique=True)
    request_record = models.OneToOneField(
        AdminAction, null=True, on_delete=models.SET_NULL, related_name="deletion_requested"
    )
    decision_record = models.OneToOneField(
        AdminAction,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="deletion_decided",
    )

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return f"deletion request {self.pk} ({self.action}, {self.state})"

    @property
    def open(self) -> bool:
        return self.state == self.REQUESTED
