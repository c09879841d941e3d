"""Find hashes within a Hamming distance without comparing every pair: multi-index hashing.

A ``bits``-wide hash is cut into ``m`` chunks. If two hashes differ in at most ``r`` bits, then
by the pigeonhole principle at least one chunk differs in at most ``r // m`` bits. Each chunk
has its own table from chunk value to the entries holding it; a query looks up, in every table,
its own chunk value and every value within ``r // m`` flipped bits, and checks the full distance
of the few candidates found (Norouzi, Punjani and Fleet, "Fast Search in Hamming Space with
Multi-Index Hashing", CVPR 2012). For 64-bit perceptual hashes and ``r = 10``, four 16-bit
chunks searched at radius 2 make 548 table lookups a query, whatever the number of entries.

The result is exact: every entry within ``r`` is returned, and nothing farther.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import combinations
from typing import Generic, TypeVar

from vhd.errors import ConfigError

T = TypeVar("T")

MAX_PROBES = 200_000
"""Most table lookups a query may need; more chunks are needed beyond this."""


def _chunk_widths(bits: int, chunks: int) -> list[int]:
    base, extra = divmod(bits, chunks)
    return [base + (1 if i < extra else 0) for i in range(chunks)]


def _flips(width: int, radius: int) -> list[int]:
    """Every mask of ``width`` bits with at most ``radius`` bits set (0 first)."""
    masks = [0]
    for r in range(1, min(radius, width) + 1):
        for positions in combinations(range(width), r):
            mask = 0
            for p in positions:
                mask |= 1 << p
            masks.append(mask)
    return masks


def default_chunks(bits: int, radius: int) -> int:
    """A chunk count that keeps lookups few and buckets small for up to millions of entries.

    Chunks of about 16 bits: buckets stay nearly empty for tens of thousands of hashes, and the
    per-chunk radius ``radius // chunks`` stays small enough that the lookups stay few.
    """
    return max(1, min(radius + 1, round(bits / 16)))


class HammingIndex(Generic[T]):
    """An exact radius search over integer hashes of a fixed width.

    Args:
        radius: Largest Hamming distance a query returns.
        bits: Width of the hashes.
        chunks: Number of chunks (default: `default_chunks`).

    Raises:
        ConfigError: A negative radius, or fewer bits than chunks.

    Example:
        >>> index: HammingIndex[str] = HammingIndex(radius=2, bits=8)
        >>> index.add(0b1010_1010, "a")
        >>> index.query(0b1010_1000)
        [('a', 1)]
    """

    def __init__(self, radius: int, bits: int = 64, chunks: int | None = None) -> None:
        if radius < 0:
            raise ConfigError(f"the distance threshold must be 0 or more, got {radius}")
        chunks = chunks or default_chunks(bits, radius)
        if chunks < 1 or chunks > bits:
            raise ConfigError(f"cannot cut {bits}-bit hashes into {chunks} chunks")
        self.radius = radius
        self.bits = bits
        widths = _chunk_widths(bits, chunks)
        probes = sum(sum(math.comb(w, r) for r in range(radius // chunks + 1)) for w in widths)
        if probes > MAX_PROBES:
            raise ConfigError(
                f"{chunks} chunk(s) of {bits}-bit hashes at radius {radius} need {probes:,} lookups a query: "
                "use more chunks (or the default)"
            )
        self._shifts: list[int] = []
        shift = 0
        for w in widths:
            self._shifts.append(shift)
            shift += w
        self._masks = [(1 << w) - 1 for w in widths]
        per_chunk = radius // chunks
        self._flips = [_flips(w, per_chunk) for w in widths]
        self._tables: list[dict[int, list[int]]] = [{} for _ in widths]
        self._keys: list[int] = []
        self._values: list[T] = []

    def __len__(self) -> int:
        return len(self._keys)

    def _parts(self, key: int) -> Iterator[tuple[int, int]]:
        for i, (shift, mask) in enumerate(zip(self._shifts, self._masks, strict=True)):
            yield i, (key >> shift) & mask

    def add(self, key: int, value: T) -> None:
        """Add a hash with a value to return for it (several entries may share a hash)."""
        slot = len(self._keys)
        self._keys.append(key)
        self._values.append(value)
        for i, part in self._parts(key):
            self._tables[i].setdefault(part, []).append(slot)

    def query(self, key: int) -> list[tuple[T, int]]:
        """Return ``(value, distance)`` of every entry within the radius, in insertion order."""
        seen: set[int] = set()
        found: list[tuple[int, int]] = []
        keys = self._keys
        radius = self.radius
        for i, part in self._parts(key):
            table = self._tables[i]
            for flip in self._flips[i]:
                slots = table.get(part ^ flip)
                if not slots:
                    continue
                for slot in slots:
                    if slot in seen:
                        continue
                    seen.add(slot)
                    distance = (keys[slot] ^ key).bit_count()
                    if distance <= radius:
                        found.append((slot, distance))
        found.sort()
        return [(self._values[slot], distance) for slot, distance in found]
