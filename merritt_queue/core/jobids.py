"""Every job id under ``/jobs``, held as numbers: the one listing of a full read of the
tree that cannot be split.

Merritt keeps every job as a direct child of ``/jobs`` (zk-tree.md), and ZooKeeper has no
paged ``getChildren``: the names of all jobs come back in one response, some 17 bytes a
job on the wire. A job id is ``jid`` and ten digits (``tree.is_job_id``), so it is held
here as its number, 8 bytes, where a list of Python strings weighs some 70 bytes a job;
the names are parsed straight off the response, never made strings all at once. Anything
else under ``/jobs`` is not a job and is skipped, as ``tree.is_job_id`` would.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections import namedtuple
from collections.abc import Iterator

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.serialization import write_string

from . import kazoocall
from . import tree as t
from .multiread import rooted

_PREFIX = t.JOB_PREFIX.encode()


class _ListNames(namedtuple("_ListNames", "path")):
    """``getChildren`` (OpCode 8, no watch) whose answer is left as the response's bytes.

    kazoo deserialises a response on its connection thread, the one that answers the
    server's pings: a million names parsed there keep it busy past a session timeout on a
    loaded host (measured: the session expired). So the bytes are only sliced off there,
    and parsed by the caller (``_numbers``).
    """

    type = 8

    def serialize(self) -> bytearray:
        return write_string(self.path) + bytearray([0])

    @classmethod
    def deserialize(cls, buf, offset):
        return memoryview(buf)[offset:]  # no copy of what may be megabytes


# A job's name in a ``getChildren`` answer: its length (13, four bytes big-endian), then
# ``jid`` and ten digits. ZooKeeper refuses a NUL in a name, so the three zero bytes can
# only begin a length: a match is never inside another name.
_JOB_ENTRY = re.compile(rb"\x00\x00\x00\x0d" + re.escape(_PREFIX) + rb"([0-9]{10})")


def _numbers(raw: memoryview) -> array:
    """The job numbers of a ``getChildren`` answer (a count, then each name's length and
    bytes), unsorted; a name that is not a job id is skipped. Found by a regular
    expression, some three times faster than reading the names one by one."""
    return array("q", (int(m[1]) for m in _JOB_ENTRY.finditer(raw)))


class JobIds:
    """The job ids of the tree, sorted; iterated, chunked and tested as ``jid`` strings."""

    def __init__(self, numbers: array):
        self._numbers = _sorted(numbers)

    @classmethod
    def of(cls, jids: list[str]) -> JobIds:
        return cls(array("q", (int(j[3:]) for j in jids if t.is_job_id(j))))

    def __len__(self) -> int:
        return len(self._numbers)

    def __iter__(self) -> Iterator[str]:
        return (_name(n) for n in self._numbers)

    def __contains__(self, jid: object) -> bool:
        if not isinstance(jid, str) or not t.is_job_id(jid):
            return False
        n, numbers = int(jid[3:]), self._numbers
        i = bisect_left(numbers, n)
        return i < len(numbers) and numbers[i] == n

    def chunks(self, size: int) -> Iterator[list[str]]:
        """The ids, ``size`` at a time, each chunk made strings only when it is reached."""
        for start in range(0, len(self._numbers), size):
            yield [_name(n) for n in self._numbers[start : start + size]]


# A bitmap sort while the ids' range is at most this many times their count: Merritt's job
# ids count up, so the ids in a tree are mostly a dense run.
DENSE = 64


def _sorted(numbers: array) -> array:
    """``numbers`` sorted, distinct, without a Python int for each at once (``sorted``
    would make a list of them, some 36 bytes a job): a bitmap over their range when it is
    dense enough, else ``sorted``."""
    if not numbers:
        return array("q")
    low, high = min(numbers), max(numbers)
    if high - low > DENSE * len(numbers):
        return array("q", sorted(set(numbers)))
    bits = bytearray((high - low) // 8 + 1)
    for n in numbers:
        bits[(n - low) >> 3] |= 1 << ((n - low) & 7)
    out = array("q")
    for i, byte in enumerate(bits):
        if byte:
            out.extend(low + (i << 3) + b for b in range(8) if byte >> b & 1)
    return out


def _name(number: int) -> str:
    return f"{t.JOB_PREFIX}{number:010d}"


def start(client: KazooClient):
    """Send the listing of ``/jobs`` now; ``read(pending)`` collects it."""
    return kazoocall.send(client, _ListNames(rooted(client.chroot, t.JOBS)))


def read(pending) -> JobIds:
    try:
        return JobIds(_numbers(pending.get()))
    except NoNodeError:  # no job was ever created
        return JobIds(array("q"))
