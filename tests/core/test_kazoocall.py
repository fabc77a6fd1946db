"""The contract ``merritt_queue.core.kazoocall`` relies on in kazoo's private ``_call``.

A kazoo upgrade that renames it, changes its arguments, stops queueing a prebuilt request
or stops answering through the async result given fails here, by name, rather than as a
store that hangs or a tree read that returns nothing.
"""

from __future__ import annotations

import inspect

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, NoNodeError
from kazoo.handlers.utils import AsyncResult
from kazoo.protocol.serialization import Create, Exists, GetData, Transaction
from kazoo.security import OPEN_ACL_UNSAFE

from merritt_queue.core import kazoocall, multiread


def test_kazoo_call_takes_a_request_and_an_async_object():
    assert list(inspect.signature(KazooClient._call).parameters) == [
        "self",
        "request",
        "async_object",
    ]


def test_a_closed_client_sets_its_error_on_the_result_and_sends_nothing():
    client = KazooClient(hosts="127.0.0.1:1")
    result = kazoocall.send(client, Exists("/", None))
    assert isinstance(result, AsyncResult)
    with pytest.raises(ConnectionClosedError):
        result.get(timeout=1)
    assert len(client._queue) == 0


def test_a_request_is_sent_as_built_and_answered_on_its_result(zk):
    path = zk.chroot + "/kazoocall"
    created = kazoocall.send(zk, Create(path, b"sent", OPEN_ACL_UNSAFE, 0))
    assert isinstance(created, AsyncResult)
    assert created.get(timeout=10) == path
    assert kazoocall.send(zk, GetData(path, None)).get(timeout=10)[0] == b"sent"
    assert kazoocall.send(zk, Exists(zk.chroot + "/absent", None)).get(timeout=10) is None
    with pytest.raises(NoNodeError):
        kazoocall.send(zk, GetData(zk.chroot + "/absent", None)).get(timeout=10)
    # A multi answers one result per op, in order, its paths under the client's chroot.
    ops = [
        Create(path + "/a", b"", OPEN_ACL_UNSAFE, 0),
        Create(path + "/b", b"", OPEN_ACL_UNSAFE, 0),
    ]
    assert kazoocall.send(zk, Transaction(ops)).get(timeout=10) == ["/kazoocall/a", "/kazoocall/b"]


def test_every_request_goes_through_the_clients_own_call(zk, monkeypatch):
    # Tests and the merritt benchmark count requests by wrapping client._call.
    seen = []
    real = zk._call
    monkeypatch.setattr(zk, "_call", lambda r, a: seen.append(type(r).__name__) or real(r, a))
    kazoocall.send(zk, Exists(zk.chroot, None)).get(timeout=10)
    multiread.read_many(zk, [(multiread.CHILDREN, "/")])
    assert seen[0] == "Exists" and "MultiRead" in seen
