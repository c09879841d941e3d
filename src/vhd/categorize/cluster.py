"""Cluster free-text harm reasons without a preset number of clusters.

Reasons are embedded inside a short sentence (`REASON_TEMPLATE`: bare two-word reasons embed
poorly), the vectors are centred on their mean (so distances measure what sets reasons apart,
not what all harm reasons share) and grouped by agglomerative clustering with a cosine-distance
threshold (default) or by HDBSCAN; both find the number of groups themselves. Groups whose reasons occur
fewer than ``min_size`` times in all are left out as noise. Each cluster lists its most typical
reasons: those closest to its frequency-weighted centroid. Clustering algorithms are registered
by name in `CLUSTERERS` (third-party packages add more through the ``vhd.clusterers``
entry-point group).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from vhd.errors import ConfigError, MissingDependencyError
from vhd.registry import Registry


class Clusterer(Protocol):
    """A clustering algorithm: a precomputed cosine-distance matrix in, one label per row out (-1: noise)."""

    def __call__(self, distances: Any, *, distance_threshold: float, min_size: int) -> Any:
        """Cluster the rows of the square ``distances`` matrix (at least two rows)."""


CLUSTERERS: Registry[Clusterer] = Registry("clusterer", "vhd.clusterers")
"""Clustering methods `cluster_reasons` accepts: built-ins below, plugins from ``vhd.clusterers``."""

CLUSTERERS.add(
    "agglomerative",
    "vhd.categorize.cluster:agglomerative",
    extra="embed",
    needs={"sklearn": "scikit-learn"},
    summary="average linkage cut at --distance-threshold",
)
CLUSTERERS.add(
    "hdbscan",
    "vhd.categorize.cluster:hdbscan",
    extra="embed",
    needs={"sklearn": "scikit-learn"},
    summary="HDBSCAN with --min-cluster-size",
)

DEFAULT_DISTANCE = 0.95
"""Centred cosine distance below which agglomerative clustering (average linkage) merges groups.

1.0 means "no more alike than two reasons picked at random"; lower gives more, tighter groups."""

REASON_TEMPLATE = "The image is harmful because it shows {}."
"""Sentence each reason is embedded in."""

MAX_CLUSTERED = 5000
"""At most this many distinct reasons (the most frequent) are clustered; the rest join the nearest cluster."""


@dataclass
class Cluster:
    """A group of similar reasons.

    Attributes:
        reasons: Distinct reasons in the group, most typical first.
        counts: How often each of them was given (same order).
        typical: The most typical reasons (the first few of ``reasons``).
        name: A short name (set by naming).
        definition: What the group covers (set by naming).
    """

    reasons: list[str]
    counts: list[int]
    typical: list[str] = field(default_factory=list)
    name: str = ""
    definition: str = ""

    @property
    def size(self) -> int:
        """How many annotations gave a reason in this group."""
        return sum(self.counts)


def _sklearn() -> Any:
    try:
        import sklearn.cluster  # type: ignore[import-untyped]
    except ImportError as exc:
        raise MissingDependencyError("scikit-learn", "embed") from exc
    return sklearn.cluster


def center(vectors: Any) -> Any:
    """Subtract the mean vector and scale rows back to unit length."""
    import numpy as np

    if len(vectors) < 2:
        return vectors
    out = vectors - vectors.mean(axis=0, keepdims=True)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


def cluster_labels(
    vectors: Any,
    *,
    clusterer: str = "agglomerative",
    distance_threshold: float = DEFAULT_DISTANCE,
    min_size: int = 2,
) -> Any:
    """Cluster unit vectors; returns one integer label per row (-1 for HDBSCAN noise).

    Raises:
        ConfigError: Unknown clusterer or a threshold outside (0, 2).
        MissingDependencyError: The clusterer's library (scikit-learn) is not installed.
    """
    import numpy as np

    run = CLUSTERERS.load(clusterer)
    n = len(vectors)
    if n == 0:
        return np.zeros(0, dtype=int)
    if n == 1:
        return np.zeros(1, dtype=int)
    distances = np.clip(1.0 - vectors @ vectors.T, 0.0, 2.0).astype(np.float64)
    np.fill_diagonal(distances, 0.0)
    return np.asarray(run(distances, distance_threshold=distance_threshold, min_size=min_size))


def agglomerative(distances: Any, *, distance_threshold: float, min_size: int) -> Any:
    """Average-linkage agglomerative clustering cut at ``distance_threshold`` (``min_size`` is applied later).

    Raises:
        ConfigError: A threshold outside (0, 2).
    """
    sk = _sklearn()
    if not 0.0 < distance_threshold < 2.0:
        raise ConfigError(f"distance threshold {distance_threshold} must be between 0 and 2 (cosine distance)")
    model = sk.AgglomerativeClustering(
        n_clusters=None, metric="precomputed", linkage="average", distance_threshold=distance_threshold
    )
    return model.fit_predict(distances)


def hdbscan(distances: Any, *, distance_threshold: float, min_size: int) -> Any:
    """HDBSCAN with clusters of at least ``min_size`` (at least 2) reasons; ``distance_threshold`` is unused."""
    model = _sklearn().HDBSCAN(min_cluster_size=max(2, min_size), metric="precomputed", copy=True)
    return model.fit_predict(distances)


def cluster_reasons(
    reasons: Sequence[str],
    counts: Sequence[int],
    vectors: Any,
    *,
    clusterer: str = "agglomerative",
    distance_threshold: float = DEFAULT_DISTANCE,
    min_size: int = 2,
    typical: int = 8,
) -> tuple[list[Cluster], list[str]]:
    """Group distinct reasons.

    Args:
        reasons: Distinct reasons.
        counts: How often each was given.
        vectors: Their unit-length embeddings (rows in the same order), best made with
            `REASON_TEMPLATE`; they are centred here.
        clusterer: ``agglomerative``, ``hdbscan`` or a plugin's (`CLUSTERERS`).
        distance_threshold: Agglomerative merge threshold (cosine distance).
        min_size: Groups given fewer times than this in all are noise.
        typical: How many typical reasons to keep per cluster.

    Returns:
        ``(clusters, noise)``: clusters largest first, and the reasons left out.
    """
    import numpy as np

    vectors = center(vectors)
    order = sorted(range(len(reasons)), key=lambda i: -counts[i])
    head, tail = order[:MAX_CLUSTERED], order[MAX_CLUSTERED:]
    labels = cluster_labels(
        vectors[head], clusterer=clusterer, distance_threshold=distance_threshold, min_size=min_size
    )
    members: dict[int, list[int]] = {}
    for idx, label in zip(head, labels, strict=True):
        members.setdefault(int(label), []).append(idx)
    noise = [reasons[i] for i in members.pop(-1, [])]
    groups = []
    for idxs in members.values():
        if sum(counts[i] for i in idxs) < min_size:
            noise.extend(reasons[i] for i in idxs)
        else:
            groups.append(idxs)
    if tail and groups:
        centroids = np.stack([_centroid(vectors, counts, g) for g in groups])
        nearest = (vectors[tail] @ centroids.T).argmax(axis=1)
        for idx, g in zip(tail, nearest, strict=True):
            groups[int(g)].append(idx)
    clusters = []
    for idxs in groups:
        sims = vectors[idxs] @ _centroid(vectors, counts, idxs)
        ranked = [idxs[j] for j in sorted(range(len(idxs)), key=lambda j: (-float(sims[j]), -counts[idxs[j]]))]
        texts = [reasons[i] for i in ranked]
        clusters.append(Cluster(texts, [counts[i] for i in ranked], typical=texts[:typical]))
    clusters.sort(key=lambda c: (-c.size, c.reasons[0]))
    return clusters, noise


def _centroid(vectors: Any, counts: Sequence[int], idxs: Sequence[int]) -> Any:
    import numpy as np

    weights = np.asarray([counts[i] for i in idxs], dtype=np.float32)[:, None]
    c = (vectors[list(idxs)] * weights).sum(axis=0)
    norm = float(np.linalg.norm(c))
    return c / norm if norm > 0 else c
