"""Where a deposit stands, over the API: a batch by bid and by batchID, a job; every field, the
token's reading scope (404, never 403), no token (401), and the batch's jobs in pages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlparse

import pytest

from batches.models import ApiToken, BatchEvent
from door.rights import grant_depositor
from jobs.models import JobEvent
from mirror.facade import recount
from tests.pages.test_pages_batches_jobs import bid, jid, make_batch, make_job
from tests.roles import viewer

pytestmark = pytest.mark.django_db

AT = datetime(2026, 3, 10, 11, 0, tzinfo=UTC)
REPORT = {"failed_jobs": [], "successful_jobs": [jid(1), jid(2)], "successful_count": 2}


def key_of(user) -> str:
    return ApiToken.issue(user, "tests")[1]


@pytest.fixture
def depositor(django_user_model):
    """A depositor of collection demo, who may read demo's batches and jobs only."""
    user = django_user_model.objects.create_user("dana")
    grant_depositor(user, ["demo"])
    return user


@pytest.fixture
def stranger(django_user_model):
    """A depositor of another collection."""
    user = django_user_model.objects.create_user("olga")
    grant_depositor(user, ["other"])
    return user


@pytest.fixture
def deposit():
    """Batch 1 of demo (batchID uuid-1), two jobs, a written report and a record of each."""
    batch = make_batch(
        1,
        "Completed",
        message="2 jobs completed",
        last_modified=AT + timedelta(minutes=5),
        submitted=AT,
        status_report=REPORT,
    )
    for n in (1, 2):
        make_job(
            n,
            "Completed",
            message=f"stored object {n}",
            local_id=f"local-{n}; second-{n}",
            last_modified=AT + timedelta(minutes=n),
            retry_count=n - 1,
        )
    recount([bid(1)])  # as the mirror does with every change to a batch's jobs
    BatchEvent.objects.create(
        bid=bid(1),
        from_status="",
        to_status="Pending",
        at=AT,
        status_version=0,
        actor="submission:dana",
        exact=True,
    )
    BatchEvent.objects.create(
        bid=bid(1),
        from_status="Pending",
        to_status="Completed",
        at=AT + timedelta(minutes=5),
        status_version=1,
        message="2 jobs completed",
        actor="dispatcher host-a:7",
        exact=True,
    )
    for version, (old, new) in enumerate((("", "Pending"), ("Pending", "Completed"))):
        JobEvent.objects.create(
            jid=jid(1),
            bid=bid(1),
            from_status=old,
            to_status=new,
            at=AT + timedelta(minutes=version),
            status_version=version,
            retry_count=0,
            actor="worker host-a:101",
            exact=True,
        )
    return batch


def get(client, url: str, key: str | None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return client.get(url, headers=headers)


def test_a_batch_gives_its_status_jobs_history_and_report(client, depositor, deposit):
    response = get(client, f"/api/v1/batches/{bid(1)}", key_of(depositor))
    assert response.status_code == 200
    body = response.json()
    assert {k: body[k] for k in ("bid", "batchID", "status", "message", "collection")} == {
        "bid": bid(1),
        "batchID": "uuid-1",
        "status": "Completed",
        "message": "2 jobs completed",
        "collection": "demo",
    }
    assert body["submitted"] == "2026-03-10T11:00:00Z"
    assert body["last_change"] == "2026-03-10T11:05:00Z"
    assert body["job_total"] == 2 and body["next"] is None
    assert body["jobs"][0] == {
        "jid": jid(1),
        "status": "Completed",
        "message": "stored object 1",
        "ark": "ark:/99999/fk4j1",
        "local_ids": ["local-1", "second-1"],
        "last_change": "2026-03-10T11:01:00Z",
    }
    assert [j["jid"] for j in body["jobs"]] == [jid(1), jid(2)]
    assert [(h["version"], h["to_status"]) for h in body["history"]] == [
        (0, "Pending"),
        (1, "Completed"),
    ]
    assert body["history"][1] == {
        "version": 1,
        "at": "2026-03-10T11:05:00Z",
        "from_status": "Pending",
        "to_status": "Completed",
        "message": "2 jobs completed",
        "actor": "dispatcher host-a:7",
        "who": "dispatcher on host-a",
    }
    assert body["report"] == REPORT


def test_a_batch_without_a_report_yet_says_null(client, depositor):
    make_batch(3, "Processing")
    body = get(client, f"/api/v1/batches/{bid(3)}", key_of(depositor)).json()
    assert body["report"] is None and body["jobs"] == [] and body["history"] == []


def test_a_job_gives_its_status_ids_retries_and_history(client, depositor, deposit):
    response = get(client, f"/api/v1/jobs/{jid(1)}", key_of(depositor))
    assert response.status_code == 200
    body = response.json()
    history = body.pop("history")
    assert body.pop("steps") is None  # no record of its steps in the mirror
    assert body.pop("notifications") == []
    assert body == {
        "jid": jid(1),
        "bid": bid(1),
        "status": "Completed",
        "message": "stored object 1",
        "ark": "ark:/99999/fk4j1",
        "local_ids": ["local-1", "second-1"],
        "retries": 0,
        "last_change": "2026-03-10T11:01:00Z",
        "waiting": None,  # a completed job waits for nothing
    }
    assert [(h["from_status"], h["to_status"], h["at"]) for h in history] == [
        ("", "Pending", "2026-03-10T11:00:00Z"),
        ("Pending", "Completed", "2026-03-10T11:01:00Z"),
    ]
    assert history[0]["retry_count"] == 0
    assert history[0]["who"] == "worker on host-a"
    assert get(client, f"/api/v1/jobs/{jid(2)}", key_of(depositor)).json()["retries"] == 1


def test_a_batch_is_found_by_the_depositors_batch_id(client, depositor, deposit):
    response = get(client, "/api/v1/batches/by-batch-id/uuid-1", key_of(depositor))
    assert response.status_code == 200
    assert response.json()["bid"] == bid(1)
    missing = get(client, "/api/v1/batches/by-batch-id/uuid-9", key_of(depositor))
    assert missing.status_code == 404


@pytest.mark.parametrize(
    ("url", "absent"),
    [
        (f"/api/v1/batches/{bid(1)}", f"/api/v1/batches/{bid(7)}"),
        ("/api/v1/batches/by-batch-id/uuid-1", "/api/v1/batches/by-batch-id/uuid-7"),
        (f"/api/v1/jobs/{jid(1)}", f"/api/v1/jobs/{jid(7)}"),
    ],
)
def test_another_collections_depositor_gets_the_same_404_as_for_no_such_item(
    client, stranger, deposit, url, absent
):
    key = key_of(stranger)
    response = get(client, url, key)
    assert response.status_code == 404
    assert "demo" not in response.content.decode()
    nothing = get(client, absent, key)
    assert nothing.status_code == 404
    wording = response.json()["errors"][0].replace("1", "7")
    assert nothing.json()["errors"][0] == wording


@pytest.mark.parametrize(
    "url",
    [f"/api/v1/batches/{bid(1)}", "/api/v1/batches/by-batch-id/uuid-1", f"/api/v1/jobs/{jid(1)}"],
)
@pytest.mark.parametrize("key", [None, "not-a-token"])
def test_without_a_valid_token_the_answer_is_401(client, deposit, url, key):
    response = get(client, url, key)
    assert response.status_code == 401
    assert "API token" in response.json()["errors"][0]


def test_a_revoked_token_is_refused(client, depositor, deposit):
    key = key_of(depositor)
    ApiToken.objects.update(revoked=True)
    assert get(client, f"/api/v1/batches/{bid(1)}", key).status_code == 401


def test_a_reader_of_every_collection_reads_any_batch(client, django_user_model, deposit):
    user = viewer(django_user_model.objects.create_user("viv"))
    assert get(client, f"/api/v1/batches/{bid(1)}", key_of(user)).status_code == 200


def test_a_big_batchs_jobs_come_in_pages_with_a_next_link(client, depositor):
    make_batch(1)
    for n in range(1, 6):
        make_job(n)
    recount([bid(1)])
    key = key_of(depositor)
    seen, url, pages = [], f"/api/v1/batches/{bid(1)}?limit=2", 0
    while url:
        body = get(client, url, key).json()
        assert len(body["jobs"]) <= 2 and body["job_total"] == 5
        seen += [j["jid"] for j in body["jobs"]]
        pages += 1
        following = body["next"]
        url = following and (urlparse(following).path + "?" + urlparse(following).query)
    assert seen == [jid(n) for n in range(1, 6)] and pages == 3
    assert get(client, f"/api/v1/batches/{bid(1)}", key).json()["next"] is None


@pytest.mark.parametrize("query", ["limit=0", "limit=abc", "limit=1001", "after=nonsense"])
def test_a_bad_page_request_is_a_400_naming_the_problem(client, depositor, deposit, query):
    response = get(client, f"/api/v1/batches/{bid(1)}?{query}", key_of(depositor))
    assert response.status_code == 400
    assert query.split("=")[0] in response.json()["errors"][0]


@pytest.mark.parametrize("value", ["\u00b2", "\u0661\u0662"])
def test_a_limit_of_non_ascii_digits_is_a_400_not_a_crash(client, depositor, deposit, value):
    """str.isdigit() holds for '²', which int() refuses; '١٢' would be taken as 12."""
    headers = {"Authorization": f"Bearer {key_of(depositor)}"}
    response = client.get(f"/api/v1/batches/{bid(1)}", {"limit": value}, headers=headers)
    assert response.status_code == 400
    assert "limit" in response.json()["errors"][0]


def test_the_status_api_only_reads(client, depositor, deposit):
    key = key_of(depositor)
    response = client.post(f"/api/v1/batches/{bid(1)}", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 405


def test_submitting_still_answers_at_the_same_address(client):
    assert client.post("/api/v1/batches", content_type="application/json").status_code == 401
