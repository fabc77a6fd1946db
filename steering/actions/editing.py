"""Edit and resume a failed job: its per-job parameters (``core.jobparams``) changed through
a form, checked at the door exactly as a submission's fields are, then confirmed.

The form shows the job as ZooKeeper holds it now, at its status version. A valid, changed
form leads to a confirmation page listing each field before -> after, the step the job
restarts at (no later than the step that uses what changed) and a reason; it is signed like
every confirmation (``steering.actions.views``) and executed by the same ``run``, so the token, the
permissions, the version check and the audit are the ones of every action. The edit and the
resume are one multi (``store.edits.edit_job_parameters``).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, QueryDict
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.text import capfirst
from django.views.decorators.cache import never_cache
from kazoo.exceptions import KazooException

from merritt_queue.core import jobparams
from merritt_queue.core.errors import NotFound, QueueError, ZooKeeperUnreachable
from merritt_queue.core.store import JobRecord, QueueStore
from merritt_queue.deposit.digest import normalise_algorithm
from merritt_queue.deposit.fields import TEXT_FIELDS
from merritt_queue.project.runtime import get_store
from steering import confirmations
from steering.actions import bulkedit
from steering.actions.catalog import ACTIONS
from steering.actions.editdoor import AlgorithmField, Problems, algorithm_choices, door_problems
from steering.actions.kinds import Target
from steering.actions.plans import steps_again
from steering.actions.staleness import changed_since
from steering.permissions import collections_of, refusal

ACTION = "job.edit_resume"
SALT = "steering.confirm"  # the same signature as every confirmation: ``run`` checks it


class EditForm(forms.Form):
    """The per-job parameters; a field left as shown is not changed."""

    version = forms.IntegerField(widget=forms.HiddenInput)

    def __init__(self, *args, digest: bool = True, algorithm: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        for name in jobparams.FIELDS:
            self.fields[name] = forms.CharField(
                required=False,
                strip=True,
                label=capfirst(jobparams.LABELS[name]),
                max_length=TEXT_FIELDS[name],
                widget=forms.TextInput(attrs={"size": 70}),
            )
        self.fields["digest_type"] = AlgorithmField(
            required=False,
            label=capfirst(jobparams.LABELS["digest_type"]),
            choices=algorithm_choices(algorithm),
        )
        if not digest:  # a digest applies to a single file or container only
            for name in ("digest_type", "digest_value"):
                self.fields[name].disabled = True
                self.fields[name].help_text = "a digest applies to a file or container job only"

    def add_problems(self, problems: Problems) -> None:
        """The door's problems shown beside the fields they are about."""
        for name, messages in problems.items():
            for message in messages:
                self.add_error(name, message)


def _target(store: QueueStore, job: JobRecord) -> Target:
    collection = store.holds.item_collection(job.configuration)
    return Target(job.jid, job.status, job.status_version, collection, job.locked)


@never_cache
@login_required
def edit_job(request, jid: str, *, error: str = ""):
    action = ACTIONS[ACTION]
    if problem := refusal(request.user, action):
        return confirmations.refused(request, action, problem)
    store = get_store(init=False)
    try:
        job = store.jobs.get_job(jid)
    except NotFound:
        raise Http404(f"no job {jid}") from None
    except ZooKeeperUnreachable as e:
        return _page(request, None, None, str(e), 503)
    except (QueueError, KazooException) as e:
        return _page(request, None, None, f"ZooKeeper could not be read ({e}); try again", 503)
    if why := action.check(_target(store, job), collections_of(request.user)):
        earlier = f"{error.removesuffix('; edit it again')}. " if error else ""
        return _page(request, job, None, f"{earlier}this job cannot be edited: {why}", 409)
    digest = (job.configuration or {}).get("payload_type") in ("file", "container")
    before = jobparams.current(job.configuration, job.identifiers, job.metadata)
    shown = before | {"digest_type": _algorithm(before["digest_type"])}
    kind = {"digest": digest, "algorithm": before["digest_type"]}
    fresh = EditForm(initial=shown | {"version": job.status_version}, **kind)
    if request.method != "POST" or error:
        return _page(request, job, fresh, error, 409 if error else 200)
    form = EditForm(request.POST, initial=shown, **kind)
    if not form.is_valid():
        return _page(request, job, form, "see the problems below", 400)
    if form.cleaned_data["version"] != job.status_version:
        seen = form.cleaned_data["version"]
        changed = changed_since(seen, job.status, job.status_version, job.history)
        return _page(request, job, fresh, f"{changed}; here it is now", 409)
    after = {name: form.cleaned_data[name] for name in jobparams.FIELDS}
    if problems := door_problems(job, after):
        form.add_problems(problems)
        return _page(request, job, form, "see the problems below", 400)
    changes = jobparams.changes_of(before, after)
    if not changes:
        return _page(request, job, form, "nothing changed: the job was not edited")
    return confirm_page(request, job, changes, _next(request))


def _algorithm(name: str) -> str:
    """The choice that shows ``name`` (a job of Merritt's may spell it ``SHA-256``)."""
    try:
        return normalise_algorithm(name) if name else ""
    except ValueError:
        return name


def _next(request) -> str:
    """Where the person came from, if it is a page of this site (as ``views.safe_next``)."""
    url = request.GET.get("next", "")
    ok = url.startswith("/") and url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return url if ok else ""


def _page(request, job, form, error: str = "", status: int = 200):
    context = {"job": job, "form": form, "error": error, "next": _next(request)}
    return render(request, "steering/edit_job.html", context, status=status)


def confirm_page(request, job: JobRecord, changes: dict, back: str, *, error="", reason=""):
    """The confirmation: before -> after, the steps offered, the reason."""
    steps = jobparams.resume_steps(job.last_successful_status, list(changes))
    default = jobparams.default_step(job.last_successful_status, list(changes))
    payload = confirmations.sign(
        request,
        SALT,
        compress=True,
        action=ACTION,
        items=[[job.jid, job.status_version]],
        selection="",
        steps=list(steps),
        back="",
        params={"changes": {n: list(pair) for n, pair in changes.items()}},
        edit={"jid": job.jid, "next": back},
    )
    context = {
        "action": ACTIONS[ACTION],
        "job": job,
        "changes": [(jobparams.LABELS[n], b, a) for n, (b, a) in changes.items()],
        "options": [
            {"step": s, "default": s == default, "again": steps_again(None, s)} for s in steps
        ],
        "latest": jobparams.latest_step(list(changes)),
        "payload": payload,
        "error": error,
        "reason": reason,
        "next": back,
    }
    return render(request, "steering/edit_confirm.html", context, status=400 if error else 200)


def confirm_again(request, data: dict, error: str, reason: str):
    """The confirmation shown again from its signed data (a missing reason, a bad step)."""
    edit = data.get("edit") or {}
    if "bulk" in edit:
        return bulkedit.confirm_again(request, data, error, reason)
    try:
        job = get_store(init=False).jobs.get_job(edit.get("jid", ""))
    except (QueueError, KazooException) as e:
        return _page(request, None, None, f"the job could not be read again ({e})", 503)
    changes = {n: tuple(pair) for n, pair in (data.get("params") or {})["changes"].items()}
    if job.status_version != data["items"][0][1]:
        why = changed_since(data["items"][0][1], job.status, job.status_version, job.history)
        request.GET = QueryDict(urlencode({"next": edit.get("next", "")}))
        return edit_job(request, job.jid, error=f"{why}; edit it again")
    return confirm_page(request, job, changes, edit.get("next", ""), error=error, reason=reason)
