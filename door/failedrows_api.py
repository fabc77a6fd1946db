"""Failed rows, round trip, over the API, for a bearer token: the batch's failed rows as
checkm; corrections uploaded for a preview (JSON, with a ``confirm`` value); the preview
confirmed with a reason. The same rules as the pages (``steering.actions.batchpatch``): a
reader of the batch's collection downloads, an operator of it corrects.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST, require_safe
from kazoo.exceptions import KazooException

from batches.models import Batch
from door.tokens import with_token_user
from merritt_queue.core.errors import QueueError
from merritt_queue.project.runtime import get_store
from steering.actions import batchpatch
from steering.actions.catalog import ACTIONS
from steering.models import AdminAction
from steering.permissions import collections_of, refusal
from ui.reading_scope import may_read, readable_collections


def _readable(user, bid: str) -> bool:
    batch = Batch.objects.filter(bid=bid).only("collection").first()
    return batch is not None and may_read(user, batch.collection)


def _errors(problems: list[str], status: int) -> JsonResponse:
    return JsonResponse({"errors": problems}, status=status)


def _not_found(bid: str) -> JsonResponse:
    return _errors([f"no batch {bid[:100]!r} is known to this token"], 404)


@require_safe
@with_token_user
def failed_rows(request, user, bid: str):
    if not _readable(user, bid):
        return _not_found(bid)
    try:
        text = batchpatch.failed_rows(
            get_store(init=False), bid, scrubbed=readable_collections(user) is not None
        )
    except batchpatch.PatchRefused as e:
        return _errors(e.problems, e.status)
    except (QueueError, KazooException) as e:
        return _errors([f"the queue is unavailable: {e}"], 503)
    return HttpResponse(text, content_type="text/plain; charset=utf-8")


@csrf_exempt
@require_POST
@with_token_user
def corrections(request, user, bid: str):
    """The preview of the manifest in the body (or the ``manifest`` file of a form)."""
    if not _readable(user, bid):
        return _not_found(bid)
    if problem := refusal(user, ACTIONS[batchpatch.ACTION]):
        return _errors([problem], 403)
    upload = request.FILES.get("manifest")
    limit = settings.MQ_MAX_MANIFEST_BYTES + 1
    data = upload.read(limit) if upload else request.body[:limit]
    try:
        plan = batchpatch.plan(get_store(init=False), bid, data, collections_of(user))
    except batchpatch.PatchRefused as e:
        return _errors(e.problems, e.status)
    except (QueueError, KazooException) as e:
        return _errors([f"the queue is unavailable, nothing was written: {e}"], 503)
    body = plan.params() | {"confirm": batchpatch.sign(user, plan)}
    return JsonResponse(body)


@csrf_exempt
@require_POST
@with_token_user
def confirm(request, user, bid: str):
    """``confirm`` (from the preview) and ``reason``, as form fields."""
    if not _readable(user, bid):
        return _not_found(bid)
    if problem := refusal(user, ACTIONS[batchpatch.ACTION]):
        return _errors([problem], 403)
    try:
        data = batchpatch.read(user, request.POST.get("confirm", ""), bid)
        used = AdminAction.objects.filter(token=data["token"]).first()
        record = used or batchpatch.apply(user, data, request.POST.get("reason", ""))
    except batchpatch.PatchRefused as e:
        return _errors(e.problems, e.status)
    items = record.items.filter(part_of="").order_by("id")
    return JsonResponse(
        {
            "admin_action": record.pk,
            "repeated": used is not None,
            "done": record.done,
            "skipped": record.skipped,
            "failed": record.failed,
            "jobs": [
                {"jid": i.item_id, "result": i.result, "detail": i.detail, "after": i.after_status}
                for i in items
            ],
        }
    )
