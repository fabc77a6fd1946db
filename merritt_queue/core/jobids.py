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

from array import array
from bisect import bisect_left
from collections import namedtuple
from collections.abc import Iterator

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.serialization import int_struct, write_string

from . import kazoocall
from . import tree as t
from .multiread import rooted

_PREFIX = t.JOB_PREFIX.encode()
_NAME_LEN = len(_PREFIX) + 10
_DIGITS = frozenset(b"0123456789")


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


def _numbers(raw: memoryview) -> array:
    """The job numbers of a ``getChildren`` answer (count, then each name's length and
    bytes), unsorted; a name that is not a job id is skipped."""
    count = int_struct.unpack_from(raw, 0)[0]
    offset, numbers = int_struct.size, array("q")
    for _ in range(max(count, 0)):
        size = int_struct.unpack_from(raw, offset)[0]
        offset += int_struct.size
        name = bytes(raw[offset : offset + size])
        offset += size
        if size == _NAME_LEN and name.startswith(_PREFIX) and _DIGITS.issuperset(name[3:]):
            numbers.append(int(name[3:]))
    return numbers


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
