"""Store changes held back from the listeners: at the end of a block, or once they waited."""

from __future__ import annotations

import threading
import time

from merritt_queue.core.changebuffer import ChangeBuffer
from merritt_queue.core.store import Change


def wait_for(check, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not true within {timeout} s"
        time.sleep(0.01)


def test_without_a_delay_the_listeners_hear_of_everything_at_the_close():
    told: list[list] = []
    buffer = ChangeBuffer(told.append)
    buffer.add("a")
    buffer.add("b")
    time.sleep(0.1)
    assert told == []
    buffer.close()
    assert told == [["a", "b"]]


def test_changes_that_waited_the_delay_are_told_by_another_thread_in_order():
    told: list[tuple[list, str]] = []
    buffer = ChangeBuffer(lambda c: told.append((c, threading.current_thread().name)), 0.1)
    buffer.add("a")
    buffer.add("b")
    wait_for(lambda: told)
    assert told == [(["a", "b"], "mq-change-flusher")]
    buffer.add("c")
    buffer.close()  # at once, without waiting for the delay
    assert [c for c, _ in told] == [["a", "b"], ["c"]]


def test_a_close_waits_for_a_delayed_flush_under_way_so_the_order_holds():
    told: list[list] = []
    slow = threading.Event()

    def tell(changes):
        if changes == ["a"]:
            slow.set()
            time.sleep(0.3)  # the worker closes meanwhile
        told.append(changes)

    buffer = ChangeBuffer(tell, 0.05)
    buffer.add("a")
    assert slow.wait(5)
    buffer.add("b")
    buffer.close()
    assert told == [["a"], ["b"]]


def test_a_failing_listener_does_not_stop_later_delayed_flushes():
    told: list[list] = []

    def tell(changes):
        if changes == ["bad"]:
            raise RuntimeError("database gone")
        told.append(changes)

    ChangeBuffer(tell, 0.01).add("bad")
    buffer = ChangeBuffer(tell, 0.05)
    time.sleep(0.1)
    buffer.add("good")
    wait_for(lambda: told == [["good"]])


def test_a_store_block_tells_a_long_step_s_writes_before_it_ends(make_store):
    heard: list[tuple[str, str | None]] = []

    class Listener:
        def __call__(self, change: Change) -> None:
            self.many([change])

        def many(self, changes: list[Change]) -> None:
            heard.extend((c.id, c.record.status if c.record else None) for c in changes)

    store = make_store()
    store.init()
    bid = store.new_batches.create_batch({"profile": "p", "collection": "c", "type": "file"}).id
    jid = store.new_jobs.create_job(bid, {"profile": "p", "collection": "c"})
    store.changes.listeners.append(Listener())
    with store.changes.deferred(max_delay=0.1):
        job = store.job_locks.lock_job(jid)
        job = store.moves.succeed_job(job, keep_lock=True)
        wait_for(lambda: heard)  # the next step has not ended, its first write is told
        assert heard == [(jid, "Estimating")]
        store.job_data.set_space_needed(jid, 7)
        store.moves.succeed_job(job)
        assert len(heard) == 1
    assert heard == [(jid, "Estimating"), (jid, None), (jid, "Provisioning")]
