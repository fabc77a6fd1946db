"""Issue 30, point 4: EZID is told what Merritt's ingest tells it (mrt-ingest's MintUtil and
HandlerMinter), checked against a stand-in for EZID on loopback (tests/httpserver.py's
``FakeEzid``) that answers in EZID's shapes and records every request.

Minting sends one ``erc`` record (no ``erc.*`` elements), ``mrt.creator`` and ``_owner``,
and for an administrative object ``_status: reserved`` and ``_export: no``; the ARK is then
described (GET, and POST ``/id/<ark>`` only when something differs): ``_target`` the landing
page, the ARK as the record's first ``where``. A later version that changes the title sends
an update; one that changes nothing sends none; a reply lost on the way back is retried
without harm.
"""

from __future__ import annotations

import importlib

import pytest
from django.core.checks import run_checks

from batches.models import Profile
from merritt_queue.services.errors import MinterError
from tests.objectfixtures import only_job

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

SHOULDER = "ark:/99999/fk4"
LANDING = "https://merritt.cdlib.org/m/{}"


@pytest.fixture
def ezid_module():
    return importlib.import_module("merritt_queue.services.ezid")


@pytest.fixture
def citation_class():
    return importlib.import_module("merritt_queue.services.minter").Citation


@pytest.fixture
def minter(ezid_server, session_factory, ezid_module):
    return ezid_module.EzidMinter(
        ezid_server.url,
        ezid_server.username,
        ezid_server.password,
        session_factory=session_factory,
    )


def landing(ark: str) -> str:
    return LANDING.format(ark.replace(":", "%3A").replace("/", "%2F"))


def body_of(request) -> list[str]:
    return request.body.decode("utf-8").splitlines()


# --- the EzidMinter against the stand-in ----------------------------------------------------


@pytest.mark.usefixtures("loopback_only")
def test_a_mint_sends_one_erc_record_with_mrt_creator_and_owner(
    ezid_server, minter, citation_class
):
    told = citation_class(
        who="Doe, Jane",
        what="Report: 100% done\nsecond line",
        when="2024",
        where=("local-1",),
        owner="ucb_owner",
        creator="ucb_lib_context",
    )
    ark = minter.mint(SHOULDER, citation=told)
    ((minted, sent),) = ezid_server.minted
    assert minted == ark
    (request,) = ezid_server.server.requests_for(f"/shoulder/{SHOULDER}", "POST")
    assert body_of(request) == [
        "erc: who: Doe, Jane%0Awhat: Report: 100%25 done%0A    second line%0Awhen: 2024%0A"
        "where: local-1%0A",
        "mrt.creator: ucb_lib_context",
        "_owner: ucb_owner",
    ]
    assert not any(name.startswith("erc.") for name in sent)
    assert "_status" not in sent and "_export" not in sent


@pytest.mark.usefixtures("loopback_only")
def test_an_administrative_object_is_minted_reserved_and_not_exported(
    ezid_server, minter, citation_class
):
    ark = minter.mint(SHOULDER, citation=citation_class(what="A collection", admin=True))
    ((_, sent),) = ezid_server.minted
    assert sent["_status"] == "reserved" and sent["_export"] == "no"
    minter.describe(ark, citation_class(what="A collection", admin=True))
    assert ezid_server.ids[ark]["_status"] == "reserved"
    assert ezid_server.ids[ark]["_export"] == "no"


@pytest.mark.usefixtures("loopback_only")
def test_describing_a_new_ark_points_it_at_the_landing_page(ezid_server, minter, citation_class):
    told = citation_class(who="Doe, Jane", what="Bell", where=("local-1",), owner="ucb_owner")
    ark = minter.mint(SHOULDER, citation=told)
    assert minter.describe(ark, told) is True
    (update,) = ezid_server.id_requests("POST")
    assert update.path == f"/id/{ark}"
    # Merritt encodes the ARK twice: once for the URL, once for ANVL.
    assert "_target: https://merritt.cdlib.org/m/ark%253A%252F99999%252Ffk4000001" in body_of(
        update
    )
    held = ezid_server.ids[ark]
    assert held["_target"] == landing(ark)
    assert held["erc"] == f"who: Doe, Jane\nwhat: Bell\nwhere: {ark}\nwhere: local-1\n"
    assert held["_owner"] == "ucb_owner"


@pytest.mark.usefixtures("loopback_only")
def test_the_target_follows_the_pattern(ezid_server, session_factory, ezid_module, citation_class):
    minter = ezid_module.EzidMinter(
        ezid_server.url,
        ezid_server.username,
        ezid_server.password,
        session_factory=session_factory,
        target_pattern="https://repo.example.org/objects/{ark}/",
    )
    ark = minter.mint(SHOULDER)
    minter.describe(ark, citation_class(what="Bell"))
    assert ezid_server.ids[ark]["_target"] == (
        "https://repo.example.org/objects/ark%3A%2F99999%2Ffk4000001/"
    )


@pytest.mark.usefixtures("loopback_only")
def test_an_unchanged_version_sends_no_update(ezid_server, minter, citation_class):
    told = citation_class(who="Doe, Jane", what="Bell", when="2024", where=("local-1",))
    ark = minter.mint(SHOULDER, citation=told)
    minter.describe(ark, told)
    before = len(ezid_server.id_requests("POST"))
    assert minter.describe(ark, told) is False
    # Nor when the version gives less: what it leaves out stays as EZID has it.
    assert minter.describe(ark, citation_class(what="Bell")) is False
    assert len(ezid_server.id_requests("POST")) == before
    assert ezid_server.id_requests("PUT") == []


@pytest.mark.usefixtures("loopback_only")
def test_an_ark_merritt_described_is_not_updated_for_a_local_id_it_names(
    ezid_server, minter, citation_class
):
    ark = "ark:/99999/fk4merritt"
    ezid_server.ids[ark] = ezid_server._defaults(ark) | {
        "_target": landing(ark),
        "erc": f"who: Doe, Jane\nwhat: Bell\nwhere: {ark}\nwhere: obj-1; obj-2\n",
    }
    assert minter.describe(ark, citation_class(what="Bell", where=("obj-2",))) is False
    assert ezid_server.id_requests("POST") == []


@pytest.mark.usefixtures("loopback_only")
def test_a_changed_title_sends_an_update_with_the_new_erc(ezid_server, minter, citation_class):
    ark = minter.mint(SHOULDER, citation=citation_class(who="Doe, Jane", what="Bell"))
    minter.describe(ark, citation_class(who="Doe, Jane", what="Bell", where=("local-1",)))
    assert minter.describe(ark, citation_class(what="Bell, revised", when="2025")) is True
    last = ezid_server.id_requests("POST")[-1]
    erc = next(line for line in body_of(last) if line.startswith("erc: "))
    assert erc == (
        f"erc: who: Doe, Jane%0Awhat: Bell, revised%0Awhen: 2025%0Awhere: {ark}%0Awhere: local-1%0A"
    )
    assert ezid_server.ids[ark]["erc"].startswith("who: Doe, Jane\nwhat: Bell, revised\n")


@pytest.mark.usefixtures("loopback_only")
def test_a_lost_reply_on_update_is_retryable_and_the_retry_does_no_harm(
    ezid_server, minter, citation_class
):
    told = citation_class(what="Bell", owner="ucb_owner")
    ark = minter.mint(SHOULDER, citation=told)
    ezid_server.lose_reply("POST")
    with pytest.raises(MinterError) as info:
        minter.describe(ark, told)
    assert info.value.retryable is True
    assert ezid_server.ids[ark]["_target"] == landing(ark)  # EZID made the change
    assert minter.describe(ark, told) is False  # the retry finds it made
    assert len(ezid_server.id_requests("POST")) == 1
    assert ezid_server.ids[ark]["erc"] == f"what: Bell\nwhere: {ark}\n"


@pytest.mark.usefixtures("loopback_only")
def test_ezid_unavailable_while_describing_is_retryable_and_the_retry_describes(
    ezid_server, minter, citation_class
):
    told = citation_class(what="Bell")
    ark = minter.mint(SHOULDER, citation=told)
    ezid_server.server.behave(
        f"/id/{ark}", failures=1, failure_status=503, handler=ezid_server._handle_id
    )
    with pytest.raises(MinterError) as info:
        minter.describe(ark, told)
    assert info.value.retryable is True and "(503 Service Unavailable)" in str(info.value)
    assert minter.describe(ark, told) is True
    assert ezid_server.ids[ark]["_target"] == landing(ark)


@pytest.mark.usefixtures("loopback_only")
def test_an_ark_ezid_does_not_know_is_created_with_put(ezid_server, minter, citation_class):
    ark = "ark:/99999/fk4elsewhere"
    assert minter.describe(ark, citation_class(what="Bell")) is True
    (put,) = ezid_server.id_requests("PUT")
    assert put.path == f"/id/{ark}?update_if_exists=yes"
    assert ezid_server.ids[ark]["_target"] == landing(ark)


def test_the_target_pattern_is_checked(settings):
    settings.MQ_EZID_TARGET_PATTERN = "https://merritt.cdlib.org/m/{id}"
    (error,) = [m for m in run_checks() if m.id == "mq.E013"]
    assert "it must name {ark}" in error.msg
    settings.MQ_EZID_TARGET_PATTERN = "merritt.cdlib.org/m/{ark}"
    assert [m.id for m in run_checks() if m.id == "mq.E013"] == ["mq.E013"]
    settings.MQ_EZID_TARGET_PATTERN = ""
    assert [m for m in run_checks() if m.id == "mq.E013"] == []


# --- the pipeline ---------------------------------------------------------------------------


@pytest.fixture
def ezid_pipeline(pipeline, settings, ezid_server):
    from pipeline import services

    settings.MQ_MINTER, settings.EZID_URL = "ezid", ezid_server.url
    settings.EZID_USER, settings.EZID_PASSWORD = ezid_server.username, ezid_server.password
    settings.MQ_EZID_RETRY_SECONDS = 0.2
    Profile.objects.filter(pk=pipeline.profile.pk).update(
        ezid_owner="ucb_owner", context="ucb_lib_context"
    )
    services.reset()
    return pipeline


def deposit(pipeline, content, **fields):
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg", **fields)
    batch = pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert batch.status == "Completed", (batch.message, job.message)
    return job


def test_a_deposit_is_minted_and_described_as_merritt_does(ezid_pipeline, content, ezid_server):
    job = deposit(ezid_pipeline, content, erc_what="Bell", erc_who="Doe, Jane", local_id="obj-1")
    ark = job.identifiers["primary_id"]
    ((_, sent),) = ezid_server.minted
    assert sent == {
        "erc": "who: Doe, Jane\nwhat: Bell\nwhere: obj-1\n",
        "mrt.creator": "ucb_lib_context",
        "_owner": "ucb_owner",
    }
    held = ezid_server.ids[ark]
    assert held["_target"] == landing(ark)
    assert held["erc"] == f"who: Doe, Jane\nwhat: Bell\nwhere: {ark}\nwhere: obj-1\n"
    assert held["_status"] == "public"


def test_an_administrative_profile_mints_reserved_unexported_arks(
    ezid_pipeline, content, ezid_server
):
    Profile.objects.filter(pk=ezid_pipeline.profile.pk).update(aggregate="MRT-collection")
    job = deposit(ezid_pipeline, content, erc_what="UCB collection")
    ((_, sent),) = ezid_server.minted
    assert sent["_status"] == "reserved" and sent["_export"] == "no"
    held = ezid_server.ids[job.identifiers["primary_id"]]
    assert held["_status"] == "reserved" and held["_export"] == "no"


def test_a_new_version_updates_ezid_only_when_its_metadata_changed(
    ezid_pipeline, content, ezid_server
):
    first = deposit(ezid_pipeline, content, erc_what="Bell", local_id="obj-1")
    ark = first.identifiers["primary_id"]
    posts = len(ezid_server.id_requests("POST"))
    second = deposit(ezid_pipeline, content, erc_what="Bell, revised", local_id="obj-1")
    assert second.identifiers["primary_id"] == ark
    assert len(ezid_server.id_requests("POST")) == posts + 1
    assert ezid_server.ids[ark]["erc"] == f"what: Bell, revised\nwhere: {ark}\nwhere: obj-1\n"
    deposit(ezid_pipeline, content, erc_what="Bell, revised", local_id="obj-1")
    assert len(ezid_server.id_requests("POST")) == posts + 1
    assert len(ezid_server.minted) == 1


def test_a_lost_reply_on_the_update_waits_and_tries_again_without_failing(
    ezid_pipeline, content, ezid_server
):
    ezid_server.lose_reply("POST")
    job = deposit(ezid_pipeline, content, erc_what="Bell")
    ark = job.identifiers["primary_id"]
    assert job.retry_count == 0
    assert len(ezid_server.minted) == 1
    assert len(ezid_server.id_requests("POST")) == 1
    assert len(ezid_server.id_requests("GET")) == 2
    assert ezid_server.ids[ark]["_target"] == landing(ark)
