import json

from django.contrib import admin

from jobs import merrittnotes
from jobs.models import Job
from steering.admin import ReadOnlyAdmin, scope_actions


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ("jid", "batch_id", "collection", "status", "retry_count", "last_modified")
    list_filter = ("status",)
    search_fields = ("=jid", "=ark", "=local_id", "=collection")
    show_full_result_count = False
    actions = scope_actions("job", "jid")
    # The store node's manifest URL opens the job's files: shown without its signature.
    exclude = ("store",)
    readonly_fields = ("store_shown",)

    @admin.display(description="store")
    def store_shown(self, job: Job) -> str:
        return json.dumps(merrittnotes.shown_store(job.store), indent=1)
