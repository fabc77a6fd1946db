"""Many ZooKeeper reads in few round trips, for reading the whole tree fast.

ZooKeeper 3.6 and later answer a ``multiRead`` request: many ``getData`` and
``getChildren`` reads in one request, each answered on its own (one missing
node does not fail the others). kazoo 2.11 has no call for it, so the request
is written here with kazoo's own serialisation helpers and sent through its
connection. kazoo spends a few hundred microseconds of Python on every
request; batched 500 to a request, reads go some 50 times faster (210,000
against 3,500 nodes per second on the development machine), which is what
lets the mirror read 100,000 jobs in seconds instead of minutes.

Guarantees:

- Only reads; no watch is left behind.
- ``results()`` gives one result per request, in order: ``(data, stat)`` for a
  get, the list of names for a children listing, None for a missing node. Any
  other error is raised.
- Each read sees a committed state, but reads in different requests may see
  different moments: like any pipelined read of a moving tree.
- A server without multiRead (ZooKeeper 3.5 and older) is detected once per
  client and served by plain pipelined async reads instead.
"""

from __future__ import annotations

import weakref
from collections import namedtuple
from collections.abc import Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import EXCEPTIONS, NoNodeError, UnimplementedError
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.serialization import (
    int_struct,
    multiheader_struct,
    read_buffer,
    read_string,
    stat_struct,
    write_string,
)
from kazoo.protocol.states import ZnodeStat

from . import kazoocall

GET = 4  # ZooDefs.OpCode.getData
CHILDREN = 8  # ZooDefs.OpCode.getChildren
# Reads per multiRead: enough to amortise the per-request cost, while a response of job
# data stays a few hundred KB (Java clients refuse more than jute.maxbuffer, 1 MB).
CHUNK = 500
# Reads in flight at once in ``read_many``: fifty multiRead requests.
WINDOW = 50 * CHUNK

Request = tuple[int, str]  # (GET | CHILDREN, path)

_support: weakref.WeakKeyDictionary[KazooClient, bool] = weakref.WeakKeyDictionary()


class MultiRead(namedtuple("MultiRead", "operations")):
    """The wire form of ZooKeeper's multiRead (OpCode 22); read by kazoo's connection."""

    type = 22

    def serialize(self) -> bytearray:
        b = bytearray()
        for kind, path in self.operations:
            b += multiheader_struct.pack(kind, False, -1)
            b += write_string(path)
            b.append(0)  # no watch
        return b + multiheader_struct.pack(-1, True, -1)

    @classmethod
    def deserialize(cls, buf, offset):
        out: list = []
        while True:
            kind, done, _ = multiheader_struct.unpack_from(buf, offset)
            offset += multiheader_struct.size
            if done:
                return out
            if kind == GET:
                data, offset = read_buffer(buf, offset)
                out.append((data or b"", ZnodeStat._make(stat_struct.unpack_from(buf, offset))))
                offset += stat_struct.size
            elif kind == CHILDREN:
                count = int_struct.unpack_from(buf, offset)[0]
                offset += int_struct.size
                names = []
                for _ in range(count):
                    name, offset = read_string(buf, offset)
                    names.append(name)
                out.append(names)
            else:
                code = int_struct.unpack_from(buf, offset)[0]
                offset += int_struct.size
                out.append(EXCEPTIONS[code]())


class Reads:
    """Reads in flight; ``results()`` waits for them."""

    def __init__(self, client: KazooClient, requests: Sequence[Request]):
        self.client = client
        self.requests = list(requests)
        self._multi = _supports_multiread(client) if self.requests else False
        self._pending = self._send_multi() if self._multi else self._send_single()

    def _send_multi(self) -> list:
        pending, root = [], self.client.chroot
        for start in range(0, len(self.requests), CHUNK):
            ops = [(k, rooted(root, p)) for k, p in self.requests[start : start + CHUNK]]
            pending.append(kazoocall.send(self.client, MultiRead(ops)))
        return pending

    def _send_single(self) -> list:
        issue = {GET: self.client.get_async, CHILDREN: self.client.get_children_async}
        return [issue[kind](path) for kind, path in self.requests]

    def results(self) -> list:
        if self._multi:
            return [_value(r) for result in self._pending for r in result.get()]
        out = []
        for result in self._pending:
            try:
                out.append(result.get())
            except NoNodeError:  # removed since it was listed: reads as absent
                out.append(None)
        return out


def rooted(root: str, path: str) -> str:
    """kazoo's ``_prefix_root``, about ten times cheaper for the absolute, normalised paths
    the tree builds; any other path goes through kazoo's own (which normalises it, or
    refuses a relative one)."""
    if not path.startswith("/") or "//" in path or "/." in path or path.endswith("/"):
        return path if path == "/" and not root else _prefix_root(root, path)
    return root + path if root else path


def _value(result):
    if isinstance(result, NoNodeError):
        return None
    if isinstance(result, Exception):
        raise result
    return result


def start(client: KazooClient, requests: Sequence[Request]) -> Reads:
    """Send ``requests`` now; collect them later with ``.results()`` (overlaps other work)."""
    return Reads(client, requests)


def read_many(client: KazooClient, requests: Sequence[Request]) -> list:
    """``requests``' results, at most WINDOW reads in flight: a whole tree's reads at once
    would hold every pending result in memory (one per read on a server without multiRead)."""
    out: list = []
    for start in range(0, len(requests), WINDOW):
        out += Reads(client, requests[start : start + WINDOW]).results()
    return out


def _supports_multiread(client: KazooClient) -> bool:
    known = _support.get(client)
    if known is None:
        result = kazoocall.send(client, MultiRead([(CHILDREN, rooted(client.chroot, "/"))]))
        try:
            result.get()
            known = True
        except UnimplementedError:
            known = False
        _support[client] = known
    return known
