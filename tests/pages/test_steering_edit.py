"""Edit and resume a failed job: the form checked at the door, the confirmation with before
and after, one version-checked multi, the audit; and the edited job running to its end."""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.auth.models import Group
from django.core import mail

from merritt_queue.core import jobparams
from merritt_queue.core.errors import ChangedUnderYou, InvalidTransition
from merritt_queue.core.history import admin_actor
from mirror import facade as mirror
from steering.actions.catalog import ACTIONS
from steering.actions.execution import execute
from steering.models import AdminAction
from tests.pipeline.test_pipeline_e2e import assert_batch_completed, assert_stored, md5

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

PAYLOAD = re.compile(r'name="payload" value="([^"]+)"')
EDIT = "job.edit_resume"


@pytest.fixture
def people(django_user_model):
    def make(name, *groups):
        user = django_user_model.objects.create_user(name, password="pw")
        user.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups])
        return user

    return {
        "viewer": make("vera", "viewer"),
        "operator": make("otto", "operator"),
        "administrator": make("ada", "administrator"),
    }


def form_of(job, **changes) -> dict:
    """The form as shown for ``job``, with ``changes`` typed in."""
    shown = jobparams.current(job.configuration, job.identifiers, job.metadata)
    return shown | {"version": job.status_version} | changes


def payload_of(response) -> str:
    return PAYLOAD.search(response.content.decode()).group(1)


def edit(client, job, **changes):
    return client.post(f"/actions/{EDIT}/{job.jid}/", form_of(job, **changes))


def failed_job(store, *, after: str = "Provisioning", payload_type="file", **config) -> str:
    """A job that failed in step ``after``."""
    bid = store.new_batches.create_batch({"batchID": uuid.uuid4().hex, "collection": "demo"}).id
    configuration = {
        "collection": "demo",
        "payload_type": payload_type,
        "payload_url": "https://example.org/a.jpg",
        **config,
    }
    metadata = {"erc_what": "A title", "erc_who": "Someone"}
    jid = store.new_jobs.create_job(bid, configuration, metadata=metadata)
    status = "Pending"
    while status != after:
        status = {"Pending": "Estimating", "Estimating": "Provisioning"}.get(status) or {
            "Provisioning": "Downloading",
            "Downloading": "Processing",
            "Processing": "Storing",
        }[status]
        store.moves.transition_job(jid, status)
    store.moves.transition_job(jid, "Failed", "broke")
    return jid


def run_edit(user, store, jid, changes, reason="depositor asked", step=None):
    job = store.jobs.get_job(jid)
    before = jobparams.current(job.configuration, job.identifiers, job.metadata)
    params = {"changes": {n: [before[n], v] for n, v in changes.items()}}
    if step:
        params["step"] = step
    return execute(
        user,
        ACTIONS[EDIT],
        [(jid, job.status_version)],
        reason,
        token=uuid.uuid4().hex,
        params=params,
    )


# --- the whole way: a 404 fixed by an edit ------------------------------------------------


def test_a_job_failed_on_a_404_edited_to_a_good_url_resumes_and_completes(
    pipeline, content, client, people
):
    bad, good = f"{content.url}/late.jpg", f"{content.url}/call911.jpg"
    bid = pipeline.submit(type="file", payload_url=bad, erc_what="Call 911")
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert job.status == "Failed" and "404" in job.message
    client.force_login(people["operator"])

    shown = client.get(f"/actions/{EDIT}/{job.jid}/?next=/jobs/{job.jid}/")
    assert shown.status_code == 200 and bad in shown.content.decode()

    # A digest in the wrong format is refused at the door; nothing is written.
    refused = edit(client, job, payload_url=good, digest_type="md5", digest_value="abc")
    assert refused.status_code == 400
    assert "md5" in refused.content.decode() and "32" in refused.content.decode()
    assert pipeline.store.jobs.get_job(job.jid).status_version == job.status_version

    # So is a URL a submission would refuse: a file: URL, credentials in it.
    for url in ("file:///etc/passwd", "http://user:pw@example.org/x"):
        assert edit(client, job, payload_url=url).status_code == 400

    page = edit(client, job, payload_url=good, digest_type="MD5", digest_value=md5("call911.jpg"))
    body = page.content.decode()
    assert page.status_code == 200, body
    assert bad in body and good in body and 'name="reason"' in body
    # A new URL is sized and fetched again: the job restarts at Estimating at the latest.
    assert 'value="Estimating" checked' in body and 'value="Pending"' in body
    assert 'value="Downloading"' not in body

    done = client.post(
        f"/actions/{EDIT}/execute",
        {"payload": payload_of(page), "reason": "the depositor moved the file", "step": ""},
    )
    record = AdminAction.objects.get(action=EDIT)
    assert done.status_code == 302 and done.url.startswith(f"/actions/{record.pk}/")
    (item,) = record.items.all()
    assert item.result == "done", item.detail
    assert (item.before_status, item.after_status) == ("Failed", "Estimating")
    assert f"payload URL: '{bad}' -> '{good}'" in item.detail
    assert "digest algorithm: (none) -> 'md5'" in item.detail
    assert record.params["changes"]["payload_url"] == [bad, good]
    assert record.reason == "the depositor moved the file"

    edited = pipeline.store.jobs.get_job(job.jid)
    assert edited.configuration["payload_url"] == good and edited.retry_count == 1
    assert edited.configuration["digest_value"] == md5("call911.jpg")
    entry = edited.history.entries[-1]
    assert entry.to_status == "Estimating" and "edited (payload_url" in entry.message
    assert "the depositor moved the file" in entry.message

    # The same confirmation again acts on nothing.
    again = client.post(
        f"/actions/{EDIT}/execute", {"payload": payload_of(page), "reason": "twice"}
    )
    assert again.status_code == 302 and AdminAction.objects.filter(action=EDIT).count() == 1

    # The batch follows its job: reported again by itself once the job completes.
    mail.outbox.clear()
    assert pipeline.run(bid, until=lambda b: b.status == "Completed").status == "Completed"
    (final,) = assert_batch_completed(pipeline, bid, 1)
    assert_stored(pipeline, final, {"late.jpg": md5("call911.jpg")})


# --- the door ------------------------------------------------------------------------------


def test_an_unchanged_form_says_nothing_changed_and_records_nothing(process_store, client, people):
    jid = failed_job(process_store)
    job = process_store.jobs.get_job(jid)
    client.force_login(people["operator"])
    page = edit(client, job)
    assert page.status_code == 200 and "nothing changed" in page.content.decode().lower()
    assert not AdminAction.objects.exists()
    assert process_store.jobs.get_job(jid).status_version == job.status_version


def test_each_problem_is_shown_beside_its_field_and_the_algorithm_is_a_choice(
    process_store, client, people
):
    job = process_store.jobs.get_job(failed_job(process_store))
    client.force_login(people["operator"])
    body = client.get(f"/actions/{EDIT}/{job.jid}/").content.decode()
    select = re.search(r'<select name="digest_type"[^>]*>(.*?)</select>', body, re.S)
    assert select, body
    offered = re.findall(r'<option value="([^"]*)"', select.group(1))
    assert offered == ["", "md5", "sha1", "sha256", "sha512"]

    refused = edit(
        client, job, payload_url="file:///etc/passwd", digest_type="md5", digest_value="abc"
    )
    assert refused.status_code == 400
    errors = refused.context["form"].errors
    assert "http or https" in errors["payload_url"][0]
    assert "32 hexadecimal" in errors["digest_value"][0]
    assert "digest_type" not in errors
    # A value without its algorithm: the algorithm is asked for, beside its own field.
    refused = edit(client, job, digest_value="0" * 32)
    assert list(refused.context["form"].errors) == ["digest_type"]
    assert process_store.jobs.get_job(job.jid).status_version == job.status_version


def test_an_algorithm_spelled_otherwise_is_shown_chosen_and_left_unchanged(
    process_store, client, people
):
    job = process_store.jobs.get_job(
        failed_job(process_store, digest_type="SHA-256", digest_value="0" * 64)
    )
    client.force_login(people["operator"])
    body = client.get(f"/actions/{EDIT}/{job.jid}/").content.decode()
    assert re.search(r'<option value="sha256" selected>', body)
    page = edit(client, job, digest_type="sha256")
    assert "nothing changed" in page.content.decode().lower()


def test_a_private_or_loopback_url_is_refused_unless_the_site_allows_it(
    process_store, client, people, settings
):
    settings.MQ_ALLOW_LOOPBACK = settings.MQ_ALLOW_PRIVATE = False
    job = process_store.jobs.get_job(failed_job(process_store))
    client.force_login(people["operator"])
    for url in ("http://127.0.0.1/x", "http://10.1.2.3/x", "http://169.254.169.254/latest"):
        page = edit(client, job, payload_url=url)
        assert page.status_code == 400 and "refused" in page.content.decode(), url


def test_a_digest_is_refused_for_an_object_manifest_job(process_store, client, people):
    job = process_store.jobs.get_job(failed_job(process_store, payload_type="object-manifest"))
    client.force_login(people["operator"])
    page = edit(client, job, digest_type="md5", digest_value="0" * 32)
    # The fields are disabled: what was typed is ignored, and nothing changed.
    assert "nothing changed" in page.content.decode().lower()


def test_a_viewer_may_not_edit_and_a_job_not_failed_cannot_be_edited(process_store, client, people):
    jid = failed_job(process_store)
    client.force_login(people["viewer"])
    assert client.get(f"/actions/{EDIT}/{jid}/").status_code == 403
    with pytest.raises(Exception, match="operator"):
        run_edit(people["viewer"], process_store, jid, {"erc_what": "New"})
    bid = process_store.new_batches.create_batch({"collection": "demo"}).id
    pending = process_store.new_jobs.create_job(bid, {"collection": "demo", "payload_url": "x"})
    client.force_login(people["operator"])
    page = client.get(f"/actions/{EDIT}/{pending}/")
    assert page.status_code == 409 and "Pending" in page.content.decode()


def test_the_job_page_offers_the_form_and_the_confirmation_sends_to_it(
    process_store, client, people
):
    jid = failed_job(process_store)
    mirror.apply_job(process_store.jobs.get_job(jid))
    client.force_login(people["operator"])
    detail = client.get(f"/jobs/{jid}/").content.decode()
    assert f"/actions/{EDIT}/{jid}/?next=" in detail
    jobs = client.get("/jobs/").content.decode()
    assert f'<option value="{EDIT}">' in jobs  # a selection of one opens the job's own form
    page = client.get(f"/actions/{EDIT}/confirm?ids={jid}")
    assert page.status_code == 302 and page.url.startswith(f"/actions/{EDIT}/{jid}/")


# --- the core operation and the audit -------------------------------------------------------


def test_a_metadata_edit_may_resume_up_to_processing_and_keeps_before_and_after(
    process_store, people
):
    jid = failed_job(process_store, after="Processing")
    job = process_store.jobs.get_job(jid)
    assert jobparams.resume_steps(job.last_successful_status, ["erc_what"])[-1] == "Processing"
    assert jobparams.default_step(job.last_successful_status, ["erc_what"]) == "Processing"
    record = run_edit(
        people["operator"], process_store, jid, {"erc_what": "Better title", "local_id": "L-1"}
    )
    (item,) = record.items.all()
    assert item.result == "done" and item.after_status == "Processing"
    assert "title (erc_what): 'A title' -> 'Better title'" in item.detail
    assert "local id: (none) -> 'L-1'" in item.detail
    job = process_store.jobs.get_job(jid)
    assert job.metadata == {"erc_what": "Better title", "erc_who": "Someone"}
    assert job.configuration["title"] == "Better title"
    assert job.configuration["local_id"] == "L-1"
    assert job.identifiers == {"primary_id": "", "local_id": ["L-1"]}


def test_a_step_later_than_what_changed_is_refused_by_the_core(process_store):
    jid = failed_job(process_store, after="Processing")
    job = process_store.jobs.get_job(jid)
    with pytest.raises(InvalidTransition, match="Estimating"):
        process_store.edits.edit_job_parameters(
            job, {"payload_url": "https://x.org/b"}, to="Downloading"
        )
    assert process_store.jobs.get_job(jid).status_version == job.status_version


def test_a_job_changed_under_you_is_skipped_and_not_edited(process_store, people):
    jid = failed_job(process_store)
    stale = process_store.jobs.get_job(jid)
    shown = stale.status_version
    process_store.edits.resume_job(jid)  # someone resumed it meanwhile
    process_store.moves.transition_job(jid, "Failed", "again")
    record = execute(
        people["operator"],
        ACTIONS[EDIT],
        [(jid, shown)],
        "fix",
        token=uuid.uuid4().hex,
        params={"changes": {"erc_what": ["A title", "New"]}},
    )
    (item,) = record.items.all()
    assert item.result == "skipped" and "changed since the page was shown" in item.detail
    assert process_store.jobs.get_job(jid).metadata["erc_what"] == "A title"
    # Its status version alone did not move, but the field shown did: skipped too.
    job = process_store.jobs.get_job(jid)
    process_store.job_data.save_job_data(jid, "metadata", {"erc_what": "Other"})
    record = execute(
        people["operator"],
        ACTIONS[EDIT],
        [(jid, job.status_version)],
        "fix",
        token=uuid.uuid4().hex,
        params={"changes": {"erc_what": ["A title", "New"]}},
    )
    (item,) = record.items.all()
    assert item.result == "skipped" and "erc_what" in item.detail
    # And the core refuses a record older than the status on its own.
    with pytest.raises(ChangedUnderYou):
        process_store.edits.edit_job_parameters(stale, {"erc_what": "x"})


def test_a_stale_edit_says_what_changed_and_by_whom_and_links_to_edit_again(
    process_store, client, people
):
    jid = failed_job(process_store)
    job = process_store.jobs.get_job(jid)
    client.force_login(people["operator"])
    page = edit(client, job, erc_what="New title")
    with process_store.changes.acting_as(admin_actor("ada")):
        process_store.edits.resume_job(jid, message="resumed by ada: try once more")
    with process_store.changes.acting_as("worker host-1:42"):
        process_store.moves.transition_job(jid, "Failed", "HTTP 404 again")
    done = client.post(f"/actions/{EDIT}/execute", {"payload": payload_of(page), "reason": "x"})
    (item,) = AdminAction.objects.get(action=EDIT).items.all()
    assert item.result == "skipped"
    step = process_store.jobs.get_job(jid).history.entries[-2].to_status
    assert f"Failed → {step} by ada" in item.detail and "try once more" in item.detail
    assert f"{step} → Failed by a worker (host-1:42)" in item.detail
    assert "HTTP 404 again" in item.detail
    result = client.get(done.url).content.decode()
    assert re.search(rf'<a class="edit-again" href="/actions/{EDIT}/{jid}/\?next=', result)
    # A field changed with no status write: its value now and the one shown are named.
    job = process_store.jobs.get_job(jid)
    page = edit(client, job, erc_what="Newer title")
    process_store.job_data.save_job_data(jid, "metadata", {"erc_what": "Other"})
    client.post(f"/actions/{EDIT}/execute", {"payload": payload_of(page), "reason": "x"})
    item = AdminAction.objects.filter(action=EDIT).first().items.get()
    assert "erc_what is now 'Other' (the page showed 'A title')" in item.detail


def test_a_confirmation_shown_again_for_a_changed_job_says_what_changed_and_offers_the_form(
    process_store, client, people
):
    jid = failed_job(process_store)
    job = process_store.jobs.get_job(jid)
    client.force_login(people["operator"])
    page = edit(client, job, erc_what="New title")
    with process_store.changes.acting_as(admin_actor("ada")):
        process_store.edits.resume_job(jid, message="resumed by ada: once more")
    with process_store.changes.acting_as("worker host-1:42"):
        process_store.moves.transition_job(jid, "Failed", "HTTP 404 again")
    # No reason given: the page is shown again, and the job is no longer as it showed it.
    again = client.post(f"/actions/{EDIT}/execute", {"payload": payload_of(page), "reason": ""})
    body = again.content.decode()
    assert again.status_code == 409
    assert "by ada" in body and "HTTP 404 again" in body and "edit it again" in body
    assert 'name="erc_what"' in body and 'name="version"' in body
    # The form itself, sent for an older version, says the same and shows the job now.
    stale = edit(client, job, erc_what="Newer title")
    assert stale.status_code == 409 and "by a worker (host-1:42)" in stale.content.decode()
    assert not AdminAction.objects.exists()


def test_an_object_manifest_job_edited_to_another_manifest_fetches_the_new_one(
    pipeline, content, people
):
    good = (content.root / "4blocks.checkm").read_text()
    (content.root / "broken.checkm").write_text(good.replace("/4blocks.txt", "/gone.txt"))
    bid = pipeline.submit(type="object-manifest", payload_url=f"{content.url}/broken.checkm")
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert job.status == "Failed" and "gone.txt" in job.message
    record = run_edit(
        people["operator"],
        pipeline.store,
        job.jid,
        {"payload_url": f"{content.url}/4blocks.checkm"},
    )
    assert record.items.get().after_status == "Estimating"
    pipeline.run(bid, until=lambda b: pipeline.store.jobs.get_job(job.jid).status == "Completed")
    # The manifest fetched for the first run was not used again: the new one's files are stored.
    assert_stored(pipeline, pipeline.store.jobs.get_job(job.jid), ["4blocks.jpg", "4blocks.txt"])
