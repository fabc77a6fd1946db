"""Who does Storing and Recording: chosen at submission, carried by the job's own nodes."""

from __future__ import annotations

import pytest

from merritt_queue.core import stepowners
from merritt_queue.core.planning import plan_jobs
from merritt_queue.project import servicechecks
from tests.door.test_submission import GOOD, post, queue, token  # noqa: F401 (fixtures)


def test_a_submission_records_the_site_mode_and_its_job_inherits_it(
    client,
    queue,  # noqa: F811
    token,  # noqa: F811
    settings,  # noqa: F811
):
    settings.MQ_STORE_RECORD = stepowners.MERRITT_QUEUE
    merritt_ready(settings)
    body = GOOD | {"type": "file", "payload_url": "https://example.org/a.txt"}
    response = post(client, token, body)
    assert response.status_code == 201
    submission = queue.batches.get_batch(response.json()["batch_id"]).submission
    assert submission[stepowners.KEY] == stepowners.MERRITT_QUEUE
    (job,) = plan_jobs(submission)
    assert stepowners.of_job(job.configuration) == stepowners.MERRITT_QUEUE


def test_a_profiles_own_mode_wins_over_the_site_and_a_job_keeps_what_it_was_given(
    client,
    queue,  # noqa: F811
    token,  # noqa: F811
    settings,  # noqa: F811
):
    from batches.models import Profile

    settings.MQ_STORE_RECORD = stepowners.LOCAL
    merritt_ready(settings)
    Profile.objects.filter(name="demo").update(store_record=stepowners.MERRITT_API)
    body = GOOD | {"type": "file", "payload_url": "https://example.org/a.txt"}
    response = post(client, token, body)
    assert response.status_code == 201
    submission = queue.batches.get_batch(response.json()["batch_id"]).submission
    assert submission[stepowners.KEY] == stepowners.MERRITT_API
    # A job submitted before the setting existed, or naming nonsense, was submitted locally.
    assert stepowners.of_job({}) == stepowners.of_job({"store_record": "x"}) == stepowners.LOCAL


def test_an_unknown_site_mode_is_a_system_check_error(settings):
    settings.MQ_STORE_RECORD = "merritt"
    (error,) = servicechecks.check_services()
    assert error.id == "mq.E009" and "MQ_STORE_RECORD='merritt'" in error.msg


def merritt_ready(settings) -> None:
    """What a Merritt mode needs: a numeric storage node, a content URL storage can fetch."""
    from batches.models import Profile

    Profile.objects.filter(name="demo").update(storage_node="9501")
    settings.MQ_CONTENT_BASE_URL = "https://queue.example.org"
    settings.MERRITT_STORAGE_URL = "https://store.example.org/store"


def test_a_merritt_mode_submission_is_refused_before_merritt_could_only_fail_it(
    client,
    queue,  # noqa: F811
    token,  # noqa: F811
    settings,
):
    settings.MQ_STORE_RECORD = stepowners.MERRITT_QUEUE
    settings.MQ_CONTENT_BASE_URL = "file:///var/queue"
    body = GOOD | {"type": "file", "payload_url": "https://example.org/a.txt"}
    response = post(client, token, body)
    assert response.status_code == 400
    text = response.content.decode()
    assert "storage node 'local' is not a number" in text
    assert "MQ_CONTENT_BASE_URL='file:///var/queue' is not an http(s) URL" in text
    assert "MERRITT_STORAGE_URL is not set" in text


def test_a_file_content_base_in_a_merritt_mode_is_a_system_check_error(settings):
    settings.MQ_STORE_RECORD = stepowners.MERRITT_QUEUE
    for base in ("", "file:///var/queue/"):
        settings.MQ_CONTENT_BASE_URL = base
        (error,) = servicechecks.check_content_base_url()
        assert error.id == "mq.E083" and "MQ_STORE_RECORD=merritt-queue" in error.msg
    settings.MQ_CONTENT_BASE_URL = "https://queue.example.org"
    assert servicechecks.check_content_base_url() == []
    settings.MQ_STORE_RECORD, settings.MQ_CONTENT_BASE_URL = stepowners.LOCAL, ""
    assert servicechecks.check_content_base_url() == []


def test_a_merritt_mode_without_the_local_id_service_is_warned_of(settings):
    settings.MQ_STORE_RECORD, settings.MERRITT_INVENTORY_URL = stepowners.MERRITT_QUEUE, ""
    (warning,) = servicechecks.check_local_id_service()
    assert warning.id == "mq.W084" and "MQ_STORE_RECORD=merritt-queue" in warning.msg
    settings.MERRITT_INVENTORY_URL = "https://inventory.example.org/inventory"
    assert servicechecks.check_local_id_service() == []
    settings.MQ_STORE_RECORD, settings.MERRITT_INVENTORY_URL = stepowners.LOCAL, ""
    assert servicechecks.check_local_id_service() == []


@pytest.mark.django_db
def test_a_profile_in_a_merritt_mode_needs_a_numeric_storage_node(settings):
    from django.core.exceptions import ValidationError

    from batches.models import Profile

    settings.MQ_STORE_RECORD = stepowners.LOCAL
    profile = Profile(name="p", collection="p", storage_node="local")
    profile.clean()  # local: any node name
    profile.store_record = stepowners.MERRITT_QUEUE
    with pytest.raises(ValidationError, match="not a number"):
        profile.clean()
    profile.storage_node = "9501"
    profile.clean()


def test_merritt_api_storage_fetches_the_jobs_files_at_their_signed_urls(settings, tmp_path):
    from urllib.parse import unquote, urlsplit

    from pipeline import contentlinks
    from pipeline.services import _work_file_url

    settings.MQ_CONTENT_BASE_URL = "https://queue.example.org/"
    url = _work_file_url(tmp_path, "")(tmp_path / "jobs" / "jid0000000007" / "producer/a b.txt")
    parts = urlsplit(url)
    assert url.startswith("https://queue.example.org/merritt-content/jid0000000007/producer/")
    name = unquote(parts.path.split("/jid0000000007/", 1)[1])
    assert name == "producer/a b.txt"
    assert contentlinks.verified("jid0000000007", name, parts.query.removeprefix("s="))
    assert not contentlinks.verified("jid0000000008", name, parts.query.removeprefix("s="))


@pytest.mark.django_db
def test_a_profile_in_a_merritt_mode_makes_a_file_content_base_a_system_check_error(settings):
    from batches.models import Profile

    settings.MQ_STORE_RECORD, settings.MQ_CONTENT_BASE_URL = stepowners.LOCAL, "file:///srv/q"
    Profile.objects.create(
        name="p", collection="p", storage_node="9501", store_record=stepowners.MERRITT_QUEUE
    )
    assert servicechecks.check_content_base_url() == []  # without the database: the site's only
    (error,) = servicechecks.check_content_base_url(databases=["default"])
    assert error.id == "mq.E083" and "profile p (merritt-queue)" in error.msg
