"""PNG plots of benchmark numbers (matplotlib, the ``plot`` extra), drawn off-screen.

An undefined number (a group a detector has no sample in, a rate without a sample of its
class) is never drawn: its bar is left out (NaN), not drawn at 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.errors import MissingDependencyError

if TYPE_CHECKING:
    from vhd.bench.evaluate import DetectorResult
    from vhd.bench.metrics import BinaryResult, MulticlassResult


def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("matplotlib", "plot") from None
    return plt


def _save(fig: Any, path: str | Path | None) -> Any:
    if path is not None:
        from vhd.fileio import atomic_write

        atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=110, bbox_inches="tight"), binary=True)
        _plt().close(fig)
    return fig


def _matrix(ax: Any, matrix: list[list[int]], rows: Sequence[str], cols: Sequence[str], title: str) -> None:
    ax.imshow(matrix, cmap="Blues")
    ax.set_xticks(range(len(cols)), labels=list(cols), rotation=45, ha="right")
    ax.set_yticks(range(len(rows)), labels=list(rows))
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title)
    top = max((v for r in matrix for v in r), default=0)
    for i, r in enumerate(matrix):
        for j, v in enumerate(r):
            ax.text(j, i, str(v), ha="center", va="center", color="white" if v > top / 2 else "black", fontsize=8)


def binary_figure(result: BinaryResult, path: str | Path | None = None, *, title: str = "") -> Any:
    """Confusion matrix, and ROC and PR curves when the result has them."""
    plt = _plt()
    panels = 3 if result.curves else 1
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.8), squeeze=False)
    heading = f"{title or 'confusion'} (answered {result.coverage_text()})"
    _matrix(axes[0][0], result.confusion, ["unharmful", "harmful"], ["unharmful", "harmful"], heading)
    if result.curves:
        fpr, tpr = result.curves["roc"]
        axes[0][1].plot(fpr, tpr)
        axes[0][1].plot([0, 1], [0, 1], ls=":", c="grey")
        axes[0][1].set(xlabel="false-positive rate", ylabel="true-positive rate", title="ROC")
        prec, rec = result.curves["pr"]
        axes[0][2].plot(rec, prec, marker=".")
        axes[0][2].set(xlabel="recall", ylabel="precision", title="precision-recall", xlim=(0, 1.02), ylim=(0, 1.02))
    fig.tight_layout()
    return _save(fig, path)


def multiclass_figure(result: MulticlassResult, path: str | Path | None = None, *, title: str = "") -> Any:
    """Multi-class confusion matrix."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    _matrix(ax, result.confusion, result.classes, [*result.classes, "none"], title or "multi-class confusion")
    fig.tight_layout()
    return _save(fig, path)


def curves_figure(results: Sequence[DetectorResult], path: str | Path, group: str = "all") -> Path | None:
    """ROC and PR curves of every detector that gives scores; None when none does."""
    have = [(r.label, r.groups[group].binary) for r in results if group in r.groups and r.groups[group].binary.curves]
    if not have:
        return None
    plt = _plt()
    fig, (roc, pr) = plt.subplots(1, 2, figsize=(10, 4.2))
    for label, b in have:
        auc = b.values["roc_auc"].value
        ap = b.values["pr_auc"].value
        roc.plot(*b.curves["roc"], label=f"{label} (AUC {auc:.3f})" if auc is not None else label)
        prec, rec = b.curves["pr"]
        pr.plot(rec, prec, marker=".", label=f"{label} (AP {ap:.3f})" if ap is not None else label)
    roc.plot([0, 1], [0, 1], ls=":", c="grey")
    roc.set(xlabel="false-positive rate", ylabel="true-positive rate", title=f"ROC ({group})")
    pr.set(xlabel="recall", ylabel="precision", title=f"precision-recall ({group})", xlim=(0, 1.02), ylim=(0, 1.02))
    roc.legend(fontsize=8)
    pr.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    return Path(path)


def reliability_figure(results: Sequence[DetectorResult], path: str | Path, group: str = "all") -> Path | None:
    """Reliability diagram (mean score vs harmful rate per bin) of every detector with scores."""
    have = [
        (r.label, r.groups[group].reliability) for r in results if group in r.groups and r.groups[group].reliability
    ]
    if not have:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 4.5))
    for label, rel in have:
        if rel is None:
            continue
        ax.plot(
            [b["mean_score"] for b in rel.bins],
            [b["harmful_rate"] for b in rel.bins],
            marker="o",
            label=f"{label} (ECE {rel.ece:.3f})",
        )
    ax.plot([0, 1], [0, 1], ls=":", c="grey")
    ax.set(xlabel="mean score", ylabel="harmful rate", title=f"reliability ({group})", xlim=(0, 1), ylim=(0, 1))
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    return Path(path)


def _percent(value: float | None) -> float:
    """A share as a percentage; NaN (no bar) when undefined."""
    return math.nan if value is None or value != value else 100 * value


def _bars(ax: Any, labels: Sequence[str], series: dict[str, list[float]], ylabel: str, title: str) -> None:
    width = 0.8 / max(len(series), 1)
    for k, (name, values) in enumerate(series.items()):
        xs = [x + k * width for x in range(len(labels))]
        drawn = [(x, v) for x, v in zip(xs, values, strict=True) if not math.isnan(v)]  # undefined: no bar
        ax.bar([x for x, _ in drawn], [v for _, v in drawn], width, label=name)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(labels))], labels=list(labels), rotation=30, ha="right")
    ax.set(ylabel=ylabel, title=title, ylim=(0, 100))
    ax.legend(fontsize=8)


def category_recall_figure(results: Sequence[DetectorResult], codes: Sequence[str], path: str | Path) -> Path | None:
    """Per-category recall (harmful samples of each category caught), one bar per detector."""
    present = [c for c in codes if any(c in r.groups["all"].category_recall for r in results if "all" in r.groups)]
    if not present:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(present) * max(1, len(results)) ** 0.5), 4))
    series = {
        r.label: [
            _percent(r.groups["all"].category_recall[c].value) if c in r.groups["all"].category_recall else math.nan
            for c in present
        ]
        for r in results
        if "all" in r.groups
    }
    _bars(ax, present, series, "recall (%)", "harmful samples caught, per category")
    fig.tight_layout()
    _save(fig, path)
    return Path(path)


def breakdown_figure(results: Sequence[DetectorResult], path: str | Path) -> Path | None:
    """Average accuracy (mean of harmful and unharmful accuracy) per group: modality and real vs synthetic."""
    groups = [g for g in ("image", "video", "real", "synthetic") if any(g in r.groups for r in results)]
    if not groups:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    series = {}
    for r in results:
        series[r.label] = [
            _percent(r.groups[g].binary.values["average"].value) if g in r.groups else math.nan for g in groups
        ]
    _bars(ax, groups, series, "average accuracy (%)", "by modality and source")
    fig.tight_layout()
    _save(fig, path)
    return Path(path)
