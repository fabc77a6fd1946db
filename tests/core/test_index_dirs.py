"""The listing size of each index directory: the estimate against the frame a real ZooKeeper
sends for a ``getChildren``, as a Java client reads it (its 4-byte length, then the frame)."""

from __future__ import annotations

import socket
import struct

from merritt_queue.core import indexdirs
from merritt_queue.core import tree as t
from merritt_queue.core.states import JobStatus

GET_CHILDREN = 8


def _frame(sock: socket.socket) -> bytes:
    (length,) = struct.unpack(">i", _exactly(sock, 4))
    return _exactly(sock, length)


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "ZooKeeper closed the connection"
        out += chunk
    return out


def _send(sock: socket.socket, body: bytes) -> None:
    sock.sendall(struct.pack(">i", len(body)) + body)


def wire_listing_bytes(hosts: str, path: str) -> int:
    """The length of the frame answering ``getChildren(path)``, from the wire itself: a
    session of its own, spoken in ZooKeeper's protocol (what the Java client checks against
    jute.maxbuffer)."""
    host, port = hosts.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        # ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly.
        _send(sock, struct.pack(">iqiqi16sB", 0, 0, 10000, 0, 16, b"\0" * 16, 0))
        _frame(sock)
        encoded = path.encode()
        _send(
            sock,
            struct.pack(">ii", 1, GET_CHILDREN) + struct.pack(">i", len(encoded)) + encoded + b"\0",
        )
        frame = _frame(sock)
        xid, _zxid, err = struct.unpack(">iqi", frame[:16])
        assert (xid, err) == (1, 0)
        return len(frame)


def test_the_estimate_is_the_frame_a_real_getchildren_sends(zk, store, zk_config):
    bid = store.new_batches.create_batch({"profile": "p", "batchID": "bid-size-1"}).id
    jids = [store.new_jobs.create_job(bid, {"collection": "c"}) for _ in range(30)]
    for jid in jids[:12]:
        store.moves.transition_job(jid, JobStatus.FAILED)
    sizes = {s.path: s for s in indexdirs.measure(zk)}

    for path in (t.JOBS, t.BATCHES, t.BATCH_UUIDS, t.job_state_dir("pending")):
        wire = wire_listing_bytes(zk_config.hosts, zk_config.chroot_path + path)
        listed = indexdirs.listing_bytes(zk.get_children(path))
        assert listed == wire, path
        if path == t.JOBS:
            # "states" is counted at the width of a job id: never under the real size.
            assert 0 <= sizes[path].bytes - wire <= len("jid0000000000")
        else:
            assert sizes[path].bytes == wire, path
    assert sizes[t.job_state_dir("pending")].children == 18
    assert sizes[t.job_state_dir("failed")].children == 12
    assert sizes[t.BATCH_UUIDS].exact


def test_a_large_directory_is_measured_from_its_stat_alone(zk, store):
    calls: list[str] = []
    real = zk.get_children_async

    def counted(path, *args, **kwargs):
        calls.append(path)
        return real(path, *args, **kwargs)

    zk.get_children_async = counted
    for i in range(5):
        zk.create(f"{t.JOB_STATES}/completed/05-jid{i:010d}")
    sizes = {s.path: s for s in indexdirs.measure(zk, limit=1000)}
    completed = sizes[t.job_state_dir("completed")]
    assert completed.bytes == indexdirs.HEADER_BYTES + 5 * (4 + 16)
    assert completed.ratio == completed.bytes / 1000
    assert calls == []  # no directory of fixed-width names is listed


def test_warning_from_seventy_percent():
    limit = 1000
    assert not indexdirs.DirSize("/x", 1, 699, True, limit).warning
    assert indexdirs.DirSize("/x", 1, 700, True, limit).warning
