"""Message digests of deposited files: the algorithms Merritt accepts and how to compute them.

Guarantees:
- only md5, sha1, sha256 and sha512 are accepted; every spelling a depositor may use
  (``SHA-256``, ``sha_256``, ``SHA256``) is normalised to the hashlib name (``sha256``);
- every refusal is a sentence a librarian can act on (it lists the supported algorithms);
- files are read in fixed-size chunks, so memory stays bounded whatever their size.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

# hashlib name -> length of the hexadecimal digest
HEX_LENGTHS = {"md5": 32, "sha1": 40, "sha256": 64, "sha512": 128}
SUPPORTED = tuple(HEX_LENGTHS)
CHUNK = 1024 * 1024
_HEX = frozenset("0123456789abcdef")


def normalise_algorithm(name: str) -> str:
    """The hashlib name of ``name`` (``SHA-256`` -> ``sha256``); ValueError if unsupported."""
    key = name.strip().lower().replace("-", "").replace("_", "")
    if key not in HEX_LENGTHS:
        raise ValueError(
            f"unknown digest algorithm {name.strip()!r} (supported: {', '.join(SUPPORTED)})"
        )
    return key


def check_digest_format(alg: str, value: str) -> str | None:
    """What is wrong with ``value`` as a hex digest of ``alg`` (any case), or None if nothing."""
    try:
        alg = normalise_algorithm(alg)
    except ValueError as e:
        return str(e)
    value = value.strip()
    if not set(value.lower()) <= _HEX:
        return f"{alg} value {value!r} is not hexadecimal"
    expected = HEX_LENGTHS[alg]
    if len(value) != expected:
        return f"{alg} digests are {expected} hexadecimal characters, {value!r} has {len(value)}"
    return None


class Hashers:
    """Several digests of one stream, fed chunk by chunk."""

    def __init__(self, algorithms: Iterable[str]):
        names = dict.fromkeys(normalise_algorithm(a) for a in algorithms)
        # usedforsecurity=False: md5 is a fixity check here, and FIPS builds refuse it otherwise.
        self._hashes = {n: hashlib.new(n, usedforsecurity=False) for n in names}

    def update(self, chunk: bytes | memoryview) -> None:
        for h in self._hashes.values():
            h.update(chunk)

    def hexdigests(self) -> dict[str, str]:
        return {name: h.hexdigest() for name, h in self._hashes.items()}


def file_digests(path: Path | str, algs: Iterable[str], chunk: int = CHUNK) -> dict[str, str]:
    """Hex digests of the file at ``path``, keyed by hashlib name, in one read of the file."""
    hashers = Hashers(algs)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            hashers.update(block)
    return hashers.hexdigests()


def bytes_digests(data: bytes, algs: Iterable[str]) -> dict[str, str]:
    """``file_digests`` of bytes already in memory."""
    hashers = Hashers(algs)
    hashers.update(data)
    return hashers.hexdigests()
