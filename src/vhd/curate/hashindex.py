"""Find hashes within a Hamming distance without comparing every pair: multi-index hashing.

A ``bits``-wide hash is cut into ``m`` chunks. If two hashes differ in at most ``r`` bits, then
by the pigeonhole principle at least one chunk differs in at most ``r // m`` bits. Each chunk
has its own table from chunk value to the entries holding it; a query looks up, in every table,
its own chunk value and every value within ``r // m`` flipped bits, and checks the full distance
of the few candidates found (Norouzi, Punjani and Fleet, "Fast Search in Hamming Space with
Multi-Index Hashing", CVPR 2012). For 64-bit perceptual hashes and ``r = 10``, four 16-bit
chunks searched at radius 2 make 548 table lookups a query, whatever the number of entries.

The result is exact: every entry within ``r`` is returned, and nothing farther.

`HammingIndex` answers one query at a time from Python dicts. `pairs_within` finds every pair
of a whole numpy array of hashes at once with the same chunks, in compact arrays: each chunk's
values are sorted, and for every flip mask the sorted runs of value ``v`` and of ``v ^ mask``
give the candidate pairs, whose full distance is then checked in bulk. When the masks would cost
more than comparing every pair (large radii, few hashes), every pair is compared instead, in
blocks. Duplicate search (`vhd.curate.clusters`) uses it on one hash per file.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import combinations
from typing import TYPE_CHECKING, Generic, TypeVar

from vhd.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

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


PAIR_BATCH = 1 << 17
"""Candidate pairs `pairs_within` checks at once (its working memory is a few times this, in bytes x 8)."""

_DENSE_BITS = 20
"""Chunks up to this wide are bucketed with a table over every value; wider ones by search."""

_BYTE_BITS: list[int] = [bin(i).count("1") for i in range(256)]


def popcount64(values: NDArray[np.uint64]) -> NDArray[np.uint8]:
    """Return the number of set bits of each 64-bit value (``np.bitwise_count`` where numpy has it)."""
    import numpy as np

    native = getattr(np, "bitwise_count", None)  # numpy >= 2.0; the declared floor is 1.24
    if native is not None:
        counted: NDArray[np.uint8] = np.asarray(native(values), dtype=np.uint8)
        return counted
    return popcount64_by_bytes(values)


def popcount64_by_bytes(values: NDArray[np.uint64]) -> NDArray[np.uint8]:
    """`popcount64` for numpy before 2.0: a table of the 256 byte values, summed over the 8 bytes."""
    import numpy as np

    table = np.array(_BYTE_BITS, dtype=np.uint8)
    data = np.ascontiguousarray(values, dtype=np.uint64)
    counted: NDArray[np.uint8] = table[data.view(np.uint8).reshape(-1, 8)].sum(axis=1, dtype=np.uint8)
    return counted


def _pair_checks(
    order: NDArray[np.intp],
    a_pos: NDArray[np.intp],
    b_start: NDArray[np.intp],
    b_len: NDArray[np.intp],
    codes: NDArray[np.uint64],
    radius: int,
    batch: int,
) -> Iterator[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """Pair sorted position ``a_pos[k]`` with positions ``b_start[k] ..+ b_len[k]``; yield those within ``radius``."""
    import numpy as np

    some = b_len > 0
    a_pos, b_start, b_len = a_pos[some], b_start[some], b_len[some]
    if not len(b_len):
        return
    ends = np.cumsum(b_len)
    lo, count = 0, len(b_len)
    while lo < count:
        base = int(ends[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, base + batch, side="right")))
        lens = b_len[lo:hi]
        total = int(ends[hi - 1]) - base
        a = np.repeat(a_pos[lo:hi], lens)
        b = np.repeat(b_start[lo:hi] - (ends[lo:hi] - lens - base), lens) + np.arange(total)
        i, j = order[a], order[b]
        near = popcount64(codes[i] ^ codes[j]) <= radius
        yield i[near], j[near]
        lo = hi


def _brute_force(
    codes: NDArray[np.uint64], radius: int, batch: int
) -> Iterator[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    import numpy as np

    n = len(codes)
    step = max(1, batch // n)
    columns = np.arange(n)
    for start in range(0, n - 1, step):
        stop = min(n - 1, start + step)
        rows = np.arange(start, stop)
        near = popcount64((codes[start:stop, None] ^ codes[None, :]).ravel()).reshape(stop - start, n) <= radius
        near &= columns[None, :] > rows[:, None]
        i, j = np.nonzero(near)
        yield (i + start).astype(np.intp), j.astype(np.intp)


def pairs_within(
    codes: NDArray[np.uint64],
    radius: int,
    *,
    chunks: int | None = None,
    method: str = "auto",
    batch: int = PAIR_BATCH,
) -> Iterator[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """Find every pair of 64-bit hashes within a Hamming distance, in batches of index arrays.

    Equal hashes are paired like any others (``n`` copies make ``n * (n - 1) / 2`` pairs), so
    callers with many copies pass distinct hashes. A pair may come more than once (from two
    chunks); ``i != j`` always.

    Args:
        codes: The hashes (``uint64``).
        radius: Largest distance of a pair.
        chunks: Chunks of the multi-index (default: `default_chunks`).
        method: ``index`` (multi-index hashing), ``all`` (compare every pair, in blocks) or
            ``auto`` (whichever costs less for this many hashes and this radius).
        batch: Candidate pairs checked at once.

    Yields:
        ``(i, j)``: indices into ``codes`` of pairs within ``radius``.

    Raises:
        ConfigError: A negative radius, bad chunks or an unknown method.
    """
    import numpy as np

    if radius < 0:
        raise ConfigError(f"the distance threshold must be 0 or more, got {radius}")
    if method not in ("auto", "index", "all"):
        raise ConfigError(f"unknown pair search {method!r}: choose auto, index or all")
    chunks = chunks or default_chunks(64, radius)
    if chunks < 1 or chunks > 64:
        raise ConfigError(f"cannot cut 64-bit hashes into {chunks} chunks")
    codes = np.ascontiguousarray(codes, dtype=np.uint64)
    n = len(codes)
    if n < 2:
        return
    widths = _chunk_widths(64, chunks)
    per_chunk = radius // chunks
    probes = sum(sum(math.comb(w, r) for r in range(per_chunk + 1)) for w in widths)
    if method == "index" and probes > MAX_PROBES:
        raise ConfigError(
            f"{chunks} chunk(s) of 64-bit hashes at radius {radius} need {probes:,} lookups a hash: use more chunks"
        )
    if method == "all" or (method == "auto" and (probes > MAX_PROBES or 8 * probes >= n)):
        yield from _brute_force(codes, radius, batch)
        return
    shift = 0
    for width in widths:
        dtype = np.uint8 if width <= 8 else np.uint16 if width <= 16 else np.uint32 if width <= 32 else np.uint64
        values = ((codes >> np.uint64(shift)) & np.uint64((1 << width) - 1)).astype(dtype)
        shift += width
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        del values
        edges = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
        starts = np.concatenate(([0], edges)).astype(np.intp)
        lengths = np.concatenate((edges, [n])).astype(np.intp) - starts
        run_values = ordered[starts]
        del ordered, edges
        # Flip 0: every pair inside a run of equal chunk values.
        runs = np.flatnonzero(lengths > 1)
        a_pos = _spread(starts[runs], lengths[runs])
        run_end = np.repeat(starts[runs] + lengths[runs], lengths[runs])
        yield from _pair_checks(order, a_pos, a_pos + 1, run_end - a_pos - 1, codes, radius, batch)
        del a_pos, run_end
        if per_chunk == 0:
            continue
        if width <= _DENSE_BITS:
            run_of = np.full(1 << width, -1, dtype=np.intp)
            run_of[run_values.astype(np.intp)] = np.arange(len(run_values))
        for flip in _flips(width, per_chunk)[1:]:
            partner = np.bitwise_xor(run_values, flip)  # stays the chunk's width: flip fits in it
            if width <= _DENSE_BITS:
                other = run_of[partner.astype(np.intp)]
            else:
                other = np.minimum(np.searchsorted(run_values, partner), len(run_values) - 1)
                other[run_values[other] != partner] = -1
            mine = np.flatnonzero((other >= 0) & (run_values < partner))  # each pair of runs once
            other = other[mine]
            a_pos = _spread(starts[mine], lengths[mine])
            yield from _pair_checks(
                order,
                a_pos,
                np.repeat(starts[other], lengths[mine]),
                np.repeat(lengths[other], lengths[mine]),
                codes,
                radius,
                batch,
            )


def _spread(starts: NDArray[np.intp], lengths: NDArray[np.intp]) -> NDArray[np.intp]:
    """Every position of the ranges ``starts[k] ..+ lengths[k]``, in order."""
    import numpy as np

    total = int(lengths.sum())
    offsets = np.cumsum(lengths) - lengths
    return np.asarray(np.repeat(starts - offsets, lengths) + np.arange(total), dtype=np.intp)
