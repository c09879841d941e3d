"""Content hashes that identify samples: sha256 of a file's bytes, read in streaming chunks."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from vhd.fileio import open_regular

CHUNK_SIZE = 1 << 20
"""Bytes read per chunk when hashing a file (1 MiB)."""


def sha256_file(path: str | Path) -> str:
    """Return the hex sha256 of a file's bytes without loading the whole file.

    Args:
        path: The file to hash.

    Returns:
        The 64-character lower-case hex digest.

    Raises:
        OSError: The file cannot be read, or is not a regular file (a FIFO, a device: refused at
            once, see `vhd.fileio.open_regular`).
    """
    digest = hashlib.sha256()
    with open_regular(path) as fh:
        while chunk := fh.read(CHUNK_SIZE):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Return the hex sha256 of in-memory bytes."""
    return hashlib.sha256(data).hexdigest()


def combine_hashes(hex_digests: Iterable[str]) -> str:
    """Return the sha256 of the concatenated hex digests, in the order given.

    This is the id of a folder of frames: the hashes of its frame files, in frame order.

    Args:
        hex_digests: Hex sha256 digests, in order.

    Returns:
        The hex sha256 of ``"".join(hex_digests)`` encoded as ASCII.
    """
    digest = hashlib.sha256()
    for h in hex_digests:
        digest.update(h.encode("ascii"))
    return digest.hexdigest()


def is_sha256_hex(value: str) -> bool:
    """Whether ``value`` looks like a hex sha256 digest (64 hex characters)."""
    return len(value) == 64 and all(c in "0123456789abcdefABCDEF" for c in value)
