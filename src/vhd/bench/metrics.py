"""Binary and multi-class metrics with bootstrap confidence intervals.

`BinaryMetrics` and `MulticlassMetrics` follow one pattern: `update()` with a batch, `compute()`
to a result object with `to_rows()` and `to_pandas()` (when pandas is installed); `vhd.bench.plots`
draws one (``binary_figure``, ``multiclass_figure``).
Every number has a 95% bootstrap confidence interval (percentile method, resampling samples
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

The module is long (over 450 lines) on purpose: the results, their bootstrap, the missing-answer
rule and how an undefined number prints are one unit that ``bench`` and ``align`` share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
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


def _pandas() -> Any:
    import importlib

    try:
        return importlib.import_module("pandas")
    except ImportError:
        raise MissingDependencyError("pandas", "pandas") from None


def _div(a: Any, b: Any) -> Any:
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
    tpr, tnr = _div(tp, tp + fn), _div(tn, tn + fp)
    precision = _div(tp, tp + fp)
    f1 = np.where(tp + fn > 0, _div(2 * tp, 2 * tp + fp + fn), np.nan)
    return {
        "harmful_acc": tpr,
        "unharmful_acc": tnr,
        "average": (tpr + tnr) / 2,
        "precision": precision,
        "f1": f1,
        "balanced_acc": (tpr + tnr) / 2,
        "accuracy": _div(tp + tn, tp + fp + tn + fn),
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


def _clean(x: Any) -> float | None:
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
    fpr = np.r_[0.0, _div(fps, neg)]
    tpr = np.r_[0.0, _div(tps, pos)]
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
    recall = _div(tps, tps[-1]) if tps.size else tps
    return precision, recall


def average_precision(y: Any, score: Any) -> float | None:
    """Average precision (PR-AUC as scikit-learn computes it); None without a harmful sample."""
    np = numpy()
    y = np.asarray(y, dtype=float)
    if y.size == 0 or y.max() == 0:
        return None
    precision, recall = pr_curve(y, score)
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


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
    arr = np.asarray(values)
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return None, None
    return float(np.percentile(arr, 2.5)), float(np.percentile(arr, 97.5))


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


def _counts(y: Array, runs: Array, idx: Array) -> tuple[Array, Array, Array, Array]:
    """Confusion counts pooled over runs (``runs``: [run, sample] 0/1 decisions) for index sets ``idx``."""
    np = numpy()
    yb = y[idx]
    tp = fp = tn = fn = np.zeros(idx.shape[:-1])
    for p in runs:
        pb = p[idx]
        tp = tp + np.sum(yb * pb, axis=-1)
        fp = fp + np.sum((1 - yb) * pb, axis=-1)
        fn = fn + np.sum(yb * (1 - pb), axis=-1)
        tn = tn + np.sum((1 - yb) * (1 - pb), axis=-1)
    return tp, fp, tn, fn


@dataclass
class BinaryResult:
    """Binary metrics of one detector (or configuration) on one group of samples.

    Attributes:
        values: Metric name -> `Value` (see `BINARY_METRICS`, `COVERAGE`, `SCORE_METRICS`); every
            decision metric counts a sample without an answer as wrong.
        n: Samples in the group (answered or not); n_harmful and n_unharmful among them.
        confusion: ``[[TN, FP], [FN, TP]]`` of the answers given (rows: truth unharmful/harmful;
            samples without an answer are not in it), summed over runs.
        curves: ``roc`` (fpr, tpr) and ``pr`` (precision, recall) as lists, where scores exist.
        n_answered: Answers given, over every run.
        runs: Runs of the samples pooled (1 but for ``vhd compare --repeats``).
    """

    values: dict[str, Value]
    n: int
    n_harmful: int
    n_unharmful: int
    confusion: list[list[int]]
    curves: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    n_answered: int = -1
    runs: int = 1

    def __post_init__(self) -> None:
        if self.n_answered < 0:
            self.n_answered = self.n * self.runs

    @property
    def total(self) -> int:
        """Answers asked for: samples x runs."""
        return self.n * self.runs

    @property
    def n_failed(self) -> int:
        """Answers missing (failed or unreadable), over every run."""
        return self.total - self.n_answered

    def coverage_text(self) -> str:
        """``answered/total``, e.g. ``20/22``."""
        return f"{self.n_answered}/{self.total}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (curves included)."""
        return {
            "n": self.n,
            "n_harmful": self.n_harmful,
            "n_unharmful": self.n_unharmful,
            "runs": self.runs,
            "answered": self.n_answered,
            "total": self.total,
            "confusion": self.confusion,
            "metrics": {k: v.to_dict() for k, v in self.values.items()},
            "curves": {k: [list(a), list(b)] for k, (a, b) in self.curves.items()},
        }

    def to_rows(self) -> list[dict[str, Any]]:
        """One row per metric: metric, value, low, high, n."""
        return [{"metric": k, **v.to_dict()} for k, v in self.values.items()]

    def to_pandas(self) -> Any:
        """`to_rows` as a pandas DataFrame (needs pandas)."""
        return _pandas().DataFrame(self.to_rows())


def _interval(arr: Any) -> tuple[float | None, float | None]:
    np = numpy()
    arr = np.asarray(arr, dtype=float)
    arr = arr[~np.isnan(arr)]
    if not arr.size:
        return None, None
    return float(np.percentile(arr, 2.5)), float(np.percentile(arr, 97.5))


def binary_result(
    y_true: Sequence[bool | int],
    runs: Sequence[Sequence[bool | int | None]],
    scores: Sequence[float | None] | None = None,
    *,
    resamples: int = BOOTSTRAP,
    seed: int = 0,
) -> BinaryResult:
    """The binary metrics of one or more runs over the same samples, with bootstrap intervals.

    Args:
        y_true: Each sample's truth (truthy: harmful).
        runs: One list of decisions per run, samples in the order of ``y_true``; None where a
            run has no answer (counted wrong).
        scores: P(harmful) per sample (one run only), None where there is none.
        resamples: Bootstrap resamples (0: no intervals).
        seed: Bootstrap seed.

    Returns:
        A `BinaryResult`: counts pooled over runs; each bootstrap resample draws samples with
        replacement and takes every run of a drawn sample, so the interval is the same for one
        run as for several identical ones.
    """
    np = numpy()
    if not runs:
        raise ValueError("binary_result needs at least one run")
    y = np.asarray([int(bool(v)) for v in y_true], dtype=float)
    n = int(y.size)
    if any(len(r) != n for r in runs) or (scores is not None and len(scores) != n):
        raise ValueError("y_true, every run and scores must have the same length")
    answered = np.asarray([[d is not None for d in r] for r in runs], dtype=float).reshape(len(runs), n)
    decided = np.asarray([counted_wrong(y_true, r) for r in runs], dtype=float).reshape(len(runs), n)
    tp, fp, tn, fn = _counts(y, decided, np.arange(n))
    point = binary_from_counts(tp, fp, tn, fn)
    point[COVERAGE] = answered.mean() if answered.size else np.nan
    keys = (*BINARY_METRICS, COVERAGE)
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    if n and resamples > 0:
        counts: list[tuple[Array, ...]] = []
        cover: list[Array] = []
        for idx in resample_blocks(n, resamples, seed):
            counts.append(_counts(y, decided, idx))
            cover.append(sum(a[idx].mean(axis=-1) for a in answered) / len(runs))
        boot = binary_from_counts(*(np.concatenate(c) for c in zip(*counts, strict=True)))
        boot[COVERAGE] = np.concatenate(cover)
        for k in keys:
            lows[k], highs[k] = _interval(boot[k])
    n_pos = int(y.sum())
    sizes = {"harmful_acc": n_pos, "unharmful_acc": n - n_pos, "precision": int(decided.sum())}
    values = {k: Value(_clean(point[k]), lows.get(k), highs.get(k), sizes.get(k, n)) for k in keys}
    # the confusion matrix holds the answers given (a failure predicted nothing)
    given = answered.astype(bool)
    yy = np.broadcast_to(y, given.shape)[given]
    pp = decided[given]
    confusion = [
        [int(((1 - yy) * (1 - pp)).sum()), int(((1 - yy) * pp).sum())],
        [int((yy * (1 - pp)).sum()), int((yy * pp).sum())],
    ]
    curves: dict[str, tuple[list[float], list[float]]] = {}
    keep = np.nonzero(answered[0])[0] if len(runs) == 1 and scores is not None else np.zeros(0, dtype=int)
    if keep.size and all(scores[i] is not None for i in keep):  # type: ignore[index]
        ys = y[keep]
        s = np.asarray([scores[i] for i in keep], dtype=float)  # type: ignore[index]
        m = int(keep.size)
        for name, fn_ in (("roc_auc", roc_auc), ("pr_auc", average_precision)):

            def stat(i: Any, f: Callable[[Any, Any], float | None] = fn_) -> float | None:
                return f(ys[i], s[i])

            lo, hi = bootstrap(m, stat, resamples=resamples, seed=seed)
            values[name] = Value(fn_(ys, s), lo, hi, m)
        if 0 < int(ys.sum()) < m:  # curves need both classes
            fpr, tpr, _ = roc_curve(ys, s)
            prec, rec = pr_curve(ys, s)
            curves = {"roc": (fpr.tolist(), tpr.tolist()), "pr": (prec.tolist(), rec.tolist())}
    return BinaryResult(values, n, n_pos, n - n_pos, confusion, curves, int(answered.sum()), len(runs))


class BinaryMetrics:
    """Accumulates (truth, decision, score) and computes `BinaryResult`.

    A decision may be None (the detector failed, the reply could not be read): the sample then
    counts as wrong in every decision metric and lowers ``coverage``.

    Args:
        resamples: Bootstrap resamples (0: no intervals).
        seed: Bootstrap seed.
    """

    def __init__(self, *, resamples: int = BOOTSTRAP, seed: int = 0) -> None:
        self.resamples, self.seed = resamples, seed
        self.y: list[int] = []
        self.pred: list[bool | None] = []
        self.score: list[float | None] = []

    def update(
        self,
        y_true: Sequence[bool | int],
        y_pred: Sequence[bool | int | None],
        scores: Sequence[float | None] | None = None,
    ) -> BinaryMetrics:
        """Add a batch; ``y_pred`` may hold None (no answer) and ``scores`` (P(harmful)) None where there is none."""
        if len(y_true) != len(y_pred) or (scores is not None and len(scores) != len(y_true)):
            raise ValueError("y_true, y_pred and scores must have the same length")
        self.y.extend(int(bool(v)) for v in y_true)
        self.pred.extend(None if v is None else bool(v) for v in y_pred)
        self.score.extend(scores if scores is not None else [None] * len(y_true))
        return self

    def compute(self) -> BinaryResult:
        """The metrics with their intervals."""
        return binary_result(self.y, [self.pred], self.score, resamples=self.resamples, seed=self.seed)


@dataclass
class MulticlassResult:
    """Multi-class accuracy over the categories plus unharmful.

    Attributes:
        accuracy: Share of samples whose predicted class is one of their true classes.
        per_class: Class -> `Value` of recall (samples of that true class predicted right).
        classes: The class labels in order (category codes, then ``unharmful``).
        confusion: Rows: true class (the predicted one when it is among the true ones, else
            the first); columns: predicted class, then ``none`` (harmful without a category).
        n: Samples scored.
    """

    accuracy: Value
    per_class: dict[str, Value]
    classes: list[str]
    confusion: list[list[int]]
    n: int

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "n": self.n,
            "accuracy": self.accuracy.to_dict(),
            "per_class": {k: v.to_dict() for k, v in self.per_class.items()},
            "classes": self.classes,
            "confusion": self.confusion,
        }

    def to_rows(self) -> list[dict[str, Any]]:
        """One row for the accuracy, then one per class recall."""
        rows = [{"metric": "multiclass_acc", **self.accuracy.to_dict()}]
        rows += [{"metric": f"recall_{k}", **v.to_dict()} for k, v in self.per_class.items()]
        return rows

    def to_pandas(self) -> Any:
        """`to_rows` as a pandas DataFrame (needs pandas)."""
        return _pandas().DataFrame(self.to_rows())


class MulticlassMetrics:
    """Accumulates (true classes, predicted class) and computes `MulticlassResult`.

    Args:
        classes: Category codes in order; ``unharmful`` is added as the last class.
        resamples: Bootstrap resamples (0: no intervals).
        seed: Bootstrap seed.
    """

    def __init__(self, classes: Sequence[str], *, resamples: int = BOOTSTRAP, seed: int = 0) -> None:
        from vhd.bench.data import UNHARMFUL

        self.classes = [*classes, UNHARMFUL]
        self.resamples, self.seed = resamples, seed
        self.truth: list[list[str]] = []
        self.pred: list[str | None] = []

    def update(self, y_true: Sequence[Sequence[str]], y_pred: Sequence[str | None]) -> MulticlassMetrics:
        """Add a batch: each sample's true classes (``["unharmful"]`` or codes) and predicted class (None: none)."""
        if len(y_true) != len(y_pred):
            raise ValueError("y_true and y_pred must have the same length")
        self.truth.extend([list(t) for t in y_true])
        self.pred.extend(y_pred)
        return self

    def compute(self) -> MulticlassResult:
        """The accuracy, per-class recall and confusion matrix."""
        np = numpy()
        n = len(self.pred)
        right = np.asarray([p is not None and p in t for t, p in zip(self.truth, self.pred, strict=True)], dtype=float)
        acc = mean_value(right, self.resamples, self.seed)
        per_class: dict[str, Value] = {}
        for c in self.classes:
            sel = np.nonzero([c in t for t in self.truth])[0]
            hits = np.asarray([self.pred[i] == c for i in sel], dtype=float)
            per_class[c] = mean_value(hits, self.resamples, self.seed)
        cols = [*self.classes, "none"]
        confusion = [[0] * len(cols) for _ in self.classes]
        for t, p in zip(self.truth, self.pred, strict=True):
            row_label = p if p in t else t[0]
            col = cols.index(p) if p in cols else cols.index("none")
            if row_label in self.classes:
                confusion[self.classes.index(row_label)][col] += 1
        return MulticlassResult(acc, per_class, list(self.classes), confusion, n)
