"""Multi-class metrics (`MulticlassMetrics`): per-category rates with bootstrap intervals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

from vhd.bench.metrics.values import BOOTSTRAP, Value, mean_value, numpy, pandas_module


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
        return pandas_module().DataFrame(self.to_rows())


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
