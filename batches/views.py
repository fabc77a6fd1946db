from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django_tables2 import RequestConfig

from batches import rights
from batches.filters import BatchFilter
from batches.forms import SubmitForm
from batches.middleware import length_problem
from batches.models import Batch
from batches.submission import (
    READ_ONLY_PROBLEM,
    SubmissionError,
    Upload,
    submit,
)
from batches.tables import SelectBatchTable, batch_rows, job_counts_text
from jobs import history_export
from jobs.tables import JobTable, job_rows
from jobs.timeline_view import batch_timeline
from notifications.views import batch_section
from ui.fields import fields_of
from ui.links import job_link
from ui.listing import collection_names, filtered_table, record_links
from ui.reading_scope import readable_rows, require_readable
from ui.removals import removed_page

MAX_REPORT_LINKS = 500


@login_required
def submit_form(request):
    if settings.READ_ONLY:  # refused before the body is read, and the page says why
        if request.method != "POST":  # no form to fill in
            return render(request, "batches/submit.html", {"read_only": READ_ONLY_PROBLEM})
        context = {"refused": READ_ONLY_PROBLEM, "read_only": READ_ONLY_PROBLEM}
        return render(request, "batches/submit.html", context, status=503)
    refused = request.method == "POST" and length_problem(request, api=False)
    if refused:  # refused before Django reads the upload to a temporary file
        status, reason = refused
        context = {"form": SubmitForm(), "refused": reason}
        return render(request, "batches/submit.html", context, status=status)
    if refusal := rights.submit_refusal(request.user, None):  # POSTs never get here (guard)
        context = {"refused": refusal, "cannot": True}
        return render(request, "batches/submit.html", context, status=403)
    collections = rights.submit_collections(request.user)
    form = SubmitForm(request.POST or None, request.FILES or None, collections=collections)
    if request.method == "POST" and form.is_valid():
        f = form.cleaned_data.get("file")
        upload = Upload(f.name, f, f.size) if f else None
        try:
            result = submit(form.service_data(), upload, by=request.user)
        except SubmissionError as e:
            for problem in e.problems:
                form.add_error(None, problem)
        else:
            note = "already submitted as" if result.duplicate else "submitted as"
            messages.success(request, f"Batch {note} {result.bid}.")
            if hook := result.webhook:
                messages.warning(
                    request,
                    f"Your webhook's subscription id is {hook['subscription_id']} and its "
                    f"signing secret {hook['secret']}: give them to the receiver; the secret "
                    "is not shown again.",
                )
            return redirect("batches:submit")
    return render(request, "batches/submit.html", {"form": form})


@login_required
def batch_list(request):
    rows = readable_rows(request.user, batch_rows())
    filterset, table = filtered_table(request, BatchFilter, rows, SelectBatchTable)
    return render(
        request,
        "batches/batch_list.html",
        {
            "filter": filterset,
            "table": table,
            "collections": collection_names(request.user),
            "record": record_links(request, collection="collection"),
        },
    )


def report_lists(report) -> list[dict]:
    """The status report's failed and successful jobs, at most MAX_REPORT_LINKS of each."""
    if not isinstance(report, dict):
        return []
    out = []
    for key, label, status in (
        ("failed_jobs", "Failed jobs", "Failed"),
        ("successful_jobs", "Successful jobs", "Completed"),
    ):
        jids = report.get(key) or []
        if not isinstance(jids, list):
            jids = [jids]
        jids = [str(j) for j in jids]
        links = [job_link(j) for j in jids[:MAX_REPORT_LINKS]]
        # A big batch's report lists only some ids (QueueStore.write_status_report) and
        # counts them all.
        total = report.get(key.replace("_jobs", "_count"))
        if not isinstance(total, int) or isinstance(total, bool) or total < len(jids):
            total = len(jids)
        out.append(
            {
                "label": label,
                "status": status,
                "links": links,
                "more": total - len(links),
                "total": total,
            }
        )
    return out


@login_required
def batch_detail(request, bid: str):
    batch = Batch.objects.filter(bid=bid).first()
    if batch is None:
        return removed_page(request, "batch", bid)
    require_readable(request.user, batch.collection)
    jobs = JobTable(job_rows().filter(batch_id=batch.bid))
    RequestConfig(request).configure(jobs)
    report = batch.status_report if isinstance(batch.status_report, dict) else None
    context = {
        "batch": batch,
        "job_counts": job_counts_text(batch.job_counts),
        "submission": fields_of(batch.submission),
        "report": report,
        "report_lists": report_lists(report),
        "jobs": jobs,
        "timeline": batch_timeline(batch),
        **batch_section(request.user, batch.bid),
    }
    return render(request, "batches/batch_detail.html", context)


@login_required
def batch_history_export(request, bid: str, fmt: str):
    """The batch's rows, then all its jobs' rows."""
    batch = get_object_or_404(Batch.objects.only("bid", "collection"), bid=bid)
    require_readable(request.user, batch.collection)
    filters = history_export.Filters(bid=batch.bid)
    return history_export.response(fmt, filters, None, f"{batch.bid}-history")
