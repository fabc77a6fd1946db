"""Many calls at once, for the HEADs and downloads of one step.

Guarantees: each call runs in a copy of the caller's context, so what it tells the step's
log (``steplog``) reaches the caller's; a single call runs in the caller's thread; a failed
call's error is its future's, as in a pool.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import Future, ThreadPoolExecutor


def submit(pool: ThreadPoolExecutor | Inline, fn, /, *args, **kwargs) -> Future:
    """``pool.submit``, the call run in a copy of the caller's context: a thread of the pool
    tells the caller's step log what it did."""
    return pool.submit(contextvars.copy_context().run, fn, *args, **kwargs)


def pool(workers: int) -> ThreadPoolExecutor | Inline:
    """Where HEADs and downloads run: one (most deposits) in the caller's thread, since a
    pool would only add a thread's start and hand-over to every small request."""
    return ThreadPoolExecutor(max_workers=workers) if workers > 1 else Inline()


class Inline:
    """An executor that runs each call at once in the caller's thread."""

    def __enter__(self) -> Inline:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # a failure is the future's, as in a pool
            future.set_exception(exc)
        return future
