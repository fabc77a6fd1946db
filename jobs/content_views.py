"""What Merritt storage fetches from this project: one job's add-manifest and its files.

No login: storage presents the signed URL (``contentlinks``) and nothing else. Every refusal
is the same 404, so a URL that is unsigned, tampered with, expired, another job's, or for a
job already recorded tells nothing about what exists.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import FileResponse, Http404
from django.views.decorators.http import require_safe

from merritt_queue.core.tree import is_job_id
from merritt_queue.project import runtime
from pipeline import contentlinks


@require_safe
def merritt_content(request, jid: str, name: str):
    if not is_job_id(jid) or not contentlinks.verified(jid, name, request.GET.get("s", "")):
        raise Http404
    # Storage fetches every file of the job: one node read each, not the whole job.
    status = runtime.get_store(init=False).jobs.job_node_values([jid], "status")[jid]
    if not contentlinks.servable(status):
        raise Http404
    path = contentlinks.content_file(Path(settings.MQ_WORK_DIR) / "jobs" / jid, name)
    if path is None:
        raise Http404
    response = FileResponse(path.open("rb"), content_type="application/octet-stream")
    response["Cache-Control"] = "no-store"
    return response
