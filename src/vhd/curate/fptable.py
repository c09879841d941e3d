"""Fingerprints kept compactly: a few numbers per file in memory, the rest in a scratch file.

Duplicate search compares every file with every other, so it needs something of every file at
once, but not as Python objects (about 600 bytes each with their strings). `FingerprintTable`
keeps, per file, what the comparison and the keep policies read, in typed arrays (about 45
bytes): the key (input position), the pHash used to find near duplicates (a video's middle
frame), the first 64 bits of the pixel hash, pixels, bytes, encoding fidelity and a group code
(kind and frame count). A video's frame hashes go to per-frame-count arrays. Everything else
(path, sha256 hex strings, all pHashes, sizes) goes to a `vhd.store.scratch.ScratchTable` and
is read back only for the files a report or a caller asks for.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

from vhd.curate.fingerprint import Fingerprint
from vhd.errors import ConfigError
from vhd.store.scratch import ScratchTable

_COLUMNS = ("ord", "path", "kind", "sha256", "pixels", "phashes", "width", "height", "size", "fidelity")


def _pixel_prefix(pixels: str) -> int:
    try:
        return int(pixels[:16], 16) if pixels else 0
    except ValueError:  # not a hex digest (a hand-made fingerprint): any stable 64-bit value
        return int.from_bytes(pixels.encode()[:8].ljust(8, b"\0"), "big")


class FingerprintTable:
    """Fingerprints added one by one, held as compact arrays plus a scratch table on disk.

    Attributes:
        keys: Row key of each file (its input position), in the order added.
        probe: The pHash compared first (the middle frame for a video; 0 without frames).
        pixel_prefix: First 64 bits of the pixel hash (candidates for exact duplicates).
        area: Width x height.
        size: Bytes on disk.
        fidelity: Encoding fidelity (1-100).
        group: Index into `groups`: files are only ever linked inside a group.
        groups: ``(kind, number of pHashes)`` of each group code.
        frames: For groups with two pHashes or more: ``(keys, all pHashes row by row)``.
        errors: ``(key, path, error)`` of the fingerprints that failed, in the order added.
    """

    def __init__(self) -> None:
        self.keys = array("q")
        self.probe = array("Q")
        self.pixel_prefix = array("Q")
        self.area = array("q")
        self.size = array("q")
        self.fidelity = array("B")
        self.group = array("I")
        self.groups: list[tuple[str, int]] = []
        self._group_of: dict[tuple[str, int], int] = {}
        self.frames: dict[int, tuple[array[int], array[int]]] = {}
        self.errors: list[tuple[int, str, str]] = []
        self._scratch = ScratchTable(_COLUMNS)

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, fp: Fingerprint, key: int | None = None) -> None:
        """Add a fingerprint under ``key`` (default: its ``order``); failed ones go to `errors`."""
        key = fp.order if key is None else key
        if fp.error is not None:
            self.errors.append((key, fp.path, fp.error))
            return
        count = len(fp.phashes)
        gkey = (fp.kind, count)
        group = self._group_of.get(gkey)
        if group is None:
            group = self._group_of[gkey] = len(self.groups)
            self.groups.append(gkey)
        packed = struct.pack(f"<{count}Q", *fp.phashes)
        self._scratch.put(
            key, (fp.order, fp.path, fp.kind, fp.sha256, fp.pixels, packed, fp.width, fp.height, fp.size, fp.fidelity)
        )
        self.keys.append(key)
        self.probe.append(fp.phashes[count // 2] if count else 0)
        self.pixel_prefix.append(_pixel_prefix(fp.pixels))
        self.area.append(fp.area)
        self.size.append(fp.size)
        self.fidelity.append(max(0, min(255, fp.fidelity)))
        self.group.append(group)
        if count > 1:
            keys, hashes = self.frames.setdefault(group, (array("q"), array("Q")))
            keys.append(key)
            hashes.extend(fp.phashes)

    def pixels(self, keys: Iterable[int]) -> dict[int, str]:
        """Return the full pixel hash of each key."""
        return {key: str(row[4]) for key, row in self._scratch.get(keys).items()}

    def fingerprints(self, keys: Iterable[int]) -> dict[int, Fingerprint]:
        """Read fingerprints back from the scratch table, by key."""
        return {key: _fingerprint(row) for key, row in self._scratch.get(keys).items()}

    def scan(self) -> Iterator[Fingerprint]:
        """Every fingerprint added (not the failed ones), in key order."""
        for _, row in self._scratch.scan():
            yield _fingerprint(row)

    def drop_arrays(self) -> None:
        """Free the arrays once linked (the scratch table stays for reading fingerprints back)."""
        for name in ("probe", "pixel_prefix", "area", "size", "fidelity", "group"):
            setattr(self, name, array(getattr(self, name).typecode))
        self.frames = {}

    def close(self) -> None:
        """Drop the scratch table and its file."""
        self._scratch.close()


def _fingerprint(row: tuple[Any, ...]) -> Fingerprint:
    order, path, kind, sha256, pixels, packed, width, height, size, fidelity = row
    if not isinstance(packed, bytes):
        raise ConfigError("a scratch fingerprint row lost its pHashes")
    phashes = struct.unpack(f"<{len(packed) // 8}Q", packed)
    return Fingerprint(
        order=int(order),
        path=str(path),
        kind=str(kind),
        sha256=str(sha256),
        pixels=str(pixels),
        phashes=tuple(phashes),
        width=int(width),
        height=int(height),
        size=int(size),
        fidelity=int(fidelity),
    )
