"""The "Check a manifest" page: every error and warning of a manifest, nothing submitted, and
with a profile chosen among those the person may submit to, the pre-flight summary of
submitting it (``batches.preflight``)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from batches.forms import TYPE_CHOICES
from batches.models import Profile
from batches.preflight import summarise
from door import rights
from door.manifest_check_api import manifest_bytes, profile_refusal, too_often
from merritt_queue.core.planning import KIND_TYPE, TYPE_WORDS, type_to_pick
from merritt_queue.deposit.manifestcheck import check_manifest
from pipeline.capacity import batch_row_limit

TEMPLATE = "batches/manifest_check.html"


@login_required
def check_manifest_page(request):
    if refusal := rights.submit_refusal(request.user, None):
        return render(request, TEMPLATE, {"refused": refusal}, status=403)
    offered = {"types": TYPE_CHOICES, "profiles": profiles_of(request.user)}
    if request.method != "POST":
        return render(request, TEMPLATE, offered)
    if limited := too_often(request.user):
        response = render(request, TEMPLATE, {"refused": limited[0]}, status=429)
        response["Retry-After"] = str(limited[1])
        return response
    limit = settings.MQ_MAX_MANIFEST_BYTES
    upload = request.FILES.get("file") if request.content_type == "multipart/form-data" else None
    if upload:
        data, refused = manifest_bytes(request, limit)
    else:
        data, refused = request.POST.get("text", "").encode("utf-8"), None
    if refused is not None:
        return render(request, TEMPLATE, {"refused": refused[1]}, status=refused[0])
    profile = request.POST.get("profile", "")
    # A profile it may not have refuses the pre-flight, not the check: the text stays.
    no_flight = profile_refusal(request.user, profile) if profile else None
    report = check_manifest(data or b"", max_bytes=limit, max_batch_rows=batch_row_limit())
    shown = report.as_json()  # the API's items: values capped, credentials hidden
    chosen = request.POST.get("type", "")
    pick = type_to_pick(chosen, report.kind) if chosen and report.kind else None
    if pick:  # refused by a submission of that type too (door.manifest_door)
        shown["errors"].append({"line": None, "field": "type", "value": chosen, "message": pick})
    context = {
        "report": report,
        "errors": shown["errors"],
        "warnings": shown["warnings"],
        # Kept, to be corrected and checked again: the text typed, or the uploaded file's.
        "text": kept_text(data) if upload else request.POST.get("text", ""),
        "upload_name": upload.name if upload else "",
        **offered,
        "chosen": chosen,
        "chosen_profile": profile,
        "preflight": summarise(data or b"", profile=profile) if profile and not no_flight else None,
        "preflight_refused": no_flight[1] if no_flight else "",
        "pick": pick,
        "right_type": TYPE_WORDS.get(KIND_TYPE.get(report.kind, ""), ""),
    }
    return render(request, TEMPLATE, context, status=no_flight[0] if no_flight else 200)


def profiles_of(user) -> list[str]:
    """The names of the profiles ``user`` may submit with, for the pre-flight's choice."""
    collections = rights.submit_collections(user)
    found = Profile.objects.order_by("name")
    if collections is not None:
        found = found.filter(collection__in=collections)
    return list(found.values_list("name", flat=True))


def kept_text(data: bytes | None) -> str:
    """An uploaded manifest's text for the text box, or nothing when it is not UTF-8 text."""
    try:
        return (data or b"").decode("utf-8")
    except UnicodeDecodeError:
        return ""
