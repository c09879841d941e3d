"""Agreement between two sets of binary decisions: Cohen's kappa with a bootstrap interval.

Used by ``vhd align`` (annotator against human ratings) and ``vhd compare`` (run-to-run
agreement). The point value equals scikit-learn's ``cohen_kappa_score``; the interval resamples
samples with replacement like every interval in `vhd.bench.metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vhd.bench.metrics import BOOTSTRAP, Value, numpy


def _kappa_counts(a: Any, b: Any) -> Any:
    """Kappa along the last axis of 0/1 arrays (NaN where undefined: both raters constant and equal)."""
    np = numpy()
    n = a.shape[-1]
    observed = (a == b).sum(axis=-1) / n
    pa, pb = a.sum(axis=-1) / n, b.sum(axis=-1) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(expected < 1, (observed - expected) / np.where(expected < 1, 1 - expected, 1), np.nan)


def cohen_kappa(a: Sequence[bool | int], b: Sequence[bool | int]) -> float | None:
    """Cohen's kappa of two raters' binary decisions on the same samples.

    Args:
        a: First rater's decisions (truthy: harmful).
        b: Second rater's decisions, same order and length.

    Returns:
        Kappa in [-1, 1]; None for no samples. When both raters give one and the same answer
        everywhere, chance agreement is 1 and kappa is undefined: None (scikit-learn gives NaN).

    Raises:
        ValueError: The sequences differ in length.
    """
    if len(a) != len(b):
        raise ValueError("both raters need a decision for the same samples")
    if not a:
        return None
    np = numpy()
    k = float(_kappa_counts(np.asarray(a, dtype=float).astype(bool), np.asarray(b, dtype=float).astype(bool)))
    return None if k != k else k


def kappa_value(
    a: Sequence[bool | int], b: Sequence[bool | int], *, resamples: int = BOOTSTRAP, seed: int = 0
) -> Value:
    """Cohen's kappa with its 95% bootstrap interval (percentile method, fixed seed).

    Args:
        a: First rater's decisions.
        b: Second rater's decisions.
        resamples: Bootstrap resamples (0: no interval).
        seed: Bootstrap seed.

    Returns:
        A `vhd.bench.metrics.Value`; resamples where kappa is undefined are skipped.
    """
    point = cohen_kappa(a, b)
    n = len(a)
    if n == 0 or resamples <= 0:
        return Value(point, None, None, n)
    np = numpy()
    x, y = np.asarray(a, dtype=float).astype(bool), np.asarray(b, dtype=float).astype(bool)
    idx = np.random.default_rng(seed).integers(0, n, (resamples, n))
    boot = _kappa_counts(x[idx], y[idx])
    boot = boot[~np.isnan(boot)]
    if not boot.size:
        return Value(point, None, None, n)
    return Value(point, float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)), n)
