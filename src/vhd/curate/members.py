"""A file's place in its duplicate cluster, and the sequence of them read back from a scratch file."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from vhd.curate.fingerprint import Fingerprint
from vhd.curate.fptable import FingerprintTable

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

_READ_BATCH = 512
"""Members read back from the scratch file per query."""


@dataclass(frozen=True, slots=True)
class Member:
    """A file's place in its cluster.

    Attributes:
        fp: The file's fingerprint.
        cluster: Cluster id: the sha256 of the kept file.
        kept: Whether this file is the one kept.
        match: ``kept``, ``exact`` (same pixels as the kept file) or ``near``.
        distance: Hamming distance to the kept file's pHash (for a video, the largest over
            its frames); may exceed the threshold when linked through another member.
        size: Number of files in the cluster.
    """

    fp: Fingerprint
    cluster: str
    kept: bool
    match: str
    distance: int
    size: int


class ClusterView(Sequence[Member]):
    """The members of a clustering, read back from the fingerprint table's scratch file on access.

    It holds per file only its row, its cluster's root, its distance and whether it is an exact
    copy of its kept file (about 20 bytes); fingerprints are read in batches as members are
    iterated.
    """

    def __init__(
        self,
        table: FingerprintTable,
        keys: NDArray[np.int64],
        rows: NDArray[np.int32],
        roots: NDArray[np.int32],
        distance: NDArray[np.uint8],
        exact: NDArray[np.bool_],
    ) -> None:
        self._table = table
        self._keys = keys
        self._rows = rows
        self._roots = roots  # by position: non-decreasing, so a cluster is a run
        self._distance = distance
        self._exact = exact

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> Member: ...

    @overload
    def __getitem__(self, index: slice) -> list[Member]: ...

    def __getitem__(self, index: int | slice) -> Member | list[Member]:
        positions = range(len(self))[index]
        if isinstance(positions, range):
            return list(self._members(positions))
        return next(self._members([positions]))

    def __iter__(self) -> Iterator[Member]:
        return self._members(range(len(self)))

    def _bounds(self, positions: NDArray[np.intp]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        import numpy as np

        roots = self._roots[positions]
        return np.searchsorted(self._roots, roots, side="left"), np.searchsorted(self._roots, roots, side="right")

    def _members(self, positions: Iterable[int]) -> Iterator[Member]:
        import numpy as np

        batch: list[int] = []
        for position in positions:
            batch.append(position)
            if len(batch) >= _READ_BATCH:
                yield from self._read(np.array(batch, dtype=np.intp))
                batch = []
        if batch:
            yield from self._read(np.array(batch, dtype=np.intp))

    def _read(self, positions: NDArray[np.intp]) -> Iterator[Member]:
        starts, ends = self._bounds(positions)
        keys = self._keys[self._rows[positions]]
        kept_keys = self._keys[self._rows[starts]]
        fps = self._table.fingerprints([*keys.tolist(), *kept_keys.tolist()])
        for p, key, kept_key, start, end in zip(
            positions.tolist(), keys.tolist(), kept_keys.tolist(), starts.tolist(), ends.tolist(), strict=True
        ):
            is_kept = p == start
            if is_kept:
                match, distance = "kept", 0
            else:
                match, distance = ("exact" if self._exact[p] else "near"), int(self._distance[p])
            yield Member(fps[key], fps[kept_key].sha256, is_kept, match, distance, end - start)

    def in_clusters(self) -> Iterator[Member]:
        """The members of clusters of two files or more, in order."""
        import numpy as np

        starts, ends = self._bounds(np.arange(len(self), dtype=np.intp))
        return self._members(np.flatnonzero(ends - starts > 1).tolist())

    def counts(self) -> dict[str, int]:
        """Files, clusters of two or more, and exact and near duplicates."""
        import numpy as np

        starts, ends = self._bounds(np.arange(len(self), dtype=np.intp))
        grouped = ends - starts > 1
        firsts = starts == np.arange(len(self))
        exact = int(np.count_nonzero(self._exact & grouped & ~firsts))
        return {
            "files": len(self),
            "clusters": int(np.count_nonzero(grouped & firsts)),
            "exact": exact,
            "near": int(np.count_nonzero(grouped & ~firsts)) - exact,
        }

    def close(self) -> None:
        """Drop the scratch file (the members can no longer be read)."""
        self._table.close()
