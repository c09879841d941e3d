"""Binary metrics (`BinaryMetrics`, `binary_result`): harmful vs not, with bootstrap intervals and coverage."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

from vhd.bench.metrics.values import (
    BINARY_METRICS,
    BOOTSTRAP,
    COVERAGE,
    Value,
    average_precision,
    binary_from_counts,
    bootstrap,
    clean,
    counted_wrong,
    numpy,
    pandas_module,
    percentile_interval,
    pr_curve,
    resample_blocks,
    roc_auc,
    roc_curve,
)


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
        return pandas_module().DataFrame(self.to_rows())


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
            lows[k], highs[k] = percentile_interval(boot[k])
    n_pos = int(y.sum())
    sizes = {"harmful_acc": n_pos, "unharmful_acc": n - n_pos, "precision": int(decided.sum())}
    values = {k: Value(clean(point[k]), lows.get(k), highs.get(k), sizes.get(k, n)) for k in keys}
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
