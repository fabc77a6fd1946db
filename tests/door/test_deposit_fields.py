"""The URL checks every door makes of a depositor's URL (merritt_queue.deposit.fields)."""

import pytest

from merritt_queue.deposit.fields import url_problems


@pytest.mark.parametrize("field", ["payload_url", "notify_url"])
def test_a_port_out_of_range_is_refused_at_the_door(field):
    # It used to pass the door and fail only in the worker, once the batch was queued.
    [problem] = url_problems("https://example.org:99999/a", field)
    assert problem.startswith(f"{field}:") and "port" in problem


def test_a_good_url_has_no_problem():
    assert url_problems("https://example.org:8443/a", "notify_url") == []
