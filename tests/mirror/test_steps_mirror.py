"""What each step did, in the mirror: on the job page, in its JSON export and the status API
(a depositor's view without internal addresses), and rebuilt by ``reconcile --full`` from
ZooKeeper after the mirror's rows are lost. A real pipeline run makes the record."""

from __future__ import annotations

import json

from batches.models import ApiToken
from door.rights import grant_depositor
from jobs.models import Job, JobEvent, JobSteps
from merritt_queue.core import steprecord as sr
from mirror import facade as mirror
from mirror import steps
from tests.pipeline.test_notifications import deliver_all, receiver
from tests.roles import viewer

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


def _run(pipeline, content):
    url = content.behave("/flaky.txt", body=b"hello steps\n", failures=2, failure_status=503)
    bid = pipeline.submit(type="file", payload_url=url)
    assert pipeline.run(bid).status == "Completed"
    (job,) = pipeline.jobs(bid)
    return job, url


def _kinds(attempts) -> set[str]:
    return {e.get("k") or e.get("kind") for a in attempts for e in a["entries"]}


def test_the_job_page_and_export_show_each_attempt_and_the_api_hides_addresses(
    pipeline, content, client, django_user_model
):
    job, url = _run(pipeline, content)
    row = JobSteps.objects.get(jid=job.jid)
    assert row.record == job.steps.as_json() and row.status_version == job.status_version

    staff = viewer(django_user_model.objects.create_user("vera"))
    client.force_login(staff)
    page = client.get(f"/jobs/{job.jid}/").content.decode()
    assert "What each step did" in page and "127.0.0.1" in page  # the address reached
    assert "503" in page and "retry" in page
    exported = client.get(f"/jobs/{job.jid}/steps.json")
    assert exported["Content-Disposition"] == f'attachment; filename="{job.jid}-steps.json"'
    assert exported.json()["attempts"] == row.record["attempts"]

    depositor = django_user_model.objects.create_user("dana")
    grant_depositor(depositor, ["demo"])
    client.force_login(depositor)
    page = client.get(f"/jobs/{job.jid}/").content.decode()
    assert "What each step did" in page and "no internal addresses" in page
    assert "worker on" not in page.split('id="steps"')[1]
    theirs = client.get(f"/jobs/{job.jid}/steps.json").json()
    key = ApiToken.issue(depositor, "tests")[1]
    api = client.get(f"/api/v1/jobs/{job.jid}", headers={"Authorization": f"Bearer {key}"})
    steps = api.json()["steps"]
    assert steps == {k: v for k, v in theirs.items() if k not in ("jid", "found", "notifications")}
    text = json.dumps(steps)
    # Their URL names the test server's address; nothing else may.
    assert "127.0.0.1" not in text.replace(url.split("/flaky")[0], "")
    assert '"addr"' not in text and '"excerpt"' not in text and "worker " not in text
    gets = [e for a in steps["attempts"] for e in a["entries"] if e["kind"] == "get"]
    assert [(g["try"], g["http"]) for g in gets] == [(1, 503), (2, 200)]
    assert "503" in gets[0]["retry"]


def test_the_record_survives_losing_the_mirror_rows(pipeline, content):
    job, _ = _run(pipeline, content)
    before = JobSteps.objects.get(jid=job.jid).record
    JobSteps.objects.all().delete()
    Job.objects.all().delete()
    JobEvent.objects.all().delete()
    mirror.full_reconcile(pipeline.store)
    after = JobSteps.objects.get(jid=job.jid)
    assert after.record == before and after.status_version == job.status_version
    assert _kinds(after.record["attempts"]) >= {"head", "get", "ark", "storage", "inventory"}


def test_a_periodic_reconcile_reads_no_steps_of_jobs_that_did_not_move(pipeline, content):
    job, _ = _run(pipeline, content)
    row = JobSteps.objects.get(jid=job.jid)
    JobSteps.objects.filter(jid=job.jid).update(record={"kept": "as it was"})
    mirror.full_reconcile(pipeline.store)
    assert JobSteps.objects.get(jid=job.jid).record == {"kept": "as it was"}
    assert row.status_version == job.status_version


def _record(*attempts: str) -> sr.StepRecord:
    return sr.StepRecord(tuple({"attempt": a, "entries": []} for a in attempts), exists=True)


def test_an_older_read_never_replaces_a_newer_row(db):
    def row():
        got = JobSteps.objects.get(jid="jid0000000001")
        return got.status_version, got.last_attempt, len(got.record["attempts"])

    steps.apply([("jid0000000001", 5, _record("a", "b"))])
    assert row() == (5, "b", 2)
    steps.apply([("jid0000000001", 4, _record("a"))])  # a reconcile's older read
    assert row() == (5, "b", 2)
    # An abandoned attempt's record, kept without a status write: same version, newer last.
    steps.apply([("jid0000000001", 5, _record("a", "b", "c"))])
    assert row() == (5, "c", 3)
    steps.apply([("jid0000000001", 7, _record("a", "b", "c"))])  # seen after an admin's move
    assert row() == (7, "c", 3)


def test_the_jobs_notifications_are_listed_and_a_depositor_is_not_told_where_they_went(
    pipeline, content, client, django_user_model, settings
):
    settings.MQ_NOTIFY_BACKOFF = 0
    url, _ = receiver(content)
    bid = pipeline.submit(
        type="file",
        payload_url=f"{content.url}/call911.jpg",
        notify_url=url,
        notify_events="all",
    )
    assert pipeline.run(bid).status == "Completed"
    deliver_all()
    (job,) = pipeline.jobs(bid)

    client.force_login(viewer(django_user_model.objects.create_user("vera")))
    exported = client.get(f"/jobs/{job.jid}/steps.json").json()["notifications"]
    assert {"Completed", "Notify"} <= {d["to_status"] for d in exported}
    assert {(d["channel"], d["status"], d["http"], d["to"]) for d in exported} == {
        ("webhook", "delivered", 200, url)
    }
    page = client.get(f"/jobs/{job.jid}/").content.decode()
    assert "Notifications sent" in page and url in page

    depositor = django_user_model.objects.create_user("dana")
    grant_depositor(depositor, ["demo"])
    key = ApiToken.issue(depositor, "tests")[1]
    api = client.get(f"/api/v1/jobs/{job.jid}", headers={"Authorization": f"Bearer {key}"})
    told = api.json()["notifications"]
    assert len(told) == len(exported) and all("to" not in d for d in told)
