import json

from django.contrib import admin

from jobs import merrittnotes
from jobs.models import Job, awaiting_review
from merritt_queue.deposit.uploads import shown_payload
from steering.admin import ReadOnlyAdmin, scope_actions


class AwaitingReviewFilter(admin.SimpleListFilter):
    """The jobs whose destructive update waits for a person: approve or reject them with
    the actions above the list (each through its confirmation page)."""

    title = "destructive update"
    parameter_name = "awaiting"

    def lookups(self, request, model_admin):
        return [("1", "awaiting approval")]

    def queryset(self, request, queryset):
        return queryset.filter(awaiting_review()) if self.value() == "1" else queryset


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ("jid", "batch_id", "collection", "status", "retry_count", "last_modified")
    list_filter = ("status", AwaitingReviewFilter)
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
