"""A selection too large to list, in a real browser: the confirmation page summarises it
(counts by collection and status, a sample), passes axe-core, and the delete it confirms
runs over every job of the filter, the mirror current after. ``MQ_SKIP_BROWSER=1`` skips."""

from __future__ import annotations

from jobs.models import Job
from merritt_queue.core.records import NewJob
from mirror import facade as mirror
from tests.a11y import refused
from tests.browser.test_browser import browser  # noqa: F401 - the same fixture
from tests.browser.test_browser_steering import admin_page, confirm  # noqa: F401

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

N = 12


def test_a_large_delete_is_summarised_confirmed_and_run(
    admin_page,  # noqa: F811 - the imported fixture
    live_server,
    pipeline,
    settings,
):
    settings.MQ_BULK_LIST_MAX = 5
    store = pipeline.store
    bid = store.new_batches.create_batch({"batchID": "wide-1", "collection": "wide"}).id
    jids = store.new_jobs.create_jobs(bid, [NewJob({"collection": "wide"})] * N)
    for jid in jids:
        store.moves.transition_job(jid, "Held", "held for the move")
    mirror.full_reconcile(store)

    page = admin_page
    page.goto(f"{live_server.url}/actions/job.delete/confirm?all=1&status=Held&collection=wide")
    page.wait_for_selector(".bulk-summary")
    summary = page.inner_text(".bulk-summary")
    assert "Too many to list" in summary and "wide" in summary and str(N) in summary
    assert page.locator("table.confirm-items tr[data-item]").count() == N
    assert f"Delete {N} items" in page.inner_text("form.confirm-form")
    assert not refused(page), refused(page)
    confirm(page, "the collection moved to another repository")
    assert f"{N} done" in page.inner_text("body")
    assert not refused(page), refused(page)
    assert set(Job.objects.filter(jid__in=jids).values_list("status", flat=True)) == {"Deleted"}
