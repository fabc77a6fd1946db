"""What the bench asks ZooKeeper itself (four-letter words): its last zxid, to count write
transactions, and its ``mntr`` figures, to size the tree. A server that refuses a word ends
the run with what to change."""

from __future__ import annotations

import re

from harness import zookeeper


def four_letter(hosts: str, word: str) -> str:
    """The answer of the first ZooKeeper in ``hosts`` to a four-letter word (``srvr``, ``mntr``)."""
    text = zookeeper.four_letter(hosts, word)
    if "is not executed because it is not in the whitelist" in text:
        first = hosts.split(",")[0].split("/")[0]
        raise SystemExit(
            f"bench: ZooKeeper {first} refuses {word!r}: add it to 4lw.commands.whitelist"
        )
    return text


def read_zxid(hosts: str) -> int:
    """The last zxid of the first ZooKeeper in ``hosts`` (four-letter word ``srvr``)."""
    text = four_letter(hosts, "srvr")
    match = re.search(r"^Zxid: 0x([0-9a-fA-F]+)", text, re.MULTILINE)
    if not match:
        raise SystemExit(
            f"bench: ZooKeeper {hosts} answered srvr without a Zxid line "
            f"(is srvr in 4lw.commands.whitelist?): {text[:200]!r}"
        )
    return int(match.group(1), 16)


def read_mntr(hosts: str) -> dict[str, str]:
    """ZooKeeper's ``mntr`` figures (``zk_znode_count``, ``zk_approximate_data_size``, ...)."""
    figures = {}
    for line in four_letter(hosts, "mntr").splitlines():
        key, sep, value = line.partition("\t")
        if sep:
            figures[key.strip()] = value.strip()
    if "zk_znode_count" not in figures:
        raise SystemExit(f"bench: ZooKeeper {hosts} answered mntr without zk_znode_count")
    return figures
