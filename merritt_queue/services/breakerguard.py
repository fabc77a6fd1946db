"""An adapter's calls through its dependency's breaker (``breakers``).

``guarded(adapter, breakers, name, methods, error)`` answers an object that behaves as the
adapter, except that each call of ``methods``:

- is not made while the breaker is open: it raises the adapter's own error class, as
  ``DependencyDown`` (retryable), saying since when and until when, so a step waits;
- counts a transient failure (a ``retryable`` ``ServiceError``); the failure that opens the
  breaker, and a failed probe, are raised as ``DependencyDown`` too, so the job waits from
  then on instead of failing (the failures before it are raised as they were);
- counts any other answer as the dependency answering.

``name`` is a dependency name or a function of the call's arguments that gives one (a
callback's host). A handler that catches its adapter's retryable errors to wait keeps
working unchanged: a ``DependencyDown`` is one of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from typing import Any
from urllib.parse import urlsplit

from .breakers import Breakers, BreakerState
from .errors import FetchError, InventoryError, MinterError, NotifyError, ServiceError, StorageError


class DependencyDown(ServiceError):
    """A call not made, or just failed, because its dependency's breaker is open."""

    state: BreakerState
    wait: float  # seconds until the step is worth trying again


class MinterDown(DependencyDown, MinterError):
    pass


class StorageDown(DependencyDown, StorageError):
    pass


class InventoryDown(DependencyDown, InventoryError):
    pass


class NotifyDown(DependencyDown, NotifyError):
    pass


class FetchDown(DependencyDown, FetchError):
    pass


_DOWN: dict[type[ServiceError], type[DependencyDown]] = {
    MinterError: MinterDown,
    StorageError: StorageDown,
    InventoryError: InventoryDown,
    NotifyError: NotifyDown,
    FetchError: FetchDown,
}

# The longest wait a breaker asked of a step in this thread (``refusals``).
_seen = threading.local()


class Refusals:
    """What the breakers asked of the step running in this thread: ``wait`` seconds (0:
    nothing), so that a step which turned a refusal into its own wait waits that long."""

    def __init__(self) -> None:
        self.wait = 0.0

    def __enter__(self) -> Refusals:
        self._outer = getattr(_seen, "current", None)
        _seen.current = self
        return self

    def __exit__(self, *_exc) -> None:
        _seen.current = self._outer


def down(error: type[ServiceError], state: BreakerState, now: float, cause: str = "") -> Exception:
    """The error a call through an open breaker raises, of the adapter's own error class."""
    # Only this call's own failure is named: the breaker's last error may be another job's.
    message = f"{cause}; {state.explain()}" if cause else state.explain()
    cls = _DOWN.get(error, DependencyDown)
    err = cls(message, retryable=True)
    err.state, err.wait = state, state.wait(now)
    seen = getattr(_seen, "current", None)
    if seen is not None:
        seen.wait = max(seen.wait, err.wait)
    return err


def call(
    breakers: Breakers, name: str, error: type[ServiceError], fn: Callable, *args, **kwargs
) -> Any:
    """``fn(*args, **kwargs)`` through the breaker of ``name``."""
    if not breakers.enabled:
        return fn(*args, **kwargs)
    admitted = breakers.admit(name)
    if not admitted.allowed:
        raise down(error, admitted.state, breakers.clock())
    try:
        result = fn(*args, **kwargs)
    except ServiceError as e:
        if not e.retryable or isinstance(e, DependencyDown):
            breakers.succeeded(admitted)
            raise
        state = breakers.failed(name, str(e))
        if state.is_open:
            raise down(error, state, breakers.clock(), cause=str(e)) from e
        raise
    breakers.succeeded(admitted)
    return result


class Guarded:
    """The adapter, its ``methods`` called through the breaker (see the module)."""

    def __init__(
        self,
        adapter: Any,
        breakers: Breakers,
        name: str | Callable[..., str],
        methods: Collection[str],
        error: type[ServiceError],
    ) -> None:
        self._adapter = adapter
        self._breakers = breakers
        self._name = name
        self._methods = frozenset(methods)
        self._error = error

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._adapter, attr)
        if attr in self._methods:
            return self._through(value)
        if callable(value) and not attr.startswith("_"):
            return self._rewrapping(value)
        return value

    def _through(self, fn: Callable) -> Callable:
        def through(*args, **kwargs):
            name = self._name(*args, **kwargs) if callable(self._name) else self._name
            return call(self._breakers, name, self._error, fn, *args, **kwargs)

        return through

    def _rewrapping(self, fn: Callable) -> Callable:
        """A call that answers another adapter of the same kind (storage ``on_node``) answers
        it guarded too."""

        def rewrapping(*args, **kwargs):
            result = fn(*args, **kwargs)
            if isinstance(result, type(self._adapter)):
                return Guarded(result, self._breakers, self._name, self._methods, self._error)
            return result

        return rewrapping


def guarded(
    adapter: Any,
    breakers: Breakers,
    name: str | Callable[..., str],
    methods: Collection[str],
    error: type[ServiceError],
) -> Any:
    return Guarded(adapter, breakers, name, methods, error)


def content_gate(breakers: Breakers) -> Callable[[str, Callable[[], Any]], Any]:
    """What a fetcher's downloads pass (``Fetcher.gated``): the breaker of each URL's host,
    ``content:<host>``. Only the transfer is inside: a digest mismatch found after it is
    the depositor's file, never the host being down."""

    def gate(url: str, transfer: Callable[[], Any]) -> Any:
        return call(breakers, f"content:{host_of(url)}", FetchError, transfer)

    return gate


def waiting_on(error: ServiceError) -> DependencyDown | None:
    """The open breaker an error means the step should wait for: the error itself, or, for
    several downloads that all failed transiently, the one of them that met an open breaker
    (its wait the longest); None when the error is the step's to fail with."""
    if isinstance(error, DependencyDown):
        return error
    failures = [e for _, e in getattr(error, "failures", None) or []]
    if not failures or not all(getattr(e, "retryable", False) for e in failures):
        return None
    down = [e for e in failures if isinstance(e, DependencyDown)]
    return max(down, key=lambda e: e.wait) if down else None


def host_of(url: str) -> str:
    """The host (and port) of a URL, as a breaker's name names it; never the URL itself,
    whose path or query may hold a token, and which would become a node, a page's row and a
    metric's label."""
    return (urlsplit(url).netloc.rpartition("@")[2] or "(no host)").lower()


def webhook_name(url: str = "", *_args, **kwargs) -> str:
    """The breaker of a notification's receiver: ``notify(url, ...)``'s host."""
    return f"webhook:{host_of(url or kwargs.get('url', ''))}"
