"""The express lane's rule and queues (``merritt_queue.core.lanes``): which jobs are small or
urgent, which queues every worker and a reserved worker serve. No services needed."""

from __future__ import annotations

from merritt_queue.core.lanes import (
    LaneRule,
    express_queue_name,
    is_reserved,
    job_queue_name,
)
from merritt_queue.core.queues import (
    ADMIN_QUEUE,
    BATCH_PENDING_QUEUE,
    BATCH_REPORT_QUEUE,
    NOTIFY_QUEUE,
    all_queue_names,
    express_queue_names,
    reserved_queue_names,
)

RULE = LaneRule(small_bytes=1000, urgent_priority=1)


def test_a_small_job_goes_express_once_estimating_has_sized_it():
    assert not RULE.express("Pending", 5, 10)  # its size is not known yet
    assert not RULE.express("Estimating", 5, 10)
    for status in ("Provisioning", "Downloading", "Processing", "Storing", "Recording", "Notify"):
        assert RULE.express(status, 5, 999), status
        assert not RULE.express(status, 5, 1000), status
    assert RULE.queue_name("Downloading", 5, 10) == "mq-express-downloading"
    assert RULE.queue_name("Downloading", 5, 10**9) == "mq-job-downloading"


def test_an_urgent_job_goes_express_in_every_state_whatever_its_size():
    for status in ("Pending", "Estimating", "Downloading", "Notify"):
        assert RULE.express(status, 0, 10**12) and RULE.express(status, 1, 10**12)
        assert not RULE.express(status, 2, 10**12)


def test_a_size_not_known_is_never_small_and_the_settings_turn_the_lane_off():
    assert not RULE.express("Downloading", 5, None)
    off = LaneRule(small_bytes=0, urgent_priority=-1)
    assert not off.express("Downloading", 0, 0) and not off.express("Pending", 0, 0)


def test_every_worker_serves_the_express_lane_before_the_normal_one():
    names = all_queue_names()
    assert names[:2] == [ADMIN_QUEUE, BATCH_REPORT_QUEUE]
    express = express_queue_names()
    assert names[2 : 2 + len(express)] == express
    assert express[0] == "mq-express-notify" and express[-1] == "mq-express-pending"
    assert names[-1] == NOTIFY_QUEUE and len(names) == len(set(names))


def test_a_reserved_worker_never_serves_a_large_jobs_download_and_serves_every_small_step():
    reserved = reserved_queue_names()
    for status in ("Downloading", "Processing", "Storing"):
        assert job_queue_name(status) not in reserved, status
    for status in ("Pending", "Estimating", "Provisioning", "Downloading", "Notify"):
        assert express_queue_name(status) in reserved, status
    # A small deposit's batch, its Pending and Estimating (size not known yet) and its report.
    for name in (BATCH_PENDING_QUEUE, BATCH_REPORT_QUEUE, "mq-job-pending", "mq-job-estimating"):
        assert name in reserved, name
    assert ADMIN_QUEUE not in reserved and NOTIFY_QUEUE not in reserved
    assert reserved.index("mq-express-pending") < reserved.index("mq-job-notify")
    assert set(reserved) <= set(all_queue_names())
    assert is_reserved(reserved) and not is_reserved(all_queue_names())
    assert not is_reserved(["mq-job-downloading"])
