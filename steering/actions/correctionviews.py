"""The batch page's "Download failed rows" and "Upload corrections": the manifest of the
batch's failed jobs, an upload of it corrected, a preview of each job's changes and each
refused row, and the confirmation with a reason (``steering.actions.batchpatch``).

A reader of the batch's collection (a depositor included) may download; uploading and
confirming need the role of ``job.edit_resume`` (operator) within the person's collections.
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from kazoo.exceptions import KazooException

from batches.models import Batch
from merritt_queue.core import jobparams
from merritt_queue.core.errors import QueueError
from merritt_queue.project.runtime import get_store
from steering import confirmations
from steering.actions import batchpatch
from steering.actions.catalog import ACTIONS
from steering.models import AdminAction
from steering.permissions import collections_of, refusal
from ui.reading_scope import readable_collections, require_readable

UPLOAD_PAGE = "steering/corrections.html"
PREVIEW_PAGE = "steering/corrections_preview.html"


class UploadForm(forms.Form):
    manifest = forms.FileField(
        label="Corrected manifest",
        help_text="the failed-rows manifest of this batch, its rows corrected; keep each "
        "row's '# jid…' comment above it",
    )


def _batch(request, bid: str) -> Batch:
    batch = Batch.objects.filter(bid=bid).first()
    if batch is None:
        raise Http404(f"no batch {bid}")
    require_readable(request.user, batch.collection)
    return batch


@login_required
def download(request, bid: str):
    _batch(request, bid)
    try:
        text = batchpatch.failed_rows(
            get_store(init=False), bid, scrubbed=readable_collections(request.user) is not None
        )
    except batchpatch.PatchRefused as e:
        return HttpResponse(str(e), status=e.status, content_type="text/plain; charset=utf-8")
    except (QueueError, KazooException) as e:
        return HttpResponse(f"ZooKeeper could not be read: {e}", status=503)
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{bid}-failed-rows.checkm"'
    return response


@never_cache
@login_required
def upload(request, bid: str):
    batch = _batch(request, bid)
    action = ACTIONS[batchpatch.ACTION]
    if problem := refusal(request.user, action):
        return confirmations.refused(request, action, problem)
    if request.method != "POST":
        return _upload_page(request, batch, UploadForm())
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _upload_page(request, batch, form, status=400)
    data = form.cleaned_data["manifest"].read(settings.MQ_MAX_MANIFEST_BYTES + 1)
    try:
        plan = batchpatch.plan(get_store(init=False), bid, data, collections_of(request.user))
    except batchpatch.PatchRefused as e:
        return _upload_page(request, batch, form, e.problems, e.status)
    except (QueueError, KazooException) as e:
        return _upload_page(request, batch, form, [f"ZooKeeper could not be read: {e}"], 503)
    payload = batchpatch.sign(request.user, plan)
    return _preview(request, batch, {"params": plan.params()}, payload)


@require_POST
@login_required
def confirm(request, bid: str):
    batch = _batch(request, bid)
    action = ACTIONS[batchpatch.ACTION]
    if problem := refusal(request.user, action):
        return confirmations.refused(request, action, problem)
    payload = request.POST.get("payload", "")
    try:
        data = batchpatch.read(request.user, payload, bid)
    except batchpatch.PatchRefused as e:
        return _upload_page(request, batch, UploadForm(), e.problems, 400)
    used = AdminAction.objects.filter(token=data["token"]).first()
    if used is not None:  # a second click, or Back and again: never act twice
        return redirect(reverse("steering:result", args=[used.pk]))
    reason = request.POST.get("reason", "").strip()
    try:
        record = batchpatch.apply(request.user, data, reason)
    except batchpatch.PatchRefused as e:
        return _preview(request, batch, data, payload, "; ".join(e.problems), status=400)
    return redirect(reverse("steering:result", args=[record.pk]))


def _upload_page(request, batch, form, problems=(), status=200):
    context = {"batch": batch, "form": form, "problems": list(problems)}
    return render(request, UPLOAD_PAGE, context, status=status)


def _preview(request, batch, data: dict, payload: str, error: str = "", status: int = 200):
    """The plan as signed: each job's changes, and each row refused or unchanged."""
    params = data["params"]
    rows = [
        {
            "jid": jid,
            "line": params["lines"][jid],
            "step": params["steps"][jid],
            "changes": [
                (jobparams.LABELS.get(name, name), before, after)
                for name, (before, after) in changes.items()
            ],
        }
        for jid, changes in params["each"].items()
    ]
    context = {
        "batch": batch,
        "rows": rows,
        "refused": params["refused"],
        "unchanged": params["unchanged"],
        "untouched": params["untouched"],
        "payload": payload,
        "error": error,
        "reason": request.POST.get("reason", "") if error else "",
    }
    return render(request, PREVIEW_PAGE, context, status=status)
