import logging

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django_tables2 import RequestConfig

from batches.filters import BatchFilter
from batches.forms import SubmitForm
from batches.models import Batch
from batches.tables import SelectBatchTable, batch_rows, job_counts_text
from door import kept_uploads, rights
from door.manifest_door import ManifestRefused
from door.middleware import length_problem
from door.submission import (
    READ_ONLY_PROBLEM,
    SubmissionError,
    Upload,
    submit,
)
from jobs import history_export
from jobs.tables import JobTable, job_rows
from jobs.timeline_view import batch_timeline
from jobs.waitcells import waiting_context
from jobs.waitorder import batch_waiting
from merritt_queue.deposit.uploads import shown_payload
from notifications.views import batch_section
from steering.actions.correctionlinks import correction_links
from ui.fields import fields_of
from ui.links import job_link
from ui.listing import collection_names, filtered_table, record_links
from ui.reading_scope import readable_rows, require_readable
from ui.removals import removal_of_row, removed_page

log = logging.getLogger(__name__)

MAX_REPORT_LINKS = 500
SUBMIT_PAGE = "batches/submit.html"


@login_required
def submit_form(request):
    if settings.READ_ONLY:  # refused before the body is read, and the page says why
        if request.method != "POST":  # no form to fill in
            return render(request, SUBMIT_PAGE, {"read_only": READ_ONLY_PROBLEM})
        context: dict[str, object] = {"refused": READ_ONLY_PROBLEM, "read_only": READ_ONLY_PROBLEM}
        return render(request, SUBMIT_PAGE, context, status=503)
    refused = request.method == "POST" and length_problem(request, api=False)
    if refused:  # refused before Django reads the upload to a temporary file
        status, reason = refused
        context = {"form": SubmitForm(), "refused": reason}
        return render(request, SUBMIT_PAGE, context, status=status)
    if refusal := rights.submit_refusal(request.user, None):  # POSTs never get here (guard)
        context = {"refused": refusal, "cannot": True}
        return render(request, SUBMIT_PAGE, context, status=403)
    collections = rights.submit_collections(request.user)
    form = SubmitForm(request.POST or None, request.FILES or None, collections=collections)
    if request.method != "POST":
        return render(request, SUBMIT_PAGE, {"form": form})
    if not form.is_valid():
        return render(request, SUBMIT_PAGE, {"form": form, **_still_kept(request)}, status=400)
    return _submitted(request, form)


def _submitted(request, form: SubmitForm):
    """The valid form submitted: the next empty form, or this one again, filled, saying why."""
    upload = _upload(request, form)
    try:
        return _answer(request, form, upload)
    finally:
        if upload is not None and not form.cleaned_data.get("file"):
            upload.file.close()


def _upload(request, form: SubmitForm) -> Upload | None:
    """The file chosen now, else the one kept from the last try when the person asks for it;
    a kept file not asked for is let go."""
    if f := form.cleaned_data.get("file"):
        kept_uploads.forget(request.session)
        return Upload(f.name, f, f.size)
    if request.POST.get("use_kept"):
        return kept_uploads.take(request.session)
    kept_uploads.forget(request.session)
    return None


def _answer(request, form: SubmitForm, upload: Upload | None):
    try:
        result = submit(form.service_data(), upload, by=request.user)
    except ManifestRefused as e:
        context = {"form": form, "manifest": e.report, **_kept(request, upload)}
        return render(request, SUBMIT_PAGE, context, status=400)
    except SubmissionError as e:
        for problem in e.problems:
            form.add_error(None, problem)
        context = {"form": form, **_kept(request, upload)}
        return render(request, SUBMIT_PAGE, context, status=e.status)
    if result.duplicate:  # with what became of the earlier batch, and the way on
        context = {"form": form, "earlier": earlier_batch(result), **_kept(request, upload)}
        return render(request, SUBMIT_PAGE, context, status=409)
    messages.success(request, f"Batch submitted as {result.bid}.")
    if result.awaiting_approval:
        messages.info(
            request,
            f"Its profile asks an operator to approve each batch: {result.bid} waits as "
            "Awaiting approval, and you are told when it is approved or rejected.",
        )
    if hook := result.webhook:
        messages.warning(
            request,
            f"Your webhook's subscription id is {hook['subscription_id']} and its "
            f"signing secret {hook['secret']}: give them to the receiver; the secret "
            "is not shown again.",
        )
    return redirect("batches:submit")


def _kept(request, upload: Upload | None) -> dict:
    """The file of a form shown again, kept for the next try (a browser never sends it again
    by itself), or, when it cannot be kept, its name, to be chosen again."""
    if upload is None:
        return {}
    try:
        return {"kept_name": kept_uploads.keep(request.session, upload)}
    except OSError:
        log.warning("an upload could not be kept for the retry", exc_info=True)
        return {"upload_name": upload.name}


def _still_kept(request) -> dict:
    """For a form refused by its own fields: the file it sent, kept, or the one kept before
    and asked for again, still kept."""
    if f := request.FILES.get("file"):
        return _kept(request, Upload(f.name, f, f.size))
    if request.POST.get("use_kept") and (name := kept_uploads.kept_name(request.session)):
        return {"kept_name": name}
    return {}


def earlier_batch(result) -> dict:
    """The batch a batchID already names, as the form tells of it: the status ZooKeeper
    answered, with the mirror's time and message when the mirror has that status too."""
    row = Batch.objects.filter(bid=result.bid, status=result.status).first()
    return {
        "bid": result.bid,
        "batch_id": result.batch_uuid,
        "status": result.status,
        "since": row.last_modified if row else None,
        "message": row.message if row else "",
        "rerunnable": result.rerunnable,
    }


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
        # A big batch's report lists only some ids (store.batch_moves.write_status_report) and
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
        "submission": fields_of(shown_payload(batch.submission)),
        "report": report,
        "report_lists": report_lists(report),
        "jobs": jobs,
        "timeline": batch_timeline(batch),
        **batch_section(request.user, batch.bid),
        **correction_links(request.user, batch),
        **waiting_context(batch_waiting(batch), request.user),
        "removal": removal_of_row("batch", batch.bid, batch.bid) if batch.removed_at else None,
    }
    return render(request, "batches/batch_detail.html", context)


@login_required
def batch_history_export(request, bid: str, fmt: str):
    """The batch's rows, then all its jobs' rows."""
    batch = get_object_or_404(Batch.objects.only("bid", "collection"), bid=bid)
    require_readable(request.user, batch.collection)
    filters = history_export.Filters(bid=batch.bid)
    return history_export.response(fmt, filters, None, f"{batch.bid}-history")
