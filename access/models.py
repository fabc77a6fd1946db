"""The access queue's mirror rows (see docs/access-queue.md for the fields' sources)."""

from __future__ import annotations

from django.db import models

QUEUE_CHOICES = [("small", "small"), ("large", "large")]


class AccessRequest(models.Model):
    """One request of ``/access/<queue>`` as last read, kept (``removed_at``) once removed."""

    key = models.CharField(max_length=24, unique=True)  # "small/qid0000000042"
    queue = models.CharField(max_length=8, choices=QUEUE_CHOICES, db_index=True)
    qid = models.CharField(max_length=16)
    # Empty when MerrittZK could not load the status (``problem`` says why).
    status = models.CharField(max_length=20, blank=True, db_index=True)
    status_version = models.IntegerField(default=-1)
    message = models.TextField(blank=True)
    last_modified = models.CharField(max_length=40, blank=True)  # as the writer spelled it
    status_changed_at = models.DateTimeField(null=True, blank=True)  # the status node's mtime
    created_at = models.DateTimeField(null=True, blank=True)  # the request node's ctime
    # The token, as Merritt's access service wrote it, and its fields.
    token = models.CharField(max_length=100, blank=True, db_index=True)
    token_status = models.CharField(max_length=20, blank=True)
    size = models.BigIntegerField(null=True, blank=True)  # cloud-content-byte
    delivery_node = models.IntegerField(null=True, blank=True)
    url = models.TextField(blank=True)
    anticipated_availability = models.CharField(max_length=64, blank=True)
    token_data = models.JSONField(default=dict, blank=True)
    # The object, when the token names one; its collection from the local inventory.
    ark = models.CharField(max_length=255, blank=True, db_index=True)
    collection = models.CharField(max_length=100, blank=True, db_index=True)
    locked = models.BooleanField(default=False)
    lock_owner = models.CharField(max_length=20, blank=True)  # ZooKeeper session id, hex
    problem = models.TextField(blank=True)
    read_at = models.DateTimeField()
    removed_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["queue", "qid"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "qid"], name="one_row_per_access_request")
        ]

    def __str__(self) -> str:
        return self.key


class AccessEvent(models.Model):
    """One status write of a request: one row per status version, as ``jobs.JobEvent``."""

    key = models.CharField(max_length=24, db_index=True)
    from_status = models.CharField(max_length=20, blank=True)
    to_status = models.CharField(max_length=20)
    at = models.DateTimeField(db_index=True)
    message = models.TextField(blank=True)
    actor = models.CharField(max_length=150, blank=True)
    status_version = models.IntegerField(default=-1)
    exact = models.BooleanField(default=False)

    class Meta:
        ordering = ["key", "status_version"]
        constraints = [
            models.UniqueConstraint(
                fields=["key", "status_version"], name="one_event_per_access_status_write"
            )
        ]
