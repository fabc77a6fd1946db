"""The queue at a moment (mirror.moment): each job's and batch's state as of a time, rebuilt
from the record (JobEvent, BatchEvent), checked against a plain replay of that record; the
holds, pauses and windows of the audit; a diff between two moments; the refusals; and the
command. No ZooKeeper: the record is the mirror's."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from batches.models import Batch, BatchEvent
from jobs.models import Job, JobEvent
from mirror.moment import diff, holds, states, when, windows
from mirror.moment.scope import EVERYTHING, Scope
from steering.models import AdminAction, AdminActionItem, MaintenanceWindow

pytestmark = pytest.mark.django_db

BASE = timezone.make_aware(datetime(2026, 3, 10, 12, 0))


def at(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


def job(n: int, path: list[tuple[int, str, str, int]], collection="demo", **fields) -> Job:
    """Job ``n`` with its record: (version, from, to, seconds) each; its row in the last state."""
    for version, old, new, seconds in path:
        JobEvent.objects.create(
            jid=f"jid{n:010d}",
            bid="bid0000000001",
            from_status=old,
            to_status=new,
            at=at(seconds),
            status_version=version,
            exact=True,
        )
    return Job.objects.create(
        jid=f"jid{n:010d}",
        batch_id="bid0000000001",
        collection=collection,
        profile=f"{collection}_content",
        status=path[-1][2],
        status_version=path[-1][0],
        read_at=at(path[-1][3]),
        **fields,
    )


def batch(n: int, path: list[tuple[int, str, str, int]], collection="demo") -> Batch:
    for version, old, new, seconds in path:
        BatchEvent.objects.create(
            bid=f"bid{n:010d}",
            from_status=old,
            to_status=new,
            at=at(seconds),
            status_version=version,
            exact=True,
        )
    return Batch.objects.create(
        bid=f"bid{n:010d}",
        collection=collection,
        profile=f"{collection}_content",
        status=path[-1][2],
        read_at=at(path[-1][3]),
    )


def make_record() -> None:
    """Five jobs and a batch whose records the tests read at many moments."""
    job(
        1,
        [
            (0, "", "Pending", 0),
            (1, "Pending", "Estimating", 100),
            (2, "Estimating", "Completed", 300),
        ],
    )
    job(2, [(0, "", "Pending", 50), (1, "Pending", "Held", 200)], collection="other")
    job(3, [(0, "", "Pending", 400)])
    job(
        4,
        [(0, "", "Pending", 10), (1, "Pending", "Failed", 150), (2, "Failed", "Deleted", 320)],
        removed_at=at(350),
    )
    # Versions 1 and 2 were never observed: its state between 20 s and 280 s is not known.
    job(5, [(0, "", "Pending", 20), (3, "", "Storing", 280)])
    batch(
        1,
        [
            (0, "", "Pending", 0),
            (1, "Pending", "Processing", 30),
            (2, "Processing", "Completed", 310),
        ],
    )


@pytest.fixture
def record(db):
    make_record()


def replay(model, events, key: str, moment: datetime) -> Counter:
    """The plain replay: each row's latest version at or before the moment, if it was there."""
    count: Counter = Counter()
    for row in model.objects.all():
        mine = [e for e in events if getattr(e, key) == getattr(row, key) and e.at <= moment]
        if not mine or (row.removed_at is not None and row.removed_at <= moment):
            continue
        count[max(mine, key=lambda e: e.status_version).to_status] += 1
    return count


MOMENTS = [-10, 0, 5, 99, 100, 150, 250, 299, 300, 330, 360, 500]


@pytest.mark.parametrize("seconds", MOMENTS)
def test_counts_at_a_moment_are_the_replay_of_the_record(record, seconds):
    moment = at(seconds)
    jobs = states.counts(moment, "job", EVERYTHING)
    assert jobs.by_state == +replay(Job, list(JobEvent.objects.all()), "jid", moment)
    batches = states.counts(moment, "batch", EVERYTHING)
    assert batches.by_state == +replay(Batch, list(BatchEvent.objects.all()), "bid", moment)


def test_counts_agree_with_a_replay_of_a_random_record():
    rng = random.Random(36)
    steps = ["Pending", "Estimating", "Provisioning", "Downloading", "Storing", "Completed"]
    for n in range(1, 80):
        start = rng.randint(0, 1000)
        path, old = [], ""
        for version, new in enumerate(steps[: rng.randint(1, len(steps))]):
            path.append((version, old, new, start + version * rng.randint(1, 90)))
            old = new
        removed = {"removed_at": at(rng.randint(0, 1600))} if rng.random() < 0.2 else {}
        job(n, path, collection=rng.choice(["demo", "other"]), **removed)
    events = list(JobEvent.objects.all())
    for seconds in sorted(rng.randint(-50, 1700) for _ in range(25)):
        counts = states.counts(at(seconds), "job", EVERYTHING)
        assert counts.by_state == +replay(Job, events, "jid", at(seconds)), seconds
        assert sum(counts.by_state.values()) == sum(
            sum(c.values()) for c in counts.by_collection.values()
        )


def test_the_moment_now_is_the_live_mirror(record):
    live = Counter(Job.objects.filter(removed_at__isnull=True).values_list("status", flat=True))
    assert states.counts(timezone.now(), "job", EVERYTHING).by_state == live
    assert states.counts(when.parse("now"), "job", EVERYTHING).by_state == live


def test_items_in_a_state_at_a_moment_are_listed_by_id(record):
    page = states.items(at(250), "job", "Pending", EVERYTHING)
    assert [i.id for i in page.rows] == ["jid0000000005"]
    assert page.rows[0].now == "Storing"
    held = states.items(at(250), "job", "Held", EVERYTHING)
    assert [i.id for i in held.rows] == ["jid0000000002"]
    failed = states.items(at(250), "job", "Failed", EVERYTHING)
    assert [(i.id, i.now) for i in failed.rows] == [("jid0000000004", "removed")]
    assert states.items(at(360), "job", "Deleted", EVERYTHING).rows == []
    paged = states.items(at(500), "job", "Completed", EVERYTHING, per=1)
    assert [i.id for i in paged.rows] == ["jid0000000001"] and not paged.more


def test_a_scope_sees_its_collections_only(record):
    demo = Scope(frozenset({"demo"}), frozenset())
    counts = states.counts(at(250), "job", demo)
    assert "Held" not in counts.by_state  # jid2 is of "other"
    assert states.items(at(250), "job", "Held", demo).rows == []
    assert set(counts.by_collection) == {"demo"}


def test_changes_not_observed_are_counted_as_uncertain(record):
    assert states.counts(at(250), "job", EVERYTHING).uncertain == 1  # jid5
    assert states.counts(at(300), "job", EVERYTHING).uncertain == 0


def audit(action: str, scope: str, item: str, seconds: int, detail="", result="done") -> None:
    record = AdminAction.objects.create(
        username="ada",
        action=action,
        scope=scope,
        reason=f"why {action}",
        token=f"{action}{item}{seconds}",
    )
    AdminAction.objects.filter(pk=record.pk).update(started=at(seconds))
    AdminActionItem.objects.create(
        admin_action=record,
        item_id=item,
        collection=item if scope == "collection" else "",
        result=result,
        detail=detail,
    )


def test_holds_and_pauses_as_they_stood(db):
    audit("collection.hold", "collection", "demo", 100)
    audit("collection.release", "collection", "demo", 300)
    audit("collection.hold", "collection", "other", 120, result="skipped")
    audit("queue.pause", "queue", "ingest", 50)
    audit(
        "window.end",
        "queue",
        "ingest",
        150,
        detail="window 3: ended; the hold stays on: a person set it before the window",
    )
    audit("queue.resume", "queue", "ingest", 250)
    assert [h.collection for h in holds.holds_at(at(200), EVERYTHING)] == ["demo"]
    assert holds.holds_at(at(200), EVERYTHING)[0].reason == "why collection.hold"
    assert holds.holds_at(at(400), EVERYTHING) == []
    assert holds.holds_at(at(200), Scope(frozenset({"other"}), frozenset())) == []
    assert holds.pause_at(at(10)) is None
    assert holds.pause_at(at(200)).by == "ada"
    assert holds.pause_at(at(260)) is None
    changes = holds.changes_between(at(90), at(260), EVERYTHING)
    assert [(c.target, c.began) for c in changes] == [("demo", True), ("queue", False)]
    # Lifted here, but Merritt's admin's hold stayed: still held.
    audit("collection.hold", "collection", "kept", 100)
    audit(
        "collection.release",
        "collection",
        "kept",
        300,
        detail="done; the hold(s) Merritt's admin or another tool set under /x stay (tick ...)",
    )
    assert [h.collection for h in holds.holds_at(at(400), EVERYTHING)] == ["kept"]


def test_windows_on_at_a_moment(db):
    w = MaintenanceWindow.objects.create(
        scope="queue", start=at(100), end=at(200), reason="upgrade", created_by_name="ada"
    )
    MaintenanceWindow.objects.filter(pk=w.pk).update(created=at(0))
    cancelled = MaintenanceWindow.objects.create(
        scope="collection",
        collection="demo",
        start=at(100),
        end=at(200),
        reason="x",
        created_by_name="ada",
        cancelled=at(120),
    )
    MaintenanceWindow.objects.filter(pk=cancelled.pk).update(created=at(0))
    assert [x.pk for x in windows.windows_at(at(110), EVERYTHING)] == [w.pk, cancelled.pk]
    assert [x.pk for x in windows.windows_at(at(150), EVERYTHING)] == [w.pk]
    assert windows.windows_at(at(250), EVERYTHING) == []
    assert windows.windows_at(at(-5), EVERYTHING) == []  # not yet created
    assert windows.windows_at(at(150), Scope(frozenset({"other"}), frozenset()))[0].pk == w.pk


def test_diff_between_two_moments(record):
    audit("collection.hold", "collection", "demo", 120)
    d = diff.between(at(100), at(330), "job", EVERYTHING)
    assert d.counts_a.by_state == {"Estimating": 1, "Pending": 3}
    assert d.counts_b.by_state == {"Completed": 1, "Held": 1, "Deleted": 1, "Storing": 1}
    paths = {c.id: c.path for c in d.changed.rows}
    assert paths == {
        "jid0000000001": ["Estimating", "Completed"],
        "jid0000000002": ["Pending", "Held"],
        "jid0000000004": ["Pending", "Failed", "Deleted"],
        "jid0000000005": ["Pending", "?", "Storing"],
    }
    assert d.changed.total == 4
    assert [(c.target, c.began) for c in d.holds] == [("demo", True)]


def test_refusals_say_why(record):
    with pytest.raises(when.Refused, match="future"):
        when.check(timezone.now() + timedelta(hours=1))
    with pytest.raises(when.Refused, match="before the recorded history begins"):
        when.check(at(-3600))
    when.check(at(10))
    with pytest.raises(when.Refused, match="not a time"):
        when.parse("yesterday-ish")
    assert when.parse("2026-03-10T12:00:05Z") == at(5)
    assert when.parse("2026-03-10T12:00:05") == at(5)  # the site's zone
    assert when.parse("2026-03-10T13:00:05 01:00") == at(5)  # a "+" a URL made a space
    assert when.parse("2026-03-10 12:00:05") == at(5)
    with pytest.raises(when.Refused, match="after"):
        when.check_pair(at(300), at(100))


def test_a_moment_before_a_purge_says_what_is_missing(record):
    record_ = AdminAction.objects.create(
        username="system", action="cleanup", scope="queue", reason="retention", token="r1"
    )
    AdminAction.objects.filter(pk=record_.pk).update(started=at(450))
    AdminActionItem.objects.create(admin_action=record_, item_id="jid0000000099", result="done")
    AdminActionItem.objects.create(admin_action=record_, item_id="jid0000000001", result="done")
    missing = when.missing(at(400), EVERYTHING)
    assert missing.jobs == 1 and missing.batches == 0
    assert "retention" in missing.text and "jid0000000099" in missing.text
    assert when.missing(at(460), EVERYTHING).jobs == 0


def test_the_command_prints_a_moment_and_a_diff(record, capsys):
    call_command("moment", "--at", at(250).isoformat(), "--json")
    body = json.loads(capsys.readouterr().out)
    assert body["at"] == "2026-03-10T12:04:10Z" or body["at"].startswith("2026-03-10T")
    assert body["jobs"]["by_state"]["Held"] == 1
    call_command("moment", "--at", at(100).isoformat(), "--to", at(330).isoformat())
    out = capsys.readouterr().out
    assert "jid0000000004" in out and "Pending → Failed → Deleted" in out
    call_command("moment", "--at", "now", "--json")
    now = json.loads(capsys.readouterr().out)["jobs"]["by_state"]
    assert now == {"Completed": 1, "Held": 1, "Pending": 1, "Storing": 1}
    with pytest.raises(CommandError, match="before the recorded history begins"):
        call_command("moment", "--at", at(-3600).isoformat())


def test_writes_after_the_live_counts_were_read_do_not_skew_a_moment(record):
    states.counts(at(250), "job", EVERYTHING)  # reads the live counts once, and keeps them
    JobEvent.objects.create(
        jid="jid0000000001",
        from_status="Completed",
        to_status="Deleted",
        at=timezone.now() + timedelta(seconds=1),
        status_version=3,
        exact=True,
    )
    Job.objects.filter(jid="jid0000000001").update(status="Deleted", status_version=3)
    events = list(JobEvent.objects.all())
    assert states.counts(at(200), "job", EVERYTHING).by_state == +replay(
        Job, events, "jid", at(200)
    )


def test_holds_still_on_are_known_from_their_nodes_whoever_set_them(db):
    from batches.models import Collection
    from jobs.models import MirrorState

    Collection.objects.create(mnemonic="merritt", held=True, held_by="mrt-admin", held_at=at(50))
    # Merritt's own hold: an empty node, with a stale time in the row from an earlier hold.
    Collection.objects.create(mnemonic="bare", held=True, held_at=at(-500))
    made = {"kind": "collection", "name": "bare", "ctime": at(70).isoformat()}
    MirrorState.objects.create(
        name="locks",
        at=at(500),
        detail={"paused": True, "paused_at": at(60).isoformat(), "locks": [made]},
    )
    assert [(h.collection, h.by) for h in holds.holds_at(at(100), EVERYTHING)] == [
        ("bare", ""),
        ("merritt", "mrt-admin"),
    ]
    assert [h.collection for h in holds.holds_at(at(60), EVERYTHING)] == ["merritt"]
    assert holds.holds_at(at(10), EVERYTHING) == []
    assert holds.pause_at(at(100)).since == at(60)
    assert holds.pause_at(at(10)) is None
    changes = holds.changes_between(at(40), at(100), EVERYTHING)
    assert [(c.target, c.began, c.action_id) for c in changes] == [
        ("merritt", True, None),
        ("bare", True, None),
    ]


def test_a_limited_scope_is_told_of_removals_without_other_collections_ids_or_reasons(record):
    """Cleanup rows name no collection: a person limited to some sees neither the ids, nor
    how many, nor the administrators' reasons; only that something was removed."""
    record_ = AdminAction.objects.create(
        username="system", action="cleanup", scope="queue", reason="secret words", token="r2"
    )
    AdminAction.objects.filter(pk=record_.pk).update(started=at(450))
    AdminActionItem.objects.create(admin_action=record_, item_id="jid0000000099", result="done")
    limited = when.missing(at(400), Scope(frozenset({"demo"})))
    assert "jid0000000099" not in limited.text and "secret words" not in limited.text
    assert limited.jobs is None and limited.batches is None
    assert "removed" in limited.text
    assert "jid0000000099" in when.missing(at(400), EVERYTHING).text
    assert when.missing(at(460), Scope(frozenset({"demo"}))).text == ""


def test_access_queue_pauses_as_they_stood(db):
    """By hand (access.pause, scope access-queue) or by a window (scope access-small or
    access-large); each queue apart."""
    audit("access.pause", "access-queue", "small", 100)
    audit("access.unpause", "access-queue", "small", 300)
    audit("window.start", "access-large", "large", 200)
    audit("window.end", "access-large", "large", 400)
    audit("access.pause", "access-queue", "large", 150, result="skipped")
    assert holds.access_pauses_at(at(50)) == {"small": None, "large": None}
    mid = holds.access_pauses_at(at(250))
    assert mid["small"].by == "ada" and mid["small"].reason == "why access.pause"
    assert mid["large"].since == at(200)
    assert holds.access_pauses_at(at(350))["small"] is None
    assert holds.access_pauses_at(at(450)) == {"small": None, "large": None}
    assert holds.pause_at(at(250)) is None  # the ingest queue's pause is another
    changes = holds.changes_between(at(90), at(350), EVERYTHING)
    assert [(c.target, c.began) for c in changes] == [
        ("access-small", True),
        ("access-large", True),
        ("access-small", False),
    ]


def test_the_command_and_the_report_say_the_access_queues_pauses(record, capsys):
    audit("access.pause", "access-queue", "small", 100)
    call_command("moment", "--at", at(250).isoformat(), "--json")
    body = json.loads(capsys.readouterr().out)
    assert body["access_pauses"]["small"]["by"] == "ada"
    assert body["access_pauses"]["large"] is None
    call_command("moment", "--at", at(250).isoformat())
    out = capsys.readouterr().out
    assert "access small: paused since" in out and "access large: running" in out
