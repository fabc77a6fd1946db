"""Smaller seams with Merritt's own ingest (issue 30, point 5).

The other writer is ``tests/merrittzk.py``, a replay of MerrittZK and of mrt-ingest's
consumers on its own session. Each test here failed on the code before its fix.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from batches.models import Profile
from batches.submission import NO_WORKERS_PROBLEM


@pytest.fixture
def queue(process_store):
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    return process_store


# --- manage.py submit follows MQ_WORKERS ---------------------------------------------


def test_the_submit_command_refuses_in_none_mode_as_the_web_door_does(queue, settings):
    settings.MQ_WORKERS = "none"
    before = queue.list_batch_ids()
    with pytest.raises(CommandError) as e:
        call_command(
            "submit", profile="demo", submitter="me", type="file", payload_url="https://e.org/a"
        )
    assert NO_WORKERS_PROBLEM in str(e.value)
    assert queue.list_batch_ids() == before


def test_a_dry_run_still_checks_the_submission_in_none_mode(queue, settings):
    """Before: the dry run stopped at the worker mode and said nothing of the submission."""
    settings.MQ_WORKERS = "none"
    with pytest.raises(CommandError) as e:
        call_command(
            "submit",
            "--dry-run",
            profile="demo",
            submitter="me",
            type="file",
            payload_url="https://e.org/a",
        )
    assert "well-formed (file to profile demo as me)" in str(e.value)
    assert NO_WORKERS_PROBLEM in str(e.value)
    with pytest.raises(CommandError) as e:
        call_command("submit", "--dry-run", profile="demo", payload_url="https://e.org/a")
    assert "type is required" in str(e.value) and NO_WORKERS_PROBLEM in str(e.value)
    settings.MQ_WORKERS = "own"
    out = io.StringIO()
    call_command(
        "submit",
        "--dry-run",
        profile="demo",
        type="file",
        payload_url="https://e.org/a",
        stdout=out,
    )
    assert "would submit: file to profile demo" in out.getvalue()
