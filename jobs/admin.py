from django.contrib import admin

from jobs.models import Job
from steering.admin import ReadOnlyAdmin, scope_actions


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ("jid", "batch_id", "collection", "status", "retry_count", "last_modified")
    list_filter = ("status",)
    search_fields = ("=jid", "=ark", "=local_id", "=collection")
    show_full_result_count = False
    actions = scope_actions("job", "jid")
