"""Errors of the service adapters.

Guarantees: every error carries ``retryable`` (True when the same call may succeed later:
connection trouble, timeouts, 5xx, 429, a full working disk; False when repeating cannot help:
404, digest mismatch, a refused address, bad credentials) and a message meant to be shown to a
librarian as is: it names the URL, file or identifier and what went wrong.
"""

from __future__ import annotations


class ServiceError(Exception):
    """Base of every error a service adapter raises on purpose."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable

    def __reduce__(self):
        # RQ and multiprocessing pickle exceptions; keep ``retryable`` across the trip.
        return (_rebuild, (type(self), self.message, self.retryable), dict(self.__dict__))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[ServiceError], message: str, retryable: bool) -> ServiceError:
    err = cls.__new__(cls)
    ServiceError.__init__(err, message, retryable=retryable)
    return err


class FetchError(ServiceError):
    """Content could not be fetched (or was refused by the network policy)."""

    # Set only on the error of a parallel fetch: (url, its own error) for each failed download.
    failures: list[tuple[str, BaseException]]


class PartFileGone(FetchError):
    """A download's part file vanished, or was replaced, before it was renamed into place:
    something else wrote in this attempt's folder. Always retryable: the step runs again,
    never fails for it."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message, retryable=True)


class MinterError(ServiceError):
    """No identifier could be minted."""


class StorageError(ServiceError):
    """An object version could not be stored or read."""


class ManifestMismatch(StorageError):
    """The files to store are not those the manifest lists (size or digest)."""


class InventoryError(ServiceError):
    """The stored version could not be recorded in the inventory."""


class NotifyError(ServiceError):
    """The depositor's callback could not be notified."""
