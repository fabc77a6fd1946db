"""Maintenance windows through the web: the list, scheduling and cancelling (confirmation,
reason, one-use token, audit), the checks of the form, permissions, the dashboard."""

from __future__ import annotations

import re
from datetime import UTC, timedelta

import pytest
from django.utils import timezone

from batches.models import Profile
from steering.models import AdminAction, CollectionScope, MaintenanceWindow
from steering.windows.scheduler import apply_windows
from tests.pages import test_steering_actions as base

queue, people = base.queue, base.people  # the same fixtures

PAYLOAD = re.compile(r'name="payload" value="([^"]+)"')
LOCAL = "%Y-%m-%dT%H:%M"


def local(minutes: int) -> str:
    """A time ``minutes`` from now on the wall clock of UTC, as the form's input sends it."""
    return (timezone.now() + timedelta(minutes=minutes)).astimezone(UTC).strftime(LOCAL)


def form(**changes) -> dict:
    data = {
        "scope": "queue",
        "collection": "",
        "recurrence": "none",
        "time_zone": "UTC",
        "start": local(60),
        "end": local(120),
        "reason": "storage upgrade",
        "preview": "1",
    }
    return data | changes


def schedule(client, **changes):
    page = client.post("/windows/schedule", form(**changes))
    assert page.status_code == 200, page.content.decode()
    payload = PAYLOAD.search(page.content.decode()).group(1)
    return page, {"payload": payload, "reason": "storage upgrade"}


@pytest.fixture
def demo(db):
    return Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")


def test_an_administrator_schedules_a_window_once_whatever_the_double_submit(client, people, db):
    client.force_login(people["administrator"])
    assert "Schedule maintenance" in client.get("/windows/").content.decode()
    page, data = schedule(client)
    body = page.content.decode()
    assert "data-confirm-open" in body and "The whole queue is paused" in body
    assert client.post("/windows/schedule", data).status_code == 302
    assert client.post("/windows/schedule", data).status_code == 302  # again: nothing
    w = MaintenanceWindow.objects.get()
    assert (w.scope, w.reason, w.created_by_name) == ("queue", "storage upgrade", "ada")
    record = AdminAction.objects.get(action="window.create")
    assert record.username == "ada" and record.params == {"window": w.pk}
    listing = client.get("/windows/").content.decode()
    assert f'data-window="{w.pk}"' in listing and "window-upcoming" in listing
    home = client.get("/").content.decode()
    assert "Scheduled next" in home and "storage upgrade" in home


@pytest.mark.parametrize(
    "changes,error",
    [
        ({"reason": "  "}, "This field is required"),
        ({"end": local(30)}, "the end must come after the start"),
        ({"start": local(-300), "end": local(-200)}, "this window would be over already"),
        ({"end": local(60 * 24 * 8)}, "a window lasts at most 7 days"),
        ({"time_zone": "Mars/Olympus"}, "is not a time zone this host knows"),
        ({"scope": "collection", "collection": ""}, "name the collection to hold"),
        ({"scope": "collection", "collection": "no such"}, "is not a collection mnemonic"),
        ({"scope": "collection", "collection": "nowhere"}, "no collection nowhere is known"),
        ({"recurrence": "weekly", "weekday": "", "time_of_day": "02:00"}, "needs a weekday"),
        # A field of the other recurrence is refused, never quietly dropped (issue 32).
        ({"weekday": "2"}, "a one-off window runs from its start to its end and takes no weekday"),
        (
            {
                "recurrence": "weekly",
                "weekday": "6",
                "time_of_day": "02:00",
                "duration_minutes": "60",
            },
            "a weekly window takes a weekday, a time and a duration, not a start",
        ),
        (
            {
                "recurrence": "weekly",
                "weekday": "6",
                "time_of_day": "02:00",
                "duration_minutes": "1500",
            },
            "lasts at most",
        ),
    ],
)
def test_the_form_refuses_what_does_not_make_a_window(client, people, demo, changes, error):
    client.force_login(people["administrator"])
    page = client.post("/windows/schedule", form(**changes))
    assert page.status_code == 400
    assert error.lower() in page.content.decode().lower()
    assert not MaintenanceWindow.objects.exists() and not AdminAction.objects.exists()


def test_a_weekly_collection_window_is_confirmed_with_its_next_times(client, people, demo):
    client.force_login(people["administrator"])
    page, data = schedule(
        client,
        scope="collection",
        collection="demo",
        recurrence="weekly",
        weekday="6",
        time_of_day="01:30",
        duration_minutes="120",
        time_zone="America/Los_Angeles",
        start="",
        end="",
    )
    body = page.content.decode()
    assert "Collection <strong>demo</strong> is held" in body
    assert body.count("<li>") >= 4  # the next four Sundays
    client.post("/windows/schedule", data)
    w = MaintenanceWindow.objects.get()
    assert (w.weekday, w.time_of_day.hour, w.duration) == (6, 1, timedelta(hours=2))


def test_viewers_and_operators_see_the_windows_but_may_not_schedule_or_cancel(client, people, db):
    w = MaintenanceWindow.objects.create(
        scope="queue",
        start=timezone.now() + timedelta(hours=1),
        end=timezone.now() + timedelta(hours=2),
        reason="r",
        created_by_name="ada",
    )
    for who in ("viewer", "operator"):
        client.force_login(people[who])
        listing = client.get("/windows/").content.decode()
        assert f'data-window="{w.pk}"' in listing and "Schedule maintenance…" not in listing
        assert client.get("/windows/schedule").status_code == 403
        assert client.post("/windows/schedule", form()).status_code == 403
        assert client.get(f"/windows/{w.pk}/cancel").status_code == 403
    assert MaintenanceWindow.objects.count() == 1 and not AdminAction.objects.exists()


def test_an_administrator_of_some_collections_holds_only_those(client, people, demo):
    CollectionScope.objects.create(user=people["administrator"], collections=["other"])
    client.force_login(people["administrator"])
    assert client.post("/windows/schedule", form()).status_code == 403
    page = client.post("/windows/schedule", form(scope="collection", collection="demo"))
    assert page.status_code == 403 and not MaintenanceWindow.objects.exists()


def test_a_confirmation_made_for_someone_else_is_refused(client, people, db):
    client.force_login(people["administrator"])
    _, data = schedule(client)
    other = type(people["administrator"]).objects.create_superuser("root", password="pw")
    client.force_login(other)
    assert client.post("/windows/schedule", data).status_code == 400
    assert not MaintenanceWindow.objects.exists()


def test_cancelling_an_active_window_ends_it_now_and_is_audited(client, people, queue):
    now = timezone.now()
    w = MaintenanceWindow.objects.create(
        scope="queue",
        start=now - timedelta(minutes=1),
        end=now + timedelta(hours=1),
        reason="upgrade",
        created_by_name="ada",
    )
    apply_windows(queue)
    assert queue.pause.queue_paused()
    client.force_login(people["administrator"])
    home = client.get("/").content.decode()
    assert "on now" in home and "upgrade" in home
    resume = client.get("/actions/queue.resume/confirm").content.decode()
    assert f"maintenance window {w.pk}" in resume and "puts the hold back" in resume
    page = client.get(f"/windows/{w.pk}/cancel").content.decode()
    assert "ends it now" in page
    payload = PAYLOAD.search(page).group(1)
    refused = client.post(f"/windows/{w.pk}/cancel", {"payload": payload, "reason": ""})
    assert refused.status_code == 400 and MaintenanceWindow.objects.get().cancelled is None
    done = client.post(f"/windows/{w.pk}/cancel", {"payload": payload, "reason": "done early"})
    assert done.status_code == 302 and done.url.endswith("cancelled=1")
    assert not queue.pause.queue_paused()
    w.refresh_from_db()
    assert w.cancelled is not None and w.cancel_reason == "done early"
    assert [a.action for a in AdminAction.objects.order_by("pk")] == [
        "window.start",
        "window.cancel",
        "window.end",
    ]
    again = client.post(f"/windows/{w.pk}/cancel", {"payload": payload, "reason": "x"})
    assert again.status_code == 302 and AdminAction.objects.count() == 3
    assert "window-past" in client.get("/windows/").content.decode()
