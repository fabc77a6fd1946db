"""ZooKeeper's own view of its size, from the ``mntr`` four-letter word."""

from __future__ import annotations

import socket


def znode_count(hosts: str, timeout: float = 1.0) -> int | None:
    """``zk_znode_count`` of the first server in ``hosts`` that answers ``mntr``; None when
    none does or the word is not in the server's ``4lw.commands.whitelist``.

    It counts the server's whole tree, other chroots included: that is what fills its heap.
    """
    for entry in hosts.split(","):
        host, _, port = entry.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout) as sock:
                sock.settimeout(timeout)
                sock.sendall(b"mntr")
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
        except (OSError, ValueError):
            continue
        for line in data.decode("utf-8", "replace").splitlines():
            key, _, value = line.partition("\t")
            if key == "zk_znode_count" and value.strip().isdigit():
                return int(value)
        return None  # it answered, but not with mntr's figures
    return None
