"""Pages of a resume run: its progress (refreshed while it is live), and pausing, resuming
or cancelling it, each through a confirmation page with a reason and a one-use token, and
audited, as the other admin actions (``steering.actions.views``)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.http import Http404, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache

from steering import confirmations
from steering.actions import wholefilter
from steering.actions.catalog import Action, Scope
from steering.actions.execution import start
from steering.models import AdminAction, AdminActionItem, ResumeRun
from steering.permissions import Role, refusal
from steering.runs.driver import end
from steering.runs.progress import progress, top_cause
from steering.runs.starting import Pace, begin, begin_whole
from ui.reading_scope import reads_everything

SALT = "steering.runs"


def _control(verb: str, label: str, applies_to: tuple[str, ...], after: str) -> tuple[Action, str]:
    return Action(
        name=f"run.{verb}",
        scope=Scope.JOB,
        label=label,
        role=Role.OPERATOR,
        applies_to=frozenset(applies_to),
    ), after


R = ResumeRun
CONTROLS: dict[str, tuple[Action, str]] = {
    "pause": _control("pause", "Pause the resume run", (R.RUNNING,), R.PAUSED),
    "resume": _control("resume", "Resume the resume run", (R.PAUSED,), R.RUNNING),
    "cancel": _control("cancel", "Cancel the resume run", (R.RUNNING, R.PAUSED), R.CANCELLED),
}
RUN_ACTIONS = (*(f"run.{verb}" for verb in CONTROLS), "run.stopped")


def start_run(request, action: Action, items, reason: str, how: dict, pace: Pace):
    """The confirmed resume, as a run at ``pace``; its page."""
    with transaction.atomic():
        record, created = start(request.user, action, [], reason, **how)
        if created and wholefilter.filtered(record):
            begin_whole(record, pace)
        elif created:
            begin(record, items, pace)
    run = ResumeRun.objects.filter(action=record).first()
    if run is None:  # a confirmation used before, for a resume taken at once
        return redirect(reverse("steering:result", args=[record.pk]))
    return redirect(reverse("steering:run", args=[run.pk]))


def _readable(request, pk: int) -> ResumeRun:
    """A run, for a reader of every collection: its page counts and quotes every job of its
    plan, whose collections only the jobs themselves name (and a depositor of some would
    read the rest's results and failure messages)."""
    run = get_object_or_404(ResumeRun.objects.select_related("action"), pk=pk)
    if not reads_everything(request.user):
        raise Http404("no such run")
    return run


@never_cache
@login_required
def page(request, pk: int):
    run = _readable(request, pk)
    p = progress(run)
    top = top_cause(run)
    failed_href = ""
    if top is not None:
        failed_href = "/jobs/?" + urlencode({"status": "Failed", "signature": top.cause})
    controls = [
        (verb, action.label)
        for verb, (action, _) in CONTROLS.items()
        if run.state in action.applies_to and refusal(request.user, action) is None
    ]
    context = {"run": run, "p": p, "top": top, "failed_href": failed_href, "controls": controls}
    return render(request, "steering/run.html", context)


@never_cache
@login_required
def control(request, pk: int, verb: str):
    if verb not in CONTROLS:
        raise Http404(f"no {verb} of a run")
    action, after = CONTROLS[verb]
    run = _readable(request, pk)
    if problem := refusal(request.user, action):
        return confirmations.refused(request, action, problem)
    context = {"run": run, "verb": verb, "action": action, "p": progress(run)}
    if request.method != "POST":
        context["payload"] = confirmations.sign(request, SALT, run=run.pk, verb=verb)
        return render(request, "steering/run_control.html", context)
    data = confirmations.read(request, SALT)
    if isinstance(data, HttpResponseBadRequest):
        return data
    if data.get("run") != run.pk or data.get("verb") != verb:
        return HttpResponseBadRequest("This confirmation was made for another run or action.")
    reason = request.POST.get("reason", "").strip()
    if not reason:
        context.update(payload=request.POST["payload"], error="a reason is required")
        return render(request, "steering/run_control.html", context, status=400)
    try:
        with transaction.atomic():
            record = AdminAction.objects.create(
                user=request.user,
                username=request.user.get_username(),
                action=action.name,
                scope=Scope.JOB,
                reason=reason,
                params={"run": run.pk},
                token=data["token"],
                total=1,
                finished=timezone.now(),
            )
            _apply(record, run.pk, action, after, reason)
    except IntegrityError:  # the same confirmation submitted again: nothing is done twice
        pass
    return redirect(reverse("steering:run", args=[run.pk]))


def _apply(record: AdminAction, pk: int, action: Action, after: str, reason: str) -> None:
    """Change the run's state, read under a row lock, when the action still applies."""
    run = ResumeRun.objects.select_for_update().get(pk=pk)
    before = run.state
    if before in action.applies_to:
        if after == ResumeRun.CANCELLED:
            end(run, after, f"cancelled by {record.username}: {reason}")
        else:
            run.state, run.next_at = after, None  # resumed: the pace starts afresh, no burst
            run.why = f"paused by {record.username}: {reason}" if after == ResumeRun.PAUSED else ""
            run.save(update_fields=["state", "next_at", "why", "updated"])
        result, detail = "done", f"resume run {pk}: {before} -> {after}"
    else:
        result, detail = "skipped", f"resume run {pk} is {before}: nothing done"
    AdminActionItem.objects.create(
        admin_action=record,
        item_id=f"run-{pk}",
        before_status=before,
        after_status=after if result == "done" else before,
        result=result,
        detail=detail,
    )
    setattr(record, result, 1)
    record.save(update_fields=[result])
