"""Agreement between two sets of binary decisions: Cohen's kappa with a bootstrap interval.

Used by ``vhd align`` (annotator against human ratings) and ``vhd compare`` (against people,
pooled over repeats, and run-to-run agreement). The point value equals scikit-learn's
``cohen_kappa_score``; the interval resamples samples with replacement like every interval in
`vhd.bench.metrics` (several runs of a sample are resampled together).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vhd.bench.metrics.values import BOOTSTRAP, Value, numpy


def _kappa_runs(a: Any, runs: Any) -> Any:
    """Kappa along the last axis of 0/1 arrays, ``runs`` (``[run, ..., sample]``) pooled against ``a``.

    NaN where undefined (both raters constant and equal); a value within rounding of 0 is 0 (never -0.000).
    """
    np = numpy()
    n = a.shape[-1]
    observed = sum((a == b).sum(axis=-1) for b in runs) / (n * len(runs))
    pa = a.sum(axis=-1) / n
    pb = sum(b.sum(axis=-1) for b in runs) / (n * len(runs))
    expected = pa * pb + (1 - pa) * (1 - pb)
    with np.errstate(invalid="ignore", divide="ignore"):
        k = np.where(expected < 1, (observed - expected) / np.where(expected < 1, 1 - expected, 1), np.nan)
    return np.where(np.abs(k) < 1e-12, 0.0, k)


def _kappa_counts(a: Any, b: Any) -> Any:
    """Kappa along the last axis of 0/1 arrays (NaN where undefined: both raters constant and equal)."""
    return _kappa_runs(a, [b])


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
    return kappa_runs(a, [b], resamples=resamples, seed=seed)


def kappa_runs(
    a: Sequence[bool | int],
    runs: Sequence[Sequence[bool | int]],
    *,
    resamples: int = BOOTSTRAP,
    seed: int = 0,
) -> Value:
    """Cohen's kappa of one rater (e.g. people) against several runs of another, pooled, with its interval.

    Every (sample, run) pair counts once; the bootstrap resamples samples, each with all its runs
    (the unit is the sample, as in `vhd.bench.metrics.binary_result`), so identical runs give
    the interval of one run.

    Args:
        a: First rater's decisions (one per sample).
        runs: The second rater's decisions, one list per run, samples in the order of ``a``.
        resamples: Bootstrap resamples (0: no interval).
        seed: Bootstrap seed.

    Returns:
        A `vhd.bench.metrics.Value` (None where undefined); ``n`` is the number of samples.

    Raises:
        ValueError: No run, or a run whose length differs from ``a``.
    """
    if not runs or any(len(r) != len(a) for r in runs):
        raise ValueError("both raters need a decision for the same samples")
    n = len(a)
    if n == 0:
        return Value(None, None, None, 0)
    np = numpy()
    x = np.asarray(a, dtype=float).astype(bool)
    ys = [np.asarray(r, dtype=float).astype(bool) for r in runs]
    point = float(_kappa_runs(x, ys))
    value = None if point != point else point
    if resamples <= 0:
        return Value(value, None, None, n)
    idx = np.random.default_rng(seed).integers(0, n, (resamples, n))
    boot = _kappa_runs(x[idx], [y[idx] for y in ys])
    boot = boot[~np.isnan(boot)]
    if not boot.size:
        return Value(value, None, None, n)
    return Value(value, float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)), n)


def _weighted_kappa_rows(a: Any, b: Any, levels: int, weights: Any) -> Any:
    """Weighted kappa of each row of two ``(rows, n)`` integer arrays of levels (NaN where undefined)."""
    np = numpy()
    rows, n = a.shape
    flat = (np.arange(rows)[:, None] * levels * levels + a * levels + b).ravel()
    observed = np.bincount(flat, minlength=rows * levels * levels).reshape(rows, levels, levels).astype(float)
    expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :] / n
    disagreement = (weights * observed).sum(axis=(1, 2))
    chance = (weights * expected).sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        k = np.where(chance > 0, 1 - disagreement / np.where(chance > 0, chance, 1), np.nan)
    return np.where(np.abs(k) < 1e-12, 0.0, k)


def weighted_kappa_value(
    a: Sequence[int],
    b: Sequence[int],
    levels: int,
    *,
    weights: str = "quadratic",
    resamples: int = BOOTSTRAP,
    seed: int = 0,
) -> Value:
    """Weighted Cohen's kappa of two raters' ordinal levels, with its 95% bootstrap interval.

    Levels are integers ``0 .. levels - 1`` in order (e.g. 0 for "not harmful", then the policy's
    severity scale from its lowest level up). A disagreement costs ``(i - j)**2`` (quadratic) or
    ``|i - j|`` (linear), so confusing neighbouring levels costs less than confusing the ends of
    the scale. The point value equals scikit-learn's
    ``cohen_kappa_score(a, b, labels=range(levels), weights=...)``; the interval resamples
    samples with replacement (fixed seed, percentile method) like every interval of
    `vhd.bench.metrics`.

    Args:
        a: First rater's level per sample.
        b: Second rater's level per sample, same order and length.
        levels: How many levels the scale has.
        weights: ``quadratic`` or ``linear``.
        resamples: Bootstrap resamples (0: no interval).
        seed: Bootstrap seed.

    Returns:
        A `vhd.bench.metrics.Value`: None when undefined (no sample, or both raters give one
        and the same level everywhere); resamples where it is undefined are skipped.

    Raises:
        ValueError: The sequences differ in length, a level is outside the scale, or the
            weighting is unknown.
    """
    from vhd.bench.metrics.values import resample_blocks

    if len(a) != len(b):
        raise ValueError("both raters need a level for the same samples")
    if weights not in ("quadratic", "linear"):
        raise ValueError(f"weights must be quadratic or linear, got {weights!r}")
    n = len(a)
    if n == 0:
        return Value(None, None, None, 0)
    np = numpy()
    x, y = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if min(x.min(), y.min()) < 0 or max(x.max(), y.max()) >= levels:
        raise ValueError(f"levels must lie in 0..{levels - 1}")
    grid = np.arange(levels)
    gap = np.abs(grid[:, None] - grid[None, :]).astype(float)
    w = gap**2 if weights == "quadratic" else gap
    point = float(_weighted_kappa_rows(x[None, :], y[None, :], levels, w)[0])
    value = None if point != point else point
    if resamples <= 0:
        return Value(value, None, None, n)
    boot = np.concatenate(
        [_weighted_kappa_rows(x[idx], y[idx], levels, w) for idx in resample_blocks(n, resamples, seed)]
    )
    boot = boot[~np.isnan(boot)]
    if not boot.size:
        return Value(value, None, None, n)
    return Value(value, float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)), n)
