"""Who does Storing and Recording: chosen at submission, carried by the job's own nodes."""

from __future__ import annotations

from merritt_queue.core import stepowners
from merritt_queue.core.planning import plan_jobs
from merritt_queue.project import checks
from tests.test_submission import GOOD, post, queue, token  # noqa: F401 (fixtures)


def test_a_submission_records_the_site_mode_and_its_job_inherits_it(
    client,
    queue,  # noqa: F811
    token,  # noqa: F811
    settings,  # noqa: F811
):
    settings.MQ_STORE_RECORD = stepowners.MERRITT_QUEUE
    body = GOOD | {"type": "file", "payload_url": "https://example.org/a.txt"}
    response = post(client, token, body)
    assert response.status_code == 201
    submission = queue.get_batch(response.json()["batch_id"]).submission
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
    Profile.objects.filter(name="demo").update(store_record=stepowners.MERRITT_API)
    body = GOOD | {"type": "file", "payload_url": "https://example.org/a.txt"}
    response = post(client, token, body)
    assert response.status_code == 201
    submission = queue.get_batch(response.json()["batch_id"]).submission
    assert submission[stepowners.KEY] == stepowners.MERRITT_API
    # A job submitted before the setting existed, or naming nonsense, was submitted locally.
    assert stepowners.of_job({}) == stepowners.of_job({"store_record": "x"}) == stepowners.LOCAL


def test_an_unknown_site_mode_is_a_system_check_error(settings):
    settings.MQ_STORE_RECORD = "merritt"
    (error,) = checks.check_services()
    assert error.id == "mq.E009" and "MQ_STORE_RECORD='merritt'" in error.msg
