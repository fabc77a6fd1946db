"""ZooKeeper's own view of itself, from its four-letter words (``mntr``, ``srvr``)."""

from __future__ import annotations

import socket


def four_letter(server: str, word: str, timeout: float = 5.0) -> str:
    """The answer of one server (``host:port``, 2181 by default) to a four-letter word;
    ``OSError`` (or ``ValueError`` for a bad port) when it does not answer."""
    host, _, port = server.strip().rpartition(":") if ":" in server else (server, "", "2181")
    with socket.create_connection((host.strip("[]"), int(port)), timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def znode_count(hosts: str, timeout: float = 1.0) -> int | None:
    """``zk_znode_count`` of the first server in ``hosts`` that answers ``mntr``; None when
    none does or the word is not in the server's ``4lw.commands.whitelist``.

    It counts the server's whole tree, other chroots included: that is what fills its heap.
    """
    for entry in hosts.split(","):
        try:
            answer = four_letter(entry, "mntr", timeout)
        except (OSError, ValueError):
            continue
        for line in answer.splitlines():
            key, _, value = line.partition("\t")
            if key == "zk_znode_count" and value.strip().isdigit():
                return int(value)
        return None  # it answered, but not with mntr's figures
    return None
