import json

from django.contrib import admin

from jobs import merrittnotes
from jobs.models import Job
from merritt_queue.deposit.uploads import shown_payload
from steering.admin import ReadOnlyAdmin, scope_actions


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ("jid", "batch_id", "collection", "status", "retry_count", "last_modified")
    list_filter = ("status",)
    search_fields = ("=jid", "=ark", "=local_id", "=collection")
    show_full_result_count = False
    actions = scope_actions("job", "jid")
    # The store node's manifest URL opens the job's files: shown without its signature.
    # An uploaded payload's file: URL is a path on this server: shown as the file's name.
    exclude = ("store", "configuration")
    readonly_fields = ("store_shown", "configuration_shown")

    @admin.display(description="store")
    def store_shown(self, job: Job) -> str:
        return json.dumps(merrittnotes.shown_store(job.store), indent=1)

    @admin.display(description="configuration")
    def configuration_shown(self, job: Job) -> str:
        return json.dumps(shown_payload(job.configuration), indent=1)
