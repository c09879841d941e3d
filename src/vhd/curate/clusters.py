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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vhd.curate.fingerprint import Fingerprint
from vhd.curate.hashindex import HammingIndex
from vhd.errors import ConfigError

POLICIES = ("largest", "first", "quality")
"""Keep policies: which file of a cluster is kept."""

DEFAULT_THRESHOLD = 10
"""Largest pHash Hamming distance (of 64 bits) for a near duplicate."""


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


class _Sets:
    """Union-find over 0..n-1 (path halving, union by size)."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.size = [1] * n

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]


def _distance(a: Fingerprint, b: Fingerprint) -> int:
    if len(a.phashes) != len(b.phashes) or not a.phashes:
        return 65
    return max((x ^ y).bit_count() for x, y in zip(a.phashes, b.phashes, strict=True))


def _link(fps: Sequence[Fingerprint], threshold: int, sets: _Sets, on_done: Callable[[int], None] | None) -> None:
    exact: dict[tuple[str, str], int] = {}
    indexes: dict[str, HammingIndex[int]] = {}
    for i, fp in enumerate(fps):
        key = (fp.kind, fp.pixels)
        if key in exact:
            sets.union(exact[key], i)
        else:
            exact[key] = i
        if not fp.phashes:
            continue
        # Index a video by its middle frame: every frame must match, so that one must too.
        probe = fp.phashes[len(fp.phashes) // 2]
        index = indexes.setdefault(f"{fp.kind}:{len(fp.phashes)}", HammingIndex(threshold))
        for j, _ in index.query(probe):
            if fp.kind == "image" or _distance(fp, fps[j]) <= threshold:
                sets.union(j, i)
        index.add(probe, i)
        if on_done is not None and i % 1024 == 1023:
            on_done(i + 1)


def _keep_key(policy: str) -> Callable[[Fingerprint], tuple[int, ...]]:
    if policy == "first":
        return lambda fp: (-fp.order,)
    if policy == "largest":
        return lambda fp: (fp.area, fp.size, -fp.order)
    return lambda fp: (fp.area * fp.fidelity // 100, fp.area, fp.size, -fp.order)


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
        keep: ``largest``, ``first`` or ``quality``.
        on_done: Called with the number of files linked so far, now and then.

    Returns:
        One member per usable fingerprint, grouped by cluster (clusters in order of their
        first file, the kept file first in each).

    Raises:
        ConfigError: Unknown policy or a threshold outside 0-64.
    """
    if keep not in POLICIES:
        raise ConfigError(f"unknown keep policy {keep!r}: choose one of {', '.join(POLICIES)}")
    if not 0 <= threshold <= 64:
        raise ConfigError(f"the distance threshold must be between 0 and 64 bits, got {threshold}")
    usable = [fp for fp in fps if fp.error is None]
    sets = _Sets(len(usable))
    _link(usable, threshold, sets, on_done)
    groups: dict[int, list[int]] = {}
    for i in range(len(usable)):
        groups.setdefault(sets.find(i), []).append(i)
    key = _keep_key(keep)
    members: list[Member] = []
    for indices in sorted(groups.values(), key=lambda g: g[0]):
        files = [usable[i] for i in indices]
        kept = max(files, key=key)
        ordered = [kept, *(fp for fp in files if fp is not kept)]
        for fp in ordered:
            if fp is kept:
                match, distance = "kept", 0
            else:
                match = "exact" if fp.pixels == kept.pixels else "near"
                distance = _distance(fp, kept)
            members.append(Member(fp, kept.sha256, fp is kept, match, distance, len(files)))
    return members
