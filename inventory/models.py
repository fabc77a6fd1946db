"""The local inventory: which objects, versions and files the repository holds.

Merritt's inventory service plays this part at scale; these tables are its
embedded default, written only by the Recording step through
``inventory.recorder.LocalInventory``.
"""

from django.db import models

from inventory.idsearch import ark_keys, local_key


class InventoryObject(models.Model):
    ark = models.CharField(max_length=255, unique=True)
    # The ARK as a search matches its start: normalised, and its name alone (idsearch).
    ark_key = models.CharField(max_length=255, db_index=True, blank=True, default="")
    ark_name = models.CharField(max_length=255, db_index=True, blank=True, default="")
    collection = models.CharField(max_length=100, db_index=True, blank=True)
    title = models.TextField(blank=True)
    creator = models.TextField(blank=True)
    date = models.CharField(max_length=100, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    modified = models.DateTimeField(auto_now=True)
    # Kept by the recorder with each version, so the object list sorts and shows them
    # from this row alone, however many objects there are.
    version_count = models.PositiveIntegerField(default=0)
    last_stored = models.DateTimeField(null=True, blank=True)

    class Meta:
        # The object list's orders, each ending on id so that pages never overlap.
        indexes = [
            models.Index(fields=["last_stored", "id"], name="inv_obj_last_stored"),
            models.Index(fields=["collection", "last_stored", "id"], name="inv_obj_coll_stored"),
            models.Index(fields=["version_count", "id"], name="inv_obj_versions"),
        ]

    def __str__(self) -> str:
        return self.ark

    def save(self, *args, **kwargs):
        self.ark_key, self.ark_name = ark_keys(self.ark)
        super().save(*args, **kwargs)


MODES = ("add", "update")
CHANGES = ("added", "replaced", "carried")


class InventoryVersion(models.Model):
    obj = models.ForeignKey(InventoryObject, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    job_id = models.CharField(max_length=20, db_index=True)
    stored = models.DateTimeField()
    total_size = models.BigIntegerField(default=0)
    file_count = models.PositiveIntegerField(default=0)
    # What the version changed; blank mode and zero counts on versions recorded before
    # the inventory kept them (the page then says it does not know).
    mode = models.CharField(max_length=10, blank=True, choices=[(m, m) for m in MODES])
    deleted = models.JSONField(default=list, blank=True)  # names this version removed
    added_count = models.PositiveIntegerField(default=0)
    replaced_count = models.PositiveIntegerField(default=0)
    carried_count = models.PositiveIntegerField(default=0)

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
    change = models.CharField(max_length=10, blank=True, choices=[(c, c) for c in CHANGES])

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "name"], name="one_row_per_file")]


class LocalIdentifier(models.Model):
    """A depositor's local id within a collection, bound to one ARK for good."""

    collection = models.CharField(max_length=100)
    local_id = models.CharField(max_length=255)
    # The local id as a search matches its start, in any case (idsearch).
    local_key = models.CharField(max_length=255, db_index=True, blank=True, default="")
    ark = models.CharField(max_length=255, db_index=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["collection", "local_id"], name="one_ark_per_local_id")
        ]
        # The object list's search finds a local id in any collection.
        indexes = [models.Index(fields=["local_id"], name="inv_local_id")]

    def save(self, *args, **kwargs):
        self.local_key = local_key(self.local_id)
        super().save(*args, **kwargs)
