"""What an admin action's confirmation page lists: whether the action applies to each item,
and why not; for a batch delete, its jobs deleted too; for a collection's release, the
held items it releases. A resume's steps, and the plan put together, are ``plans``."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.db.models import Count, Q
from django.utils.timezone import localtime

from batches.models import Batch, Profile
from jobs.models import Job, awaiting_review
from merritt_queue.core.states import BatchStatus, JobStatus
from merritt_queue.project.runtime import get_store
from steering.actions import reviews
from steering.actions.kinds import Action, Target
from steering.permissions import collections_of
from steering.windows.listing import active_for

J, B = JobStatus, BatchStatus


@dataclass(frozen=True)
class PlanItem:
    target: Target
    applies: bool
    why: str = ""


RELEASES = ("job.release", "batch.release")


@dataclass(frozen=True)
class Waits:
    """What the listed items may wait for, read once for the whole page (a selection can
    hold thousands of items): the held collections, each batch's Held jobs."""

    held_collections: frozenset[str] = frozenset()
    held_jobs: dict[str, int] | None = None
    # For an approval or a rejection: the listed jobs that await one.
    awaiting: frozenset[str] | None = None

    @classmethod
    def of(cls, action: Action, targets: list[Target]) -> Waits:
        if action.name in RELEASES:
            # A hold Merritt wrote under one of a collection's profiles holds it too.
            names = get_store(init=False).holds.held_collections()
            of_profile = profile_collections()
            held = {*names, *(of_profile[n] for n in names if n in of_profile)}
            return cls(held_collections=frozenset(held))
        if action.name in reviews.ACTIONS:
            rows = Job.objects.filter(awaiting_review(), jid__in=[t.id for t in targets])
            return cls(awaiting=frozenset(rows.values_list("jid", flat=True)))
        if action.name == "batch.update_reporting":
            rows = Job.objects.filter(batch_id__in=[t.id for t in targets], status=J.HELD)
            counts = rows.values_list("batch_id").annotate(n=Count("id")).order_by()
            return cls(held_jobs=dict(counts))
        return cls()


def plan(user, action: Action, targets: list[Target]) -> list[PlanItem]:
    """Whether the action applies to each item, and why not."""
    scope = collections_of(user)
    waits = Waits.of(action, targets)
    return [judge(action, t, scope, waits) for t in targets]


def judge(action: Action, t: Target, scope: set[str] | None, waits: Waits) -> PlanItem:
    why = action.check(t, scope)
    if why is not None:
        return PlanItem(t, False, why)
    if waits.awaiting is not None and t.id not in waits.awaiting:
        return PlanItem(t, False, reviews.NOT_AWAITING)
    return PlanItem(t, True, _extra_note(action, t, waits))


# The releases a maintenance window on now undoes at its next check
# (``steering.windows.scheduler``).
WINDOW_RELEASES = {
    "queue.resume": "queue",
    "collection.release": "collection",
    "access.unpause": "access",  # the window's scope is the queue's: access-small, access-large
}


def _extra_note(action: Action, t: Target, waits: Waits) -> str:
    if action.name in WINDOW_RELEASES and (note := _window_note(action, t)):
        return note
    if action.name in RELEASES and t.collection in waits.held_collections:
        what = action.scope.value
        return (
            f"warning: collection {t.collection} is on hold, so the {what} will be held again "
            f"until the collection is released (Release on the collection's page)"
        )
    if waits.held_jobs and (held := waits.held_jobs.get(t.id, 0)):
        return report_wait(held)
    return action.warning


def _window_note(action: Action, t: Target) -> str:
    scope = WINDOW_RELEASES[action.name]
    if scope == "access":
        scope = f"access-{t.id}"
    on = active_for(scope, t.id if scope == "collection" else "")
    if not on:
        return ""
    names = ", ".join(
        f"window {s.window.pk} (until {localtime(s.occurrence.end):%Y-%m-%d %H:%M %Z})"
        for s in on
        if s.occurrence
    )
    return (
        f"warning: maintenance {names} holds it: the window puts the hold back at its next "
        "check, within a minute; to end the window early, cancel it (Maintenance windows)"
    )


def _collection_held(collection: str) -> bool:
    return bool(collection) and get_store(init=False).holds.is_collection_held(collection)


def held_jobs(bid: str) -> int:
    """The batch's Held jobs, as the mirror shows them: its report waits for them."""
    return Job.objects.filter(batch_id=bid, status=J.HELD).count()


def report_wait(held: int) -> str:
    verb, them = ("is", "it") if held == 1 else ("are", "them")
    return (
        f"warning: the report waits while {held} of its jobs {verb} Held; release {them} "
        f"(Release) or delete {them} (Delete) to let it finish"
    )


def batch_waits(bid: str, status: str, collection: str) -> str:
    """What a batch is waiting for that no worker will end, and the action that ends it."""
    if status in (B.PENDING, B.HELD) and _collection_held(collection):
        return (
            f"Collection {collection} is on hold: this batch is held (again) until the "
            f"collection is released (Release on the collection's page)."
        )
    if status == B.UPDATE_REPORTING and (held := held_jobs(bid)):
        text = report_wait(held).removeprefix("warning: ")
        return text[0].upper() + text[1:] + "."
    return ""


def also_deleted(bids: list[str]) -> dict[str, list[tuple[str, str]]]:
    """For a batch delete: each batch's jobs deleted with it (Failed or Held), as the mirror
    shows them, so the confirmation page can list every one."""
    found: dict[str, list[tuple[str, str]]] = {bid: [] for bid in bids}
    rows = Job.objects.filter(batch_id__in=bids, status__in=(J.FAILED, J.HELD))
    for bid, jid, status in rows.order_by("jid").values_list("batch_id", "jid", "status"):
        # The batch's bid (to_field); the stubs take batch_id for the primary key.
        found[bid].append((jid, status))  # type: ignore[index]
    return found


def other_holds(collections: list[str]) -> dict[str, list[str]]:
    """Per collection, the hold names another tool (Merritt's admin) placed: a release keeps
    them unless the person ticks the confirmation page's box."""
    store = get_store(init=False)
    out = {}
    for collection in collections:
        names = [n for n, ours in store.holds.collection_holds(collection).items() if not ours]
        if names:
            out[collection] = names
    return out


# How many of a collection's held batches and jobs its release's confirmation names.
HELD_NAMED = 5
# The releases whose confirmation lists the collection's held items: those its hold caught,
# or every one.
HELD_LISTS = {"collection.release": True, "collection.release_all": False}


@dataclass(frozen=True)
class HeldList:
    """A collection's held batches and jobs, as the mirror shows them: how many, the first
    few ids, and where the whole list is."""

    collection: str
    batches: int
    batch_ids: list[str]
    batches_href: str
    jobs: int
    job_ids: list[str]
    jobs_href: str

    @property
    def total(self) -> int:
        return self.batches + self.jobs


def held_lists(collections: list[str], *, by_hold_only: bool) -> dict[str, HeldList]:
    """Per collection, its Held batches and jobs; with ``by_hold_only``, those its hold
    caught: the message a hold gives what it holds (``held_by_a_hold``), not a person's."""
    caught = (Q(message__startswith="collection ") | Q(message__startswith="profile ")) & Q(
        message__contains=" is on hold"
    )
    out = {}
    for mnemonic in collections:
        found = {}
        # A batch awaiting approval waits for a person, not the hold: no release starts it.
        not_awaiting = {Batch: Q(approval__isnull=True), Job: Q()}
        for model in (Batch, Job):
            rows = model.objects.filter(not_awaiting[model], collection=mnemonic, status=J.HELD)
            rows = rows.filter(caught) if by_hold_only else rows
            key = "bid" if model is Batch else "jid"
            found[key] = (
                rows.count(),
                list(rows.order_by(key).values_list(key, flat=True)[:HELD_NAMED]),
            )
        query = urlencode({"collection": mnemonic, "status": J.HELD})
        out[mnemonic] = HeldList(
            mnemonic,
            found["bid"][0],
            found["bid"][1],
            f"/batches/?{query}",
            found["jid"][0],
            found["jid"][1],
            f"/jobs/?{query}",
        )
    return out


def profile_collections() -> dict[str, str]:
    """Each profile's collection: a mirror row of Merritt's names only its profile."""
    return dict(Profile.objects.values_list("name", "collection"))
