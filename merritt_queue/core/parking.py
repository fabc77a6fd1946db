"""A job of ours waiting in Storing or Recording keeps a lock Merritt's consumers honour.

Merritt's storage and inventory consumers take work with MerrittZK's ``Job.acquireJob``:
the first job of the state directory whose ``/jobs/<jid>/lock`` they can create. Nothing
else keeps them off a job, so a job of ours (``local`` or ``merritt-api``) that sat
unlocked in Storing or Recording (waiting for a storage lock, or for our dispatcher) would
be taken by them, and failed: they cannot read our working files.

So such a job is never left unlocked there. The multi that lets go of its lock in those
states, or moves it into them without one, writes a *parked* lock instead: a persistent
``lock`` node holding ``PARKED``. Merritt's ``lock`` sees a lock and passes on; a session
ending does not remove it. This project's dispatcher counts it as free, and a worker takes
it over in one multi (delete the parked node at its version, create its ephemeral lock),
so between the two nobody else can lock the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import stepowners
from .records import Op, OpKind
from .sides import job_in_our_format
from .states import JobStatus

PARKED = b"merritt-queue:parked"
PARKING_STATES = frozenset({JobStatus.STORING, JobStatus.RECORDING})


def parks(configuration: Mapping[str, Any] | None, status: str) -> bool:
    """Whether a job of this configuration, left in ``status``, keeps a parked lock: one of
    ours whose Storing and Recording our workers do."""
    return (
        status in PARKING_STATES
        and job_in_our_format(configuration)
        and stepowners.of_job(configuration) != stepowners.MERRITT_QUEUE
    )


def is_parked(data: bytes | None, ephemeral_owner: int) -> bool:
    return data == PARKED and not ephemeral_owner


def held(stat: Any) -> bool:
    """Whether a job lock with this stat (None: absent) is held by a worker, ours or
    Merritt's: a parked lock is not, so a waiting job can still be steered."""
    if stat is None:
        return False
    return bool(stat.ephemeralOwner) or stat.dataLength != len(PARKED)


def park_op(path: str) -> Op:
    return Op(OpKind.CREATE, path, PARKED)


def take_over_ops(path: str, version: int) -> list[Op]:
    """The multi that turns a parked lock at ``version`` into the caller's ephemeral lock."""
    return [Op(OpKind.DELETE, path, version=version), Op(OpKind.CREATE, path, ephemeral=True)]
