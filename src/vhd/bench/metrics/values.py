"""Metric primitives every metric shares: a value with its bootstrap interval, resampling, curves, printing.

`vhd.bench.metrics.binary.BinaryMetrics` and `vhd.bench.metrics.multiclass.MulticlassMetrics`
follow one pattern: `update()` with a batch, `compute()` to a result object with `to_rows()` and
`to_pandas()` (when pandas is installed); `vhd.bench.plots` draws one (``binary_figure``,
``multiclass_figure``). Every number has a 95% bootstrap confidence interval (percentile method, resampling samples
with replacement, a fixed seed) and the number of samples it stands on. The point values equal
scikit-learn's (``recall_score``, ``precision_score``, ``f1_score``, ``balanced_accuracy_score``,
``roc_auc_score``, ``average_precision_score``), except that an undefined value (precision
without a positive prediction, a rate without a sample of its class) is None rather than 0;
numpy (1.24 or later) is the only requirement.

One rule for samples without an answer (a detector that failed, a reply that could not be
read), shared by ``vhd bench`` and ``vhd compare``: they stay in every decision metric and count
as wrong (`counted_wrong`), and ``coverage`` (answered / total) says how many there were.
Score metrics (ROC-AUC, PR-AUC) stand on the answered samples, when every one of them has a
score. With several runs of the same samples (``vhd compare --repeats``) the counts of every run
are pooled, and the bootstrap resamples samples, each with all its runs: the unit is the sample,
so repeating identical answers never narrows an interval.

How an undefined number prints (`fmt`, `UNDEFINED`) is here too, so every report of ``bench``,
``compare``, ``icl`` and ``align`` prints one the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vhd.errors import MissingDependencyError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

BOOTSTRAP = 1000
"""Bootstrap resamples per confidence interval."""

BLOCK_CELLS = 1 << 20
"""Resampled indices drawn at once (8 MiB of int64): the bootstrap's memory stays flat in the sample count."""

BINARY_METRICS = ("harmful_acc", "unharmful_acc", "average", "precision", "f1", "balanced_acc", "accuracy")
"""Metrics from the decisions alone (harmful accuracy is the TPR, unharmful accuracy the TNR)."""

COVERAGE = "coverage"
"""The share of samples with an answer (answered / total); the others count as wrong."""

SCORE_METRICS = ("roc_auc", "pr_auc")
"""Metrics from scores, where the detector gives them (PR-AUC is average precision)."""


def numpy() -> Any:
    """Import numpy, or fail with the install line."""
    try:
        import numpy as np
    except ImportError:
        raise MissingDependencyError("numpy", "bench") from None
    return np


@dataclass(frozen=True)
class Value:
    """One metric: the point value, its 95% bootstrap interval and its sample count.

    Attributes:
        value: The metric on all samples (None when undefined, e.g. no positive sample).
        low: 2.5th percentile of the bootstrap distribution.
        high: 97.5th percentile.
        n: Samples the number stands on (for TPR: the harmful ones).
    """

    value: float | None
    low: float | None
    high: float | None
    n: int

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}


UNDEFINED = "\u2014"
"""How an undefined number is printed (an em dash); CSV files write `UNDEFINED_CSV`."""

UNDEFINED_CSV = "n/a"
"""How an undefined number is written in a CSV cell."""


def fmt(value: float | None, digits: int = 3, *, scale: float = 1.0, missing: str = UNDEFINED) -> str:
    """A number for people: ``digits`` decimals, ``missing`` when undefined (None or NaN), never ``-0.000``.

    Args:
        value: The number (None or NaN: undefined).
        digits: Decimals shown.
        scale: Multiplier applied first (100 for percent).
        missing: What an undefined value prints as.
    """
    if value is None or value != value:
        return missing
    text = f"{value * scale:.{digits}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def pandas_module() -> Any:
    """pandas, or a one-line error naming how to install it."""
    import importlib

    try:
        return importlib.import_module("pandas")
    except ImportError:
        raise MissingDependencyError("pandas", "pandas") from None


def safe_div(a: Any, b: Any) -> Any:
    """``a / b`` elementwise, NaN where ``b`` is 0."""
    np = numpy()
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1), np.nan)


def binary_from_counts(tp: Any, fp: Any, tn: Any, fn: Any) -> dict[str, Any]:
    """Every decision metric from confusion counts (arrays allowed; NaN where undefined).

    Precision is NaN without a positive prediction (scikit-learn's ``zero_division`` gives 0
    there, which reads as "every alarm was false" when there was none); TPR/TNR are NaN without
    a harmful/unharmful sample, and so is F1 without a harmful sample. F1 is
    ``2TP / (2TP + FP + FN)``: 0 when harmful samples exist and none was caught.
    """
    np = numpy()
    tp, fp, tn, fn = (np.asarray(x, dtype=float) for x in (tp, fp, tn, fn))
    tpr, tnr = safe_div(tp, tp + fn), safe_div(tn, tn + fp)
    precision = safe_div(tp, tp + fp)
    f1 = np.where(tp + fn > 0, safe_div(2 * tp, 2 * tp + fp + fn), np.nan)
    return {
        "harmful_acc": tpr,
        "unharmful_acc": tnr,
        "average": (tpr + tnr) / 2,
        "precision": precision,
        "f1": f1,
        "balanced_acc": (tpr + tnr) / 2,
        "accuracy": safe_div(tp + tn, tp + fp + tn + fn),
    }


def trapezoid(y: Any, x: Any) -> float:
    """Area under the piecewise-linear curve through (x, y) (``np.trapezoid``, which numpy 1.x lacks)."""
    np = numpy()
    y, x = np.asarray(y, dtype=float), np.asarray(x, dtype=float)
    if y.size < 2:
        return 0.0
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2))


def counted_wrong(truth: Sequence[bool | int], decisions: Sequence[bool | int | None]) -> list[bool]:
    """Decisions with every missing one (None: failed or unreadable) replaced by the wrong answer."""
    if len(truth) != len(decisions):
        raise ValueError("truth and decisions must have the same length")
    return [bool(d) if d is not None else not t for t, d in zip(truth, decisions, strict=True)]


def clean(x: Any) -> float | None:
    """A float, None for NaN."""
    f = float(x)
    return None if f != f else f


def roc_curve(y: Any, score: Any) -> tuple[Array, Array, Array]:
    """(false-positive rates, true-positive rates, thresholds), one point per distinct score, from (0, 0)."""
    np = numpy()
    y, s = np.asarray(y, dtype=float), np.asarray(score, dtype=float)
    order = np.argsort(-s, kind="mergesort")
    y, s = y[order], s[order]
    last = np.r_[np.nonzero(np.diff(s))[0], y.size - 1]
    tps, fps = np.cumsum(y)[last], (last + 1) - np.cumsum(y)[last]
    pos, neg = tps[-1] if tps.size else 0, fps[-1] if fps.size else 0
    fpr = np.r_[0.0, safe_div(fps, neg)]
    tpr = np.r_[0.0, safe_div(tps, pos)]
    return fpr, tpr, np.r_[np.inf, s[last]]


def roc_auc(y: Any, score: Any) -> float | None:
    """Area under the ROC curve (ties count one half); None without both classes."""
    np = numpy()
    y = np.asarray(y, dtype=float)
    if y.size == 0 or y.min() == y.max():
        return None
    fpr, tpr, _ = roc_curve(y, score)
    return trapezoid(tpr, fpr)


def pr_curve(y: Any, score: Any) -> tuple[Array, Array]:
    """(precision, recall) at each distinct score threshold, from the highest score down."""
    np = numpy()
    y, s = np.asarray(y, dtype=float), np.asarray(score, dtype=float)
    order = np.argsort(-s, kind="mergesort")
    y, s = y[order], s[order]
    last = np.r_[np.nonzero(np.diff(s))[0], y.size - 1]
    tps = np.cumsum(y)[last]
    precision = tps / (last + 1)
    recall = safe_div(tps, tps[-1]) if tps.size else tps
    return precision, recall


def average_precision(y: Any, score: Any) -> float | None:
    """Average precision (PR-AUC as scikit-learn computes it); None without a harmful sample."""
    np = numpy()
    y = np.asarray(y, dtype=float)
    if y.size == 0 or y.max() == 0:
        return None
    precision, recall = pr_curve(y, score)
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def percentile_interval(values: Any) -> tuple[float | None, float | None]:
    """The 2.5th and 97.5th percentiles of bootstrap values (NaN skipped); (None, None) when none is left."""
    np = numpy()
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    if not arr.size:
        return None, None
    return float(np.percentile(arr, 2.5)), float(np.percentile(arr, 97.5))


def bootstrap(
    n: int, statistic: Callable[[Any], Any], *, resamples: int = BOOTSTRAP, seed: int = 0
) -> tuple[float | None, float | None]:
    """95% percentile interval of ``statistic(indices)`` over resampled index sets (NaN/None skipped)."""
    np = numpy()
    if n == 0 or resamples <= 0:
        return None, None
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        v = statistic(rng.integers(0, n, n))
        values.append(np.nan if v is None else float(v))
    return percentile_interval(values)


def resample_blocks(n: int, resamples: int, seed: int) -> Iterator[Any]:
    """The bootstrap's index sets, ``(rows, n)`` arrays of at most about `BLOCK_CELLS` cells each.

    The blocks stacked are exactly ``default_rng(seed).integers(0, n, (resamples, n))`` (numpy
    draws them in the same order), so statistics taken row by row are the same as from one
    array, while memory stays at one block whatever ``n``.
    """
    np = numpy()
    rng = np.random.default_rng(seed)
    rows = max(1, BLOCK_CELLS // max(1, n))
    for start in range(0, resamples, rows):
        yield rng.integers(0, n, (min(rows, resamples - start), n))


def mean_value(hits: Any, resamples: int = BOOTSTRAP, seed: int = 0) -> Value:
    """The mean of 0/1 outcomes with its bootstrap interval (vectorised, in blocks of resamples)."""
    np = numpy()
    arr = np.asarray(hits, dtype=float)
    if not arr.size:
        return Value(None, None, None, 0)
    if resamples <= 0:
        return Value(float(arr.mean()), None, None, int(arr.size))
    boot = np.concatenate([arr[idx].mean(axis=1) for idx in resample_blocks(arr.size, resamples, seed)])
    return Value(float(arr.mean()), float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)), int(arr.size))
