"""Action buttons, action bars and audit links for the item and list pages."""

from __future__ import annotations

from urllib.parse import urlencode

from django import template
from django.conf import settings
from django.urls import reverse
from django.utils.html import format_html

from batches.models import Batch
from jobs.models import Job, awaiting_review
from merritt_queue.core.states import JobStatus
from merritt_queue.services.breakers import label
from steering.actions import reviews
from steering.actions.catalog import ACTIONS
from steering.actions.planning import batch_waits
from steering.actions.wording import action_words, is_dry_run, item_outcome, selection_words
from steering.models import AdminActionItem
from steering.permissions import role_of
from ui.links import batch_link, job_link

register = template.Library()
register.filter("action_words", action_words)
register.filter("is_dry_run", is_dry_run)
register.filter("selection_words", selection_words)
register.simple_tag(item_outcome, name="item_outcome")


def may(user, action) -> bool:
    """``steering.permissions.may``, with the person's role read once per request."""
    role = getattr(user, "_mq_role", None)
    if role is None:
        role = user._mq_role = role_of(user)
    return not settings.READ_ONLY and role >= action.role


def confirm_url(name: str, **query) -> str:
    url = reverse("steering:confirm", args=[name])
    return f"{url}?{urlencode(query)}" if query else url


def actions_for(user, scope: str, status: str | None = None) -> list:
    """The actions of ``scope`` the person may take (and that apply to ``status``)."""
    return [
        a
        for a in ACTIONS.values()
        if a.scope == scope and may(user, a) and (status is None or status in a.applies_to)
    ]


def may_select(user, scope: str) -> bool:
    """Whether the person may take any action on a list's rows: else no row checkboxes."""
    return bool(actions_for(user, scope))


@register.simple_tag
def item_link(scope: str, item_id: str):
    if scope == "job":
        return job_link(item_id)
    if scope == "batch":
        return batch_link(item_id)
    if scope == "collection":
        return format_html(
            '<a href="/jobs/?{}">{}</a>', urlencode({"collection": item_id}), item_id
        )
    if scope == "worker":
        return format_html('<a href="/workers/#worker-{}">worker {}</a>', item_id, item_id)
    if scope == "dependency":
        return format_html('<a href="/#dependencies">{}</a>', label(item_id))
    if scope == "access" and item_id.count("/") == 1:
        return format_html('<a href="/access/{}/">{}</a>', item_id, item_id)
    if scope == "access-queue":
        return format_html('<a href="/access/?queue={}">{} access queue</a>', item_id, item_id)
    return item_id


@register.inclusion_tag("steering/_buttons.html", takes_context=True)
def item_actions(context, scope: str, item_id: str, status: str | None = None):
    """Links to the confirmation page of each action on this item, and its audit trail."""
    request = context["request"]
    here = {"next": request.get_full_path()}
    actions = actions_for(request.user, scope, status)
    if scope == "job" and status == JobStatus.HELD and not _awaits_review(item_id):
        actions = [a for a in actions if a.name not in reviews.ACTIONS]
    links = [(a, _item_url(a, scope, item_id, here)) for a in actions]
    key = {"job": "job", "batch": "batch", "collection": "collection"}.get(scope)
    audit = f"{reverse('steering:audit')}?{urlencode({key: item_id})}" if key else ""
    return {"links": links, "audit": audit, "waits": _waits(scope, item_id, status)}


def _awaits_review(jid: str) -> bool:
    return Job.objects.filter(awaiting_review(), jid=jid).exists()


def _item_url(action, scope: str, item_id: str, here: dict) -> str:
    if action.form:  # a page of its own (a form) before the confirmation
        return f"{reverse(action.form, args=[item_id])}?{urlencode(here)}"
    if scope == "queue":
        return confirm_url(action.name)
    return confirm_url(action.name, ids=item_id, **here)


def _waits(scope: str, item_id: str, status: str | None) -> str:
    """What a batch waits for that no worker ends, shown beside its actions."""
    if scope != "batch" or not status:
        return ""
    collection = Batch.objects.filter(bid=item_id).values_list("collection", flat=True).first()
    return batch_waits(item_id, status, collection or "")


# Not the person's choices: a selection's edit's per-job changes, a run's place in its filter.
HIDDEN_PARAMS = ("each", "after")


@register.filter
def shown_params(params: dict) -> list:
    """An action's parameters as its result page names them; a selection's edit keeps each
    job's change too, which that job's own row shows."""
    return [(key, value) for key, value in (params or {}).items() if key not in HIDDEN_PARAMS]


@register.inclusion_tag("steering/_bar.html", takes_context=True)
def action_bar(context, scope: str, table=None):
    """The list pages' bar: an action, then "selected" or "all N matching this filter"."""
    request = context["request"]
    paginator = getattr(table, "paginator", None)
    uncounted = getattr(paginator, "lazy", False) or getattr(paginator, "capped", False)
    total = None if paginator is None or uncounted else paginator.count
    filters = [
        (k, v)
        for k in request.GET
        if k not in ("page", "sort", "per_page", "ids", "all", "action", "mode")
        for v in request.GET.getlist(k)
    ]
    return {
        "actions": [
            a
            for a in ACTIONS.values()
            if a.scope == scope and may(request.user, a) and (a.form_many or not a.form)
        ],
        "filters": filters,
        "total": total,
        "form_id": f"mq-actions-{scope}",
        "next": request.get_full_path(),
    }


@register.inclusion_tag("steering/_item_audit.html")
def admin_actions_on(item_id: str):
    """The admin actions taken on one item, newest first (shown under a job's timeline)."""
    items = (
        AdminActionItem.objects.filter(item_id=item_id)
        .select_related("admin_action")
        .order_by("-admin_action__started", "-id")[:100]
    )
    return {"items": items, "item_id": item_id}


@register.inclusion_tag("steering/_buttons.html", takes_context=True)
def collection_actions(context, mnemonic: str, held: bool = False):
    """Hold or release a collection, release its held items, and its audit trail."""
    user = context["request"].user
    names = ["collection.release", "collection.release_all"] if held else ["collection.hold"]
    if not held:
        names.append("collection.release_all")
    links = [(ACTIONS[n], confirm_url(n, ids=mnemonic)) for n in names if may(user, ACTIONS[n])]
    audit = f"{reverse('steering:audit')}?{urlencode({'collection': mnemonic})}"
    return {"links": links, "audit": audit}


@register.inclusion_tag("steering/_buttons.html", takes_context=True)
def queue_actions(context, paused=None):
    """Pause or resume the queue (both when the mirror does not know which it is)."""
    user = context["request"].user
    names = {True: ["queue.resume"], False: ["queue.pause"]}.get(
        paused, ["queue.pause", "queue.resume"]
    )
    links = [(ACTIONS[n], confirm_url(n)) for n in names if may(user, ACTIONS[n])]
    return {"links": links, "audit": f"{reverse('steering:audit')}?scope=queue"}
