"""The "Check a manifest" page: every error and warning of a manifest, nothing submitted."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from batches import rights
from batches.capacity import batch_row_limit
from batches.manifest_check_api import manifest_bytes, too_often
from merritt_queue.deposit.manifestcheck import check_manifest

TEMPLATE = "batches/manifest_check.html"


@login_required
def check_manifest_page(request):
    if refusal := rights.submit_refusal(request.user, None):
        return render(request, TEMPLATE, {"refused": refusal}, status=403)
    if request.method != "POST":
        return render(request, TEMPLATE, {})
    if limited := too_often(request.user):
        response = render(request, TEMPLATE, {"refused": limited[0]}, status=429)
        response["Retry-After"] = str(limited[1])
        return response
    limit = settings.MQ_MAX_MANIFEST_BYTES
    if request.content_type == "multipart/form-data" and request.FILES.get("file"):
        data, refused = manifest_bytes(request, limit)
    else:
        data, refused = request.POST.get("text", "").encode("utf-8"), None
    if refused is not None:
        return render(request, TEMPLATE, {"refused": refused[1]}, status=refused[0])
    report = check_manifest(data or b"", max_bytes=limit, max_batch_rows=batch_row_limit())
    shown = report.as_json()  # the API's items: values capped, credentials hidden
    context = {
        "report": report,
        "errors": shown["errors"],
        "warnings": shown["warnings"],
        "text": request.POST.get("text", ""),  # kept, to be corrected and checked again
    }
    return render(request, TEMPLATE, context)
