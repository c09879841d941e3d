"""Group fingerprints into duplicate clusters and choose the file each cluster keeps.

Two files of the same kind are linked when their decoded pixels are identical (``exact``) or
their perceptual hashes are within the threshold (``near``; for videos, every sampled frame
within the threshold of the frame at the same position, and the same number of frames). A
cluster is a connected group of links, so no near duplicate is ever separated from its cluster
(which is what keeps a train/test split free of leaks).

Keep policies, each breaking ties by input order:

- ``first``: the file that came first in the input (or was registered first in the store);
- ``largest``: the most pixels, then the most bytes;
- ``quality``: the most pixels weighted by encoding fidelity (pixels x fidelity / 100: a JPEG
  saved at quality 50 counts half its pixels), then the most pixels, then the most bytes.

Linking works on compact arrays (`vhd.curate.fptable.FingerprintTable`), not on Python objects:
exact duplicates are runs of equal 64-bit pixel-hash prefixes after a sort, confirmed on the full
hashes read back from the scratch file; near duplicates are the pairs `pairs_within` finds
among the distinct pHashes of each group (kind and frame count), a video's pairs then checked on
every frame; a union-find in numpy joins them. The result, `ClusterView`, is a sequence of
`Member` read back from the scratch file in batches, so a million files cost about 20 bytes
each once linked (the row order, cluster roots, distances and exact flags).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from vhd.curate.fingerprint import Fingerprint
from vhd.curate.fptable import FingerprintTable
from vhd.curate.hashindex import pairs_within, popcount64
from vhd.curate.members import ClusterView, Member
from vhd.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

POLICIES = ("largest", "first", "quality")
"""Keep policies: which file of a cluster is kept."""

DEFAULT_THRESHOLD = 10
"""Largest pHash Hamming distance (of 64 bits) for a near duplicate."""


NO_DISTANCE = 65
"""Distance reported between files that cannot be compared (different frame counts, no frames)."""

_CONFIRM_BATCH = 2048
"""Rows whose full pixel hashes are read back per query when confirming exact duplicates."""


def check_settings(threshold: int, keep: str) -> None:
    """Refuse an unknown keep policy or a threshold outside 0-64.

    Raises:
        ConfigError: Either one.
    """
    if keep not in POLICIES:
        raise ConfigError(f"unknown keep policy {keep!r}: choose one of {', '.join(POLICIES)}")
    if not 0 <= threshold <= 64:
        raise ConfigError(f"the distance threshold must be between 0 and 64 bits, got {threshold}")


def _roots(parent: NDArray[np.intp], items: NDArray[np.intp]) -> NDArray[np.intp]:
    import numpy as np

    found = parent[items]
    while True:
        up = parent[found]
        if np.array_equal(up, found):
            return found
        found = up


def union(parent: NDArray[np.intp], a: NDArray[np.intp], b: NDArray[np.intp]) -> None:
    """Join the sets of ``a[k]`` and ``b[k]`` for every k, in place (a root is its set's smallest item).

    Every root points to a smaller item, so the sets do not depend on the order of the pairs.
    """
    import numpy as np

    while len(a):
        ra, rb = _roots(parent, a), _roots(parent, b)
        parent[a], parent[b] = ra, rb
        apart = ra != rb
        a, b = ra[apart], rb[apart]
        parent[np.maximum(a, b)] = np.minimum(a, b)  # of several writes to one root one wins; the rest go round again


def _distances(
    table: FingerprintTable, cols: _Columns, rows: NDArray[np.intp], kept: NDArray[np.intp]
) -> NDArray[np.uint8]:
    """The pHash distance of each row to its kept row: the largest over frames, `NO_DISTANCE` when not comparable."""
    import numpy as np

    counts = np.array([count for _, count in table.groups], dtype=np.int64)
    cr, ck = counts[cols.group[rows]], counts[cols.group[kept]]
    out = np.full(len(rows), NO_DISTANCE, dtype=np.uint8)
    one = (cr == ck) & (cr == 1)
    out[one] = popcount64(cols.probe[rows[one]] ^ cols.probe[kept[one]])
    for count in sorted({int(c) for c in cr[(cr == ck) & (cr > 1)]}):
        sel = np.flatnonzero((cr == ck) & (cr == count))
        a, b = cols.frames_of(rows[sel], count), cols.frames_of(kept[sel], count)
        out[sel] = popcount64((a ^ b).ravel()).reshape(-1, count).max(axis=1)
    return out


class _Columns:
    """The table's arrays as numpy views, rows in key order."""

    def __init__(self, table: FingerprintTable) -> None:
        import numpy as np

        self.table = table
        keys = np.frombuffer(table.keys, dtype=np.int64) if len(table) else np.zeros(0, dtype=np.int64)
        self.sort = None if not len(keys) or bool(np.all(keys[1:] > keys[:-1])) else np.argsort(keys, kind="stable")
        self.keys = self.col(table.keys, np.int64)
        if len(self.keys) > 1 and bool(np.any(self.keys[1:] == self.keys[:-1])):
            raise ConfigError("two fingerprints were added under the same key")
        self.probe = self.col(table.probe, np.uint64)
        self.group = self.col(table.group, np.uint32)
        self._frames: dict[int, tuple[NDArray[np.int64], NDArray[np.uint64]]] = {}

    def col(self, values: array[int], dtype: type[Any]) -> NDArray[Any]:
        import numpy as np

        data = np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)
        return data if self.sort is None else data[self.sort]

    def group_frames(self, group: int) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
        """Keys (sorted) and pHash rows of a group with two frames or more."""
        import numpy as np

        if group not in self._frames:
            keys, hashes = self.table.frames[group]
            k = np.frombuffer(keys, dtype=np.int64)
            frames = np.frombuffer(hashes, dtype=np.uint64).reshape(len(k), -1)
            by = np.argsort(k, kind="stable")
            self._frames[group] = (k[by], frames[by])
        return self._frames[group]

    def frames_of(self, rows: NDArray[np.intp], count: int) -> NDArray[np.uint64]:
        """The pHashes (one row each) of rows whose groups have ``count`` frames."""
        import numpy as np

        out = np.zeros((len(rows), count), dtype=np.uint64)
        groups = self.group[rows]
        for group in np.unique(groups):
            sel = np.flatnonzero(groups == group)
            keys, frames = self.group_frames(int(group))
            out[sel] = frames[np.searchsorted(keys, self.keys[rows[sel]])]
        return out


def _link_exact(cols: _Columns, parent: NDArray[np.intp], exact_rep: NDArray[np.int32]) -> None:
    """Join files of one kind with the same pixels: equal prefixes after a sort, confirmed on the full hash."""
    import numpy as np

    table = cols.table
    kinds = sorted({kind for kind, _ in table.groups})
    kind_of = np.array([kinds.index(kind) for kind, _ in table.groups] or [0], dtype=np.uint8)[cols.group]
    prefix = cols.col(table.pixel_prefix, np.uint64)
    by = np.lexsort((prefix, kind_of))
    same = (kind_of[by][1:] == kind_of[by][:-1]) & (prefix[by][1:] == prefix[by][:-1])
    del prefix, kind_of
    starts = np.flatnonzero(same & ~np.concatenate(([False], same[:-1])))
    if not len(starts):
        return
    ends = np.flatnonzero(same & ~np.concatenate((same[1:], [False]))) + 2  # one past each run
    batch: list[tuple[int, int]] = []
    size = 0
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        batch.append((start, end))
        size += end - start
        if size >= _CONFIRM_BATCH:
            _confirm(cols, by, batch, parent, exact_rep)
            batch, size = [], 0
    _confirm(cols, by, batch, parent, exact_rep)


def _confirm(
    cols: _Columns,
    by: NDArray[np.intp],
    runs: list[tuple[int, int]],
    parent: NDArray[np.intp],
    exact_rep: NDArray[np.int32],
) -> None:
    import numpy as np

    if not runs:
        return
    rows = [int(r) for start, end in runs for r in by[start:end]]
    pixels = cols.table.pixels(int(cols.keys[r]) for r in rows)
    a: list[int] = []
    b: list[int] = []
    for start, end in runs:
        first: dict[str, int] = {}
        for row in by[start:end].tolist():  # rows ascending within a run (the sort is stable)
            rep = first.setdefault(pixels[int(cols.keys[row])], row)
            if rep != row:
                a.append(row)
                b.append(rep)
    if a:
        rows_a, rows_b = np.array(a, dtype=np.intp), np.array(b, dtype=np.intp)
        exact_rep[rows_a] = rows_b
        union(parent, rows_a, rows_b)


def _link_near(
    parent: NDArray[np.intp], rows: NDArray[np.intp], frames: NDArray[np.uint64], threshold: int, probe_at: int
) -> None:
    """Join rows whose pHashes (one row of ``frames`` each) are within the threshold on every frame."""
    import numpy as np

    width = frames.shape[1]
    by = np.lexsort(frames.T[::-1]) if width > 1 else np.argsort(frames[:, 0], kind="stable")
    ordered = frames[by]
    new = np.concatenate(([True], np.any(ordered[1:] != ordered[:-1], axis=1)))
    distinct = ordered[new]
    del ordered
    rep = rows[by[new]]  # the smallest row of each distinct hash (both sorts are stable)
    copies = np.flatnonzero(~new)
    union(parent, rows[by[copies]], rep[np.cumsum(new)[copies] - 1])  # identical hashes: distance 0
    del by, new, copies
    probes = np.ascontiguousarray(distinct[:, probe_at])
    for i, j in pairs_within(probes, threshold):
        if width > 1:
            within = popcount64((distinct[i] ^ distinct[j]).ravel()).reshape(-1, width).max(axis=1) <= threshold
            i, j = i[within], j[within]
        union(parent, rep[i], rep[j])


def link(
    table: FingerprintTable,
    *,
    threshold: int = DEFAULT_THRESHOLD,
    keep: str = "largest",
    on_done: Callable[[int], None] | None = None,
) -> ClusterView:
    """Cluster the fingerprints of a table and choose each cluster's kept file.

    The table's arrays are freed afterwards; its scratch file stays for reading members back
    (close the result to drop it).

    Args:
        table: The fingerprints (rows in key order are the input order).
        threshold: Largest pHash distance of a near duplicate.
        keep: ``largest``, ``first`` or ``quality``.
        on_done: Called with the number of files linked so far, now and then.

    Returns:
        The members, grouped by cluster (clusters in order of their first file, the kept file
        first in each).

    Raises:
        ConfigError: Unknown policy, a threshold outside 0-64, or two fingerprints with one key.
    """
    import numpy as np

    check_settings(threshold, keep)
    cols = _Columns(table)
    n = len(cols.keys)
    parent = np.arange(n, dtype=np.intp)
    exact_rep = np.arange(n, dtype=np.int32)
    _link_exact(cols, parent, exact_rep)
    done = 0
    for group, (kind, count) in enumerate(table.groups):
        rows = np.flatnonzero(cols.group == group)
        if count and len(rows) > 1:
            if count > 1 and kind != "image":  # a video: every frame within the threshold
                frames = cols.group_frames(group)[1]
                _link_near(parent, rows, frames, threshold, count // 2)
            else:  # an image: its one pHash (the middle one, should an image have several)
                _link_near(parent, rows, cols.probe[rows][:, None], threshold, 0)
        done += len(rows)
        if on_done is not None:
            on_done(done)
    while True:  # every item straight to its root
        up = parent[parent]
        if np.array_equal(up, parent):
            break
        parent = up
    root = parent
    sizes = np.bincount(root, minlength=n)[root] if n else np.zeros(0, dtype=np.intp)
    in_cluster = np.flatnonzero(sizes > 1)
    kept = np.ones(n, dtype=bool)
    kept[in_cluster] = False
    kept_rows = _kept_rows(cols, root, in_cluster, keep)
    kept[kept_rows] = True
    out = np.argsort(root.astype(np.int64) * 2 + ~kept, kind="stable")  # by cluster, kept first, then input order
    members = np.flatnonzero(~kept[out] & (sizes[out] > 1))
    distance = np.zeros(n, dtype=np.uint8)
    exact = np.zeros(n, dtype=bool)
    if len(members):
        kept_rows = kept_rows[np.argsort(root[kept_rows])]
        rows_m = out[members]
        kept_m = kept_rows[np.searchsorted(root[kept_rows], root[rows_m])]
        exact[members] = exact_rep[rows_m] == exact_rep[kept_m]
        distance[members] = _distances(table, cols, rows_m, kept_m)
    view = ClusterView(table, cols.keys, out.astype(np.int32), root[out].astype(np.int32), distance, exact)
    table.drop_arrays()
    return view


def _kept_rows(cols: _Columns, root: NDArray[np.intp], rows: NDArray[np.intp], keep: str) -> NDArray[np.intp]:
    """The kept row of each cluster of two files or more, by the keep policy (ties: the earliest)."""
    import numpy as np

    if not len(rows):
        return rows
    if keep == "first":
        return np.unique(root[rows])
    table = cols.table
    roots = root[rows]
    area = cols.col(table.area, np.int64)[rows]
    size = cols.col(table.size, np.int64)[rows]
    keys = [rows, -size, -area]
    if keep == "quality":
        keys.append(-(area * cols.col(table.fidelity, np.uint8)[rows].astype(np.int64) // 100))
    by = np.lexsort((*keys, roots))
    first = np.concatenate(([True], roots[by][1:] != roots[by][:-1]))
    return np.asarray(rows[by[first]], dtype=np.intp)


def cluster(
    fps: Sequence[Fingerprint],
    *,
    threshold: int = DEFAULT_THRESHOLD,
    keep: str = "largest",
    on_done: Callable[[int], None] | None = None,
) -> list[Member]:
    """Cluster fingerprints (those without an error) and choose each cluster's kept file.

    Args:
        fps: Fingerprints in input order; any with ``error`` set are ignored.
        threshold: Largest pHash distance of a near duplicate (0 finds exact duplicates
            and pHash collisions only).
        keep: ``largest``, ``first`` or ``quality`` (ties go to the earliest fingerprint).
        on_done: Called with the number of files linked so far, now and then.

    Returns:
        One member per usable fingerprint, grouped by cluster (clusters in order of their
        first file, the kept file first in each).

    Raises:
        ConfigError: Unknown policy or a threshold outside 0-64.
    """
    check_settings(threshold, keep)
    table = FingerprintTable()
    try:
        for position, fp in enumerate(fps):
            table.add(fp, key=position)
        return list(link(table, threshold=threshold, keep=keep, on_done=on_done))
    finally:
        table.close()
