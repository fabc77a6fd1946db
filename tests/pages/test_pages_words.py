"""What every page says around its content: the header, the roles page, error pages, the
static files with DEBUG off, times with their zone, and nothing internal to a visitor who has
not signed in."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.messages import success as message_success
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.db import SessionStore
from django.core.exceptions import PermissionDenied
from django.shortcuts import render
from django.template.loader import render_to_string
from django.test import RequestFactory, override_settings
from django.views.defaults import page_not_found, permission_denied, server_error

from jobs.timeline_view import who_of
from merritt_queue.project import checks
from mirror import facade as mirror
from tests import roles
from ui.cells import when

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(client):
    user = User.objects.create_user("reader")
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])
    client.force_login(user)
    return user


def test_the_login_page_tells_a_visitor_nothing_about_the_queue(client):
    mirror.mark("write-through")
    mirror.mark("full")
    page = client.get("/accounts/login/").content.decode()
    assert "Mirror" not in page and "reconcile" not in page
    assert "Dashboard" not in page  # no navigation before signing in


def test_the_navigation_offers_the_audit_trail_and_the_roles(client, viewer):
    page = client.get("/help/roles").content.decode()
    assert 'href="/actions/"' in page and 'href="/help/roles"' in page
    assert 'id="nav-open"' in page  # the phone's menu button


def test_the_roles_page_names_each_role_and_the_readers_own(client, viewer):
    page = client.get("/help/roles").content.decode()
    for role in ("viewer", "depositor", "operator", "administrator"):
        assert f"<td>{role}</td>" in page
    assert "reader" in page and "<strong>viewer</strong>" in page
    assert "You may take no action." in page and "You may not submit." in page


def test_the_roles_page_needs_a_sign_in(client):
    assert client.get("/help/roles").status_code == 302


@override_settings(DEBUG=False)
def test_a_missing_page_has_the_site_header(client, viewer):
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    page = response.content.decode()
    assert 'class="brand"' in page and "Not found" in page and "Log out" in page


def request_as(user):
    request = RequestFactory().get("/somewhere/")
    request.user = user
    request.session = SessionStore()
    request._messages = FallbackStorage(request)
    return request


def test_the_error_pages_have_the_site_header(viewer):
    refused = permission_denied(
        request_as(viewer), PermissionDenied("this needs the operator role")
    )
    assert refused.status_code == 403
    text = refused.content.decode()
    assert 'class="brand"' in text and "This needs the operator role." in text
    assert "/help/roles" in text
    missing = page_not_found(request_as(viewer), Exception("no action job.x"))
    assert "Not found" in missing.content.decode() and "job.x" not in missing.content.decode()
    broken = server_error(request_as(viewer))
    assert broken.status_code == 500 and 'class="brand"' in broken.content.decode()


@override_settings(DEBUG=False)
def test_the_static_files_are_served_with_debug_off(client):
    for name in ("mq.css", "dashboard.css"):
        response = client.get(f"/static/{name}")
        assert response.status_code == 200, name
        assert b"".join(response.streaming_content)


def test_a_success_message_is_shown_once_on_the_submit_page(viewer):
    from batches.forms import SubmitForm

    request = request_as(viewer)
    message_success(request, "Batch submitted as bid0000000042.")
    page = render(request, "batches/submit.html", {"form": SubmitForm()}).content.decode()
    assert page.count("bid0000000042") == 1


def test_a_count_of_batches_is_spelled_batches():
    box = {"count": 2, "status": "Pending", "kind": "", "href": "/batches/"}
    svg = render_to_string(
        "dashboard/_machine.html", {"d": {"name": "batch", "boxes": [box], "arrows": []}}
    )
    assert "2 batches Pending" in svg and "batchs" not in svg


def test_the_mirrors_own_actors_read_as_words():
    assert who_of("watch").text == "seen by the mirror (writer unknown)"
    assert who_of("reconcile").text == "found by a full reconcile (writer unknown)"
    assert who_of("watch").kind == "mirror"


@override_settings(TIME_ZONE="America/Los_Angeles")
def test_a_time_names_its_zone():
    moment = datetime(2026, 5, 4, 16, 12, 3, tzinfo=UTC)
    assert when(moment) == "2026-05-04 09:12:03 PDT"


def test_an_unknown_display_zone_fails_the_checks(settings):
    settings.MQ_DISPLAY_TIME_ZONE = "Mars/Olympus"
    [problem] = checks.check_display_time_zone()
    assert problem.id == "mq.E060" and "Mars/Olympus" in problem.msg
    settings.MQ_DISPLAY_TIME_ZONE = "Europe/Zurich"
    assert checks.check_display_time_zone() == []


def test_the_display_zone_is_the_pages_alone(client, django_user_model, settings):
    """MQ_DISPLAY_TIME_ZONE set Django's TIME_ZONE, and with it the process's own zone: the
    timestamps the core writes into ZooKeeper took the display zone's offset."""
    import time

    from merritt_queue.core import tree

    settings.MQ_DISPLAY_TIME_ZONE = "America/Los_Angeles"
    client.force_login(roles.viewer(django_user_model.objects.create_user("zed")))
    page = client.get("/").content.decode()
    assert "hours in PST" in page or "hours in PDT" in page
    assert tree.now().endswith("+0000") and time.strftime("%z") == "+0000"
