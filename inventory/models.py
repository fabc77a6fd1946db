"""The local inventory: which objects, versions and files the repository holds.

Merritt's inventory service plays this part at scale; these tables are its
embedded default, written only by the Recording step through
``inventory.recorder.LocalInventory``.
"""

from django.db import models


class InventoryObject(models.Model):
    ark = models.CharField(max_length=255, unique=True)
    collection = models.CharField(max_length=100, db_index=True, blank=True)
    title = models.TextField(blank=True)
    creator = models.TextField(blank=True)
    date = models.CharField(max_length=100, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    modified = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.ark


class InventoryVersion(models.Model):
    obj = models.ForeignKey(InventoryObject, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    job_id = models.CharField(max_length=20, db_index=True)
    stored = models.DateTimeField()
    total_size = models.BigIntegerField(default=0)
    file_count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["obj", "number"], name="one_row_per_version")
        ]
        ordering = ["obj", "number"]

    def __str__(self) -> str:
        return f"{self.obj.ark} v{self.number}"


class InventoryFile(models.Model):
    version = models.ForeignKey(InventoryVersion, on_delete=models.CASCADE, related_name="files")
    name = models.CharField(max_length=1024)
    size = models.BigIntegerField()
    md5 = models.CharField(max_length=32, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    mime_type = models.CharField(max_length=255, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "name"], name="one_row_per_file")]


class LocalIdentifier(models.Model):
    """A depositor's local id within a collection, bound to one ARK for good."""

    collection = models.CharField(max_length=100)
    local_id = models.CharField(max_length=255)
    ark = models.CharField(max_length=255, db_index=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["collection", "local_id"], name="one_ark_per_local_id")
        ]
