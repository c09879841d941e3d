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
