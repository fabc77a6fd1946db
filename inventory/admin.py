from django.contrib import admin

from inventory.models import InventoryFile, InventoryObject, InventoryVersion, LocalIdentifier


class VersionInline(admin.TabularInline):
    model = InventoryVersion
    extra = 0
    readonly_fields = (
        "number",
        "job_id",
        "stored",
        "mode",
        "total_size",
        "file_count",
        "added_count",
        "replaced_count",
        "carried_count",
        "deleted",
    )


@admin.register(InventoryObject)
class InventoryObjectAdmin(admin.ModelAdmin):
    list_display = ("ark", "collection", "title", "version_count", "last_stored")
    search_fields = ("ark", "title", "creator")
    list_filter = ("collection",)
    inlines = [VersionInline]


@admin.register(InventoryFile)
class InventoryFileAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "change", "size", "md5")
    search_fields = ("name", "version__obj__ark")


@admin.register(LocalIdentifier)
class LocalIdentifierAdmin(admin.ModelAdmin):
    list_display = ("local_id", "collection", "ark", "created")
    search_fields = ("local_id", "ark")
