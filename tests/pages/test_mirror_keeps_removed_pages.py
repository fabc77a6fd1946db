"""A job or batch removed from the queue stays in the mirror as history: the job list and
search find it, its page says when it left the queue, and no action takes it, one by one or
"all matching" (listed or summarised). The rows are marked as the mirror marks them when a
node vanishes (``mirror.remove_jobs``), whatever removed it: a job's node gone behind the
mirror's back (Merritt's own tools) is the case where its status could still be one an
action applies to."""

from __future__ import annotations

import pytest

from batches.models import Batch
from jobs.models import Job
from mirror import facade as mirror
from steering.models import AdminAction
from tests.pages import test_bulk_whole_filter as bulk
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_pages import confirm_and_execute, mirrored

queue, people, admin_queue, small = base.queue, base.people, base.admin_queue, bulk.small
REFUSED = "removed from the queue by cleanup on"


def removed_job(store, status: str, title: str = "Letters of 1925") -> str:
    jid = base.job_in(store, status)
    store.job_data.save_job_data(jid, "metadata", {"erc_what": title})
    ark = {"primary_id": f"ark:/99999/fk4{jid[-6:]}", "local_id": [f"lid-{jid}"]}
    store.job_data.save_job_data(jid, "identifiers", ark)
    mirrored(store, jid)
    mirror.remove_jobs([jid])
    return jid


def test_the_list_finds_a_removed_job_and_its_page_marks_it(client, queue, people):
    jid = removed_job(queue, "Failed")
    live = base.job_in(queue, "Failed")
    mirrored(queue, live)
    client.force_login(people["operator"])
    job = Job.objects.get(jid=jid)
    for q in (job.ark, f"lid-{jid}", "Letters of 1925"):
        body = client.get("/jobs/", {"q": q}).content.decode()
        assert f"/jobs/{jid}/" in body and "mq-removed" in body, q
    listing = client.get("/jobs/?status=Failed").content.decode()
    assert f"/jobs/{jid}/" in listing and f"/jobs/{live}/" in listing
    page = client.get(f"/jobs/{jid}/")
    body = page.content.decode()
    assert page.status_code == 200 and "Removed from the queue" in body
    assert "Letters of 1925" in body and "job.resume/confirm" not in body
    assert "Removed from the queue" not in client.get(f"/jobs/{live}/").content.decode()


def test_a_removed_batch_page_marks_it_and_offers_no_action(client, queue, people):
    jid = removed_job(queue, "Held")
    bid = Job.objects.get(jid=jid).batch_id
    mirror.remove_batches([bid])
    client.force_login(people["administrator"])
    page = client.get(f"/batches/{bid}/")
    body = page.content.decode()
    assert page.status_code == 200 and "Removed from the queue" in body
    assert "batch.delete/confirm" not in body and "batch.hold/confirm" not in body
    assert "mq-removed" in client.get("/batches/").content.decode()
    assert Batch.objects.get(bid=bid).job_total == 1  # its jobs still count in it


@pytest.mark.parametrize(
    "name,status,who",
    [
        ("job.resume", "Failed", "operator"),
        ("job.hold", "Pending", "operator"),
        ("job.delete", "Held", "administrator"),
    ],
)
def test_actions_refuse_a_removed_job_one_by_one_and_all_matching(
    client, queue, people, name, status, who
):
    gone = removed_job(queue, status)
    live = base.job_in(queue, status)
    mirrored(queue, live)
    client.force_login(people[who])
    one = client.get(f"/actions/{name}/confirm?ids={gone}").content.decode()
    assert f'<tr class="not-applicable" data-item="{gone}"' in one and REFUSED in one
    assert "nothing to act on" in one

    page, done, _ = confirm_and_execute(client, name, f"all=1&status={status}")
    body = page.content.decode()
    assert f'<tr class="not-applicable" data-item="{gone}"' in body and REFUSED in body
    assert f'<tr class="applies" data-item="{live}"' in body
    assert done.status_code == 302
    assert queue.jobs.get_job(gone).status == status  # untouched in the queue
    record = AdminAction.objects.get()
    assert not record.items.filter(item_id=gone).exists()


def test_a_summarised_all_matching_selection_leaves_removed_jobs_out(client, queue, people, small):
    jids = bulk.jobs_in(queue, "Failed")
    gone = jids[:10]
    mirror.remove_jobs(gone)
    client.force_login(people["operator"])
    page, done, _ = confirm_and_execute(client, "job.resume", "all=1&collection=wide")
    assert f'data-applying="{bulk.N - len(gone)}"' in page.content.decode()
    base.work(small)
    record = AdminAction.objects.get()
    assert record.done == bulk.N - len(gone)
    assert not record.items.filter(item_id__in=gone).exists()
    assert {queue.jobs.get_job(j).status for j in gone} == {"Failed"}


def test_the_dashboard_counts_of_unfinished_work_leave_removed_rows_out(queue, people):
    from django.core.cache import cache

    from dashboard import queries

    removed_job(queue, "Held")
    mirrored(queue, base.job_in(queue, "Held"))
    cache.clear()
    assert queries.status_counts(Job).get("Held") == 1  # counted whole
    assert queries.status_counts(Job).get("Held") == 1  # the settled ones from the cache


@pytest.mark.django_db
def test_metrics_count_the_jobs_and_batches_still_in_the_queue():
    """The drift gauge compares these counts with ZooKeeper's: a removed row counted there
    would be drift for ever."""
    from django.utils import timezone

    from metrics.collector import read_mirror

    now = timezone.now()
    Batch.objects.create(bid="bid0000000001", status="Completed", read_at=now)
    Batch.objects.create(bid="bid0000000002", status="Completed", read_at=now, removed_at=now)
    for n, removed in ((1, None), (2, now)):
        Job.objects.create(
            jid=f"jid000000000{n}",
            batch_id="bid0000000001",
            status="Completed",
            read_at=now,
            removed_at=removed,
        )
    facts = read_mirror()
    assert facts.jobs.get("Completed") == 1 and facts.batches.get("Completed") == 1
