"""Ranking metrics of the in-context example search (`vhd.icl.search`), registered by name.

Each metric is a function of the confusion counts (``tp``, ``fp``, ``tn``, ``fn``) that returns a
value (higher is better) or None where it is undefined. Third-party packages add metrics through
the ``vhd.icl_metrics`` entry-point group.
"""

from __future__ import annotations

from typing import Protocol

from vhd.registry import Registry


class IclMetric(Protocol):
    """A ranking metric of the search: confusion counts in, a value (higher is better) or None where undefined."""

    def __call__(self, tp: int, fp: int, tn: int, fn: int) -> float | None:
        """The metric of these counts."""


ICL_METRICS: Registry[IclMetric] = Registry("ICL metric", "vhd.icl_metrics")
"""Metrics the search can rank by: built-ins below, plugins from the ``vhd.icl_metrics`` entry-point group."""

ICL_METRICS.add("f1", "vhd.icl.metrics:f1", summary="F1 of the harmful class")
ICL_METRICS.add("balanced_accuracy", "vhd.icl.metrics:balanced_accuracy", summary="mean of TPR and TNR")
ICL_METRICS.add("tpr", "vhd.icl.metrics:tpr", summary="true-positive rate (harmful recall)")
ICL_METRICS.add("tnr", "vhd.icl.metrics:tnr", summary="true-negative rate (unharmful recall)")


def _div(a: int, b: int) -> float | None:
    return a / b if b else None


def tpr(tp: int, fp: int, tn: int, fn: int) -> float | None:
    """True-positive rate: harmful samples judged harmful."""
    return _div(tp, tp + fn)


def tnr(tp: int, fp: int, tn: int, fn: int) -> float | None:
    """True-negative rate: unharmful samples judged unharmful."""
    return _div(tn, tn + fp)


def f1(tp: int, fp: int, tn: int, fn: int) -> float | None:
    """F1 of the harmful class (None without harmful samples)."""
    return _div(2 * tp, 2 * tp + fp + fn) if tp + fn else None


def balanced_accuracy(tp: int, fp: int, tn: int, fn: int) -> float | None:
    """Mean of TPR and TNR (None when either is undefined)."""
    pos, neg = tpr(tp, fp, tn, fn), tnr(tp, fp, tn, fn)
    return None if pos is None or neg is None else (pos + neg) / 2


def rates(tp: int, fp: int, tn: int, fn: int) -> dict[str, float | None]:
    """TPR, TNR, F1, balanced accuracy and accuracy from confusion counts (None where undefined)."""
    return {
        "tpr": tpr(tp, fp, tn, fn),
        "tnr": tnr(tp, fp, tn, fn),
        "f1": f1(tp, fp, tn, fn),
        "balanced_accuracy": balanced_accuracy(tp, fp, tn, fn),
        "accuracy": _div(tp + tn, tp + fp + tn + fn),
    }
