"""The dashboard's Dependencies panel and opening or closing a breaker by hand: a steering
action with a confirmation page, a required reason and an audit entry, for administrators
only."""

from __future__ import annotations

from merritt_queue.project.breakerboard import breakers
from steering.models import AdminAction
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_pages import confirm_and_execute

queue, people = base.queue, base.people


def panel(client) -> str:
    body = client.get("/").content.decode()
    start = body.index('id="dependencies"')
    return body[start : body.index("</section>", start)]


def test_the_panel_shows_each_breaker_with_since_failures_next_probe_and_last_error(
    client, queue, people
):
    board = breakers()
    for _ in range(board.policy.threshold):
        board.failed("ezid", "EZID at http://ezid.internal could not be reached: timed out")
    board.failed("webhook:hooks.example.org", "callback http://hooks.example.org/x: 502")
    client.force_login(people["viewer"])
    shown = panel(client)
    ezid = shown[shown.index('data-dependency="ezid"') :].split("</tr>")[0]
    assert 'data-state="open"' in ezid and ">EZID<" in ezid
    assert "ago" in ezid and "UTC" in ezid, "since and the next probe"
    assert f'<td class="num">{board.policy.threshold}</td>' in ezid
    assert "ezid.internal could not be reached: timed out" in ezid
    hook = shown[shown.index('data-dependency="webhook:hooks.example.org"') :].split("</tr>")[0]
    assert 'data-state="closed"' in hook and "webhook host hooks.example.org" in hook
    assert '<td class="num">1</td>' in hook
    assert 'data-dependency="storage"' in shown and 'data-dependency="smtp"' in shown
    assert "dependency.open" not in shown, "a viewer is offered an action"


def test_a_depositor_sees_no_breakers(client, queue, django_user_model):
    breakers().failed("ezid", "EZID at http://ezid.internal could not be reached")
    depositor = django_user_model.objects.create_user("dora", password="pw")
    client.force_login(depositor)
    body = client.get("/").content.decode()
    assert 'id="dependencies"' not in body and "ezid.internal" not in body


def test_an_administrator_opens_and_closes_a_breaker_by_hand_audited(client, queue, people):
    client.force_login(people["administrator"])
    assert "/actions/dependency.open/confirm?ids=ezid" in panel(client)
    page, done, _ = confirm_and_execute(
        client, "dependency.open", "ids=ezid", reason="EZID's weekly maintenance"
    )
    body = page.content.decode()
    assert 'name="reason"' in body and "not probed" in body
    assert done.status_code == 302
    state = breakers().read("ezid")
    assert state.is_open and state.by_hand and state.next_probe is None
    assert state.by == "ada" and state.reason == "EZID's weekly maintenance"
    opened = AdminAction.objects.get()
    assert opened.action == "dependency.open" and opened.username == "ada"
    assert opened.reason == "EZID's weekly maintenance"
    assert [(i.item_id, i.result) for i in opened.items.all()] == [("ezid", "done")]
    shown = panel(client)
    assert "by hand, by ada" in shown and "when closed by hand" in shown
    assert "/actions/dependency.close/confirm?ids=ezid" in shown

    _, done, _ = confirm_and_execute(client, "dependency.close", "ids=ezid", reason="it is back")
    assert done.status_code == 302 and not breakers().read("ezid").is_open
    closed = AdminAction.objects.get(action="dependency.close")
    assert closed.reason == "it is back"
    assert [(i.item_id, i.result) for i in closed.items.all()] == [("ezid", "done")]
    audit = client.get("/actions/").content.decode()
    assert "it is back" in audit and "EZID&#x27;s weekly maintenance" in audit


def test_opening_needs_a_reason_and_the_administrator_role(client, queue, people):
    client.force_login(people["administrator"])
    page, done, _ = confirm_and_execute(client, "dependency.open", "ids=ezid", reason=" ")
    assert done.status_code == 400 and "A reason is required." in done.content.decode()
    assert not breakers().read("ezid").is_open
    client.force_login(people["operator"])
    refused = client.get("/actions/dependency.open/confirm?ids=ezid")
    assert "administrator role" in refused.content.decode()
    assert not AdminAction.objects.exists()


def test_an_unknown_dependency_is_named_and_nothing_is_written(client, queue, people):
    client.force_login(people["administrator"])
    page = client.get("/actions/dependency.open/confirm?ids=ezid/../x")
    assert page.status_code == 200
    assert "ezid/../x" in page.content.decode()
    assert queue.client.exists("/merritt-queue/breakers") is None
