"""Binary and multi-class metrics with bootstrap confidence intervals.

`BinaryMetrics` and `MulticlassMetrics` follow one pattern: `update()` with a batch, `compute()`
to a result object with `to_rows()` and `to_pandas()` (when pandas is installed); `vhd.bench.plots`
draws one (``binary_figure``, ``multiclass_figure``).
Every number has a 95% bootstrap confidence interval (percentile method, resampling samples
with replacement, a fixed seed) and the number of samples it stands on. The point values equal
scikit-learn's (``recall_score``, ``precision_score``, ``f1_score``, ``balanced_accuracy_score``,
``roc_auc_score``, ``average_precision_score``); numpy is the only requirement.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vhd.errors import MissingDependencyError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

BOOTSTRAP = 1000
"""Bootstrap resamples per confidence interval."""

BINARY_METRICS = ("harmful_acc", "unharmful_acc", "average", "precision", "f1", "balanced_acc", "accuracy")
"""Metrics from the decisions alone (harmful accuracy is the TPR, unharmful accuracy the TNR)."""

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

    Precision and F1 are 0 where scikit-learn's ``zero_division`` default gives 0 (no
    positive prediction); TPR/TNR are NaN without a harmful/unharmful sample.
    """
    np = numpy()
    tp, fp, tn, fn = (np.asarray(x, dtype=float) for x in (tp, fp, tn, fn))
    tpr, tnr = _div(tp, tp + fn), _div(tn, tn + fp)
    precision = np.where(tp + fp > 0, _div(tp, tp + fp), 0.0)
    f1 = np.where(2 * tp + fp + fn > 0, _div(2 * tp, 2 * tp + fp + fn), 0.0)
    f1 = np.where(tp + fn > 0, f1, np.nan)
    return {
        "harmful_acc": tpr,
        "unharmful_acc": tnr,
        "average": (tpr + tnr) / 2,
        "precision": precision,
        "f1": f1,
        "balanced_acc": (tpr + tnr) / 2,
        "accuracy": _div(tp + tn, tp + fp + tn + fn),
    }


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
    return float(np.trapezoid(tpr, fpr))


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


def mean_value(hits: Any, resamples: int = BOOTSTRAP, seed: int = 0) -> Value:
    """The mean of 0/1 outcomes with its bootstrap interval (vectorised)."""
    np = numpy()
    arr = np.asarray(hits, dtype=float)
    if not arr.size:
        return Value(None, None, None, 0)
    if resamples <= 0:
        return Value(float(arr.mean()), None, None, int(arr.size))
    rng = np.random.default_rng(seed)
    boot = arr[rng.integers(0, arr.size, (resamples, arr.size))].mean(axis=1)
    return Value(float(arr.mean()), float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)), int(arr.size))


def _counts_samples(y: Array, p: Array, idx: Array) -> tuple[Array, Array, Array, Array]:
    np = numpy()
    yb, pb = y[idx], p[idx]
    tp = np.sum(yb * pb, axis=-1)
    fp = np.sum((1 - yb) * pb, axis=-1)
    fn = np.sum(yb * (1 - pb), axis=-1)
    tn = np.sum((1 - yb) * (1 - pb), axis=-1)
    return tp, fp, tn, fn


@dataclass
class BinaryResult:
    """Binary metrics of one detector on one group of samples.

    Attributes:
        values: Metric name -> `Value` (see `BINARY_METRICS`, `SCORE_METRICS`).
        n: Samples with a decision; n_harmful and n_unharmful among them.
        confusion: ``[[TN, FP], [FN, TP]]`` (rows: truth unharmful/harmful).
        curves: ``roc`` (fpr, tpr) and ``pr`` (precision, recall) as lists, where scores exist.
    """

    values: dict[str, Value]
    n: int
    n_harmful: int
    n_unharmful: int
    confusion: list[list[int]]
    curves: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (curves included)."""
        return {
            "n": self.n,
            "n_harmful": self.n_harmful,
            "n_unharmful": self.n_unharmful,
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


class BinaryMetrics:
    """Accumulates (truth, decision, score) and computes `BinaryResult`.

    Args:
        resamples: Bootstrap resamples (0: no intervals).
        seed: Bootstrap seed.
    """

    def __init__(self, *, resamples: int = BOOTSTRAP, seed: int = 0) -> None:
        self.resamples, self.seed = resamples, seed
        self.y: list[int] = []
        self.pred: list[int] = []
        self.score: list[float | None] = []

    def update(
        self, y_true: Sequence[bool | int], y_pred: Sequence[bool | int], scores: Sequence[float | None] | None = None
    ) -> BinaryMetrics:
        """Add a batch; ``scores`` (P(harmful)) may hold None where a sample has none."""
        if len(y_true) != len(y_pred) or (scores is not None and len(scores) != len(y_true)):
            raise ValueError("y_true, y_pred and scores must have the same length")
        self.y.extend(int(bool(v)) for v in y_true)
        self.pred.extend(int(bool(v)) for v in y_pred)
        self.score.extend(scores if scores is not None else [None] * len(y_true))
        return self

    def compute(self) -> BinaryResult:
        """The metrics with their intervals."""
        np = numpy()
        y, p = np.asarray(self.y, dtype=float), np.asarray(self.pred, dtype=float)
        n = int(y.size)
        tp, fp, tn, fn = _counts_samples(y, p, np.arange(n))
        point = binary_from_counts(tp, fp, tn, fn)
        lows: dict[str, Any] = {}
        highs: dict[str, Any] = {}
        if n and self.resamples > 0:
            rng = np.random.default_rng(self.seed)
            idx = rng.integers(0, n, (self.resamples, n))
            boot = binary_from_counts(*_counts_samples(y, p, idx))
            for k, arr in boot.items():
                arr = arr[~np.isnan(arr)]
                lows[k] = float(np.percentile(arr, 2.5)) if arr.size else None
                highs[k] = float(np.percentile(arr, 97.5)) if arr.size else None
        n_pos, n_neg = int(y.sum()), n - int(y.sum())
        sizes = {"harmful_acc": n_pos, "unharmful_acc": n_neg, "precision": int(p.sum())}
        values = {k: Value(_clean(point[k]), lows.get(k), highs.get(k), sizes.get(k, n)) for k in BINARY_METRICS}
        confusion = [[int(tn), int(fp)], [int(fn), int(tp)]]
        curves: dict[str, tuple[list[float], list[float]]] = {}
        has = np.asarray([s is not None for s in self.score], dtype=bool)
        if n and has.all():
            s = np.asarray(self.score, dtype=float)
            for name, fn_ in (("roc_auc", roc_auc), ("pr_auc", average_precision)):

                def stat(i: Any, f: Callable[[Any, Any], float | None] = fn_) -> float | None:
                    return f(y[i], s[i])

                lo, hi = bootstrap(n, stat, resamples=self.resamples, seed=self.seed)
                values[name] = Value(fn_(y, s), lo, hi, n)
            if 0 < n_pos < n:  # curves need both classes
                fpr, tpr, _ = roc_curve(y, s)
                prec, rec = pr_curve(y, s)
                curves = {"roc": (fpr.tolist(), tpr.tolist()), "pr": (prec.tolist(), rec.tolist())}
        return BinaryResult(values, n, n_pos, n_neg, confusion, curves)


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
