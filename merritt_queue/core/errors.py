"""Errors of the queue core; each message is meant to be shown to a librarian as is."""


class QueueError(Exception):
    """Base of every error the queue core raises on purpose."""


class NotFound(QueueError):
    """The batch or job does not exist (or is only half-created)."""


class InvalidTransition(QueueError):
    """The state machine does not allow this move."""


class ChangedUnderYou(QueueError):
    """Someone else changed the item since it was read; nothing was written."""


class LockLost(QueueError):
    """The ZooKeeper session that held the lock is gone; the step must not commit."""


class Locked(QueueError):
    """Another worker holds the item's lock."""


class NotRemovable(QueueError):
    """Only Completed or Deleted items, with no job still processing, can be removed."""


class InvalidData(QueueError):
    """A value cannot be written to the tree (bad priority, id, or JSON)."""


class ZooKeeperUnreachable(QueueError):
    """ZooKeeper did not answer within the caller's deadline; the requests of this attempt
    were failed, not left queued, so none of them is carried out later."""
