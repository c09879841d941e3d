"""Cascade thresholds chosen on a labelled set: the replay behind ``vhd compare --cascade``.

`pick_thresholds` takes, for the same labelled samples, each stage's scores and the all-debate
decisions, replays the cascade rule of `vhd.annotate.cascade` for candidate ``(low, high)`` pairs,
and picks per-stage thresholds that keep accuracy within ``tolerance`` of the all-debate accuracy
while spending the fewest calls; every candidate it tried is a point of the cost/accuracy curve
(`write_curve` plots it). Stages are tuned in order, each with the later ones switched off, so the
search stays linear in the number of stages.

Besides the overall accuracy, each stage must be about as right as the debate on the samples it
takes from it (within ``tolerance``, judged by a one-sided lower confidence bound of the paired
difference, ``z`` standard errors below the mean): otherwise a stage much better than the debate
on its clear samples could "spend" that margin deciding samples it is unsure of, and a band that
only looks as good as the debate by luck on the labelled set would not carry over to new data.
The check is per stage: a band that takes a few unsure samples along with many clear ones is
judged on all of them together.

The cascade itself is `vhd.annotate.cascade`; ``--cascade`` flags become one in
`vhd.cli.cascade_flags`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.errors import ConfigError

if TYPE_CHECKING:
    pass

OFF = (0.0, 1.0)
"""Thresholds that never decide: no score is below 0 or above 1."""


@dataclass(frozen=True)
class CurvePoint:
    """One cascade setting replayed on the labelled set.

    Attributes:
        thresholds: ``(low, high)`` per stage.
        accuracy: Share of samples decided correctly (an undecided sample counts as wrong).
        calls_per_sample: Stage calls plus debate calls per sample.
        debate_share: Share of samples that reached the debate.
        stage_gap: The lowest, over stages that decided samples, of (the stage's accuracy on the
            samples it decided) minus (the debate's accuracy on those samples); 0 when none did.
        stage_gap_low: The lowest such difference's lower confidence bound (mean minus ``z``
            standard errors of the paired per-sample differences); 0 when no stage decided.
    """

    thresholds: tuple[tuple[float, float], ...]
    accuracy: float
    calls_per_sample: float
    debate_share: float
    stage_gap: float = 0.0
    stage_gap_low: float = 0.0


@dataclass
class ThresholdPick:
    """What `pick_thresholds` chose, and the curve it walked.

    Attributes:
        thresholds: The chosen ``(low, high)`` per stage.
        chosen: The chosen setting's point.
        debate: The all-debate point (every sample debated; no stage calls).
        target: The accuracy the choice had to reach (debate accuracy minus the tolerance).
        curve: Every setting tried.
    """

    thresholds: list[tuple[float, float]]
    chosen: CurvePoint
    debate: CurvePoint
    target: float
    curve: list[CurvePoint] = field(default_factory=list)

    def pareto(self) -> list[CurvePoint]:
        """The settings no other beats on both cost and accuracy, cheapest first."""
        front: list[CurvePoint] = []
        for p in sorted(self.curve, key=lambda p: (p.calls_per_sample, -p.accuracy)):
            if not front or p.accuracy > front[-1].accuracy:
                front.append(p)
        return front

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "thresholds": [list(t) for t in self.thresholds],
            "target_accuracy": self.target,
            "chosen": _point_dict(self.chosen),
            "all_debate": _point_dict(self.debate),
            "pareto": [_point_dict(p) for p in self.pareto()],
            "tried": len(self.curve),
        }


def _point_dict(p: CurvePoint) -> dict[str, Any]:
    return {
        "thresholds": [list(t) for t in p.thresholds],
        "accuracy": p.accuracy,
        "calls_per_sample": p.calls_per_sample,
        "debate_share": p.debate_share,
        "stage_gap": p.stage_gap,
        "stage_gap_low": p.stage_gap_low,
    }


def replay(
    thresholds: Sequence[tuple[float, float]],
    stage_scores: Sequence[Sequence[float | None]],
    debate: Sequence[bool | None],
    truth: Sequence[bool],
    *,
    stage_calls: Sequence[float],
    debate_calls: float,
    z: float = 1.645,
) -> CurvePoint:
    """Replay the cascade rule with these thresholds on the labelled samples.

    A stage decides when the sample's score (None: no decision, an error or a refusal) is below
    ``low`` (unharmful) or above ``high`` (harmful); otherwise the next stage, then the debate.
    """
    n = len(truth)
    correct = 0
    calls = 0.0
    debated = 0
    taken = [[0, 0, 0, 0] for _ in thresholds]  # per stage: decided, right, debate right, squared differences
    for i in range(n):
        decision: bool | None = None
        decided = False
        for s, (low, high) in enumerate(thresholds):
            calls += stage_calls[s]
            score = stage_scores[s][i]
            if score is not None and (score < low or score > high):
                decision, decided = score > high, True
                stage_right = int(decision == truth[i])
                debate_right = int(debate[i] is not None and debate[i] == truth[i])
                taken[s][0] += 1
                taken[s][1] += stage_right
                taken[s][2] += debate_right
                taken[s][3] += (stage_right - debate_right) ** 2
                break
        if not decided:
            debated += 1
            calls += debate_calls
            decision = debate[i]
        correct += decision is not None and decision == truth[i]
    gaps, lows = [], []
    for count, right, debate_right, squares in taken:
        if count:
            mean = (right - debate_right) / count
            var = max(squares / count - mean * mean, 0.0) / max(count - 1, 1)
            gaps.append(mean)
            lows.append(mean - z * var**0.5)
    if not n:
        return CurvePoint(tuple(thresholds), 0.0, 0.0, 0.0)
    return CurvePoint(
        tuple(thresholds), correct / n, calls / n, debated / n, min(gaps, default=0.0), min(lows, default=0.0)
    )


def candidate_pairs(scores: Sequence[float | None], points: int = 11) -> list[tuple[float, float]]:
    """``(low, high)`` candidates for one stage: pairs of cut points between its scores' quantiles."""
    values = sorted(s for s in scores if s is not None)
    cuts = {0.0, 1.0}
    if values:
        for k in range(points):
            q = values[min(len(values) - 1, round(k * (len(values) - 1) / max(points - 1, 1)))]
            cuts.update({q, min(1.0, q + 1e-9), max(0.0, q - 1e-9)})
    ordered = sorted(cuts)
    return [(lo, hi) for i, lo in enumerate(ordered) for hi in ordered[i:]]


def pick_thresholds(
    stage_scores: Sequence[Sequence[float | None]],
    debate: Sequence[bool | None],
    truth: Sequence[bool],
    *,
    tolerance: float = 0.01,
    stage_calls: Sequence[float] | None = None,
    debate_calls: float = 5.0,
    points: int = 11,
    z: float = 1.645,
) -> ThresholdPick:
    """Per-stage thresholds that keep accuracy within ``tolerance`` of all-debate at the fewest calls.

    Args:
        stage_scores: ``[stage][sample]`` scores (calibrated where the cascade will calibrate;
            None where the stage gave no decision).
        debate: The all-debate decision per sample (None: no readable verdict).
        truth: The human label per sample.
        tolerance: Accuracy (a share, 0.01 = one point) the cascade may lose against all-debate,
            overall and on the samples each stage takes from the debate.
        stage_calls: Calls one sample costs at each stage (default 1 each).
        debate_calls: Calls one debated sample costs (default 5: two rounds of two debaters and a judge).
        points: Quantile cut points per stage (the candidates are pairs of them).
        z: Standard errors below the mean for each stage's lower confidence bound against the
            debate (1.645: one-sided 95%; 0 compares the means only).

    Raises:
        ConfigError: Lengths that do not match, or no samples.
    """
    n = len(truth)
    if not n or len(debate) != n or any(len(s) != n for s in stage_scores):
        raise ConfigError("pick_thresholds needs one score per stage and one debate verdict for every labelled sample")
    costs = list(stage_calls) if stage_calls is not None else [1.0] * len(stage_scores)
    if len(costs) != len(stage_scores):
        raise ConfigError("give one stage_calls value per stage")
    off = [OFF] * len(stage_scores)
    debate_point = replay([], [], debate, truth, stage_calls=[], debate_calls=debate_calls)
    target = debate_point.accuracy - tolerance
    chosen = list(off)
    curve: list[CurvePoint] = []
    for s, scores in enumerate(stage_scores):
        best: CurvePoint | None = None
        for pair in candidate_pairs(scores, points):
            trial = [*chosen[:s], pair, *off[s + 1 :]]
            point = replay(trial, stage_scores, debate, truth, stage_calls=costs, debate_calls=debate_calls, z=z)
            curve.append(point)
            ok = point.accuracy >= target - 1e-12 and point.stage_gap_low >= -tolerance - 1e-12
            if ok and (
                best is None or (point.calls_per_sample, -point.accuracy) < (best.calls_per_sample, -best.accuracy)
            ):
                best = point
        if best is not None:
            chosen[s] = best.thresholds[s]
    final = replay(chosen, stage_scores, debate, truth, stage_calls=costs, debate_calls=debate_calls, z=z)
    return ThresholdPick(chosen, final, debate_point, target, curve)


def write_curve(pick: ThresholdPick, out: str | os.PathLike[str], *, title: str = "cascade") -> list[Path]:
    """Write the curve as ``<out>.csv`` and, with matplotlib (``vhd[plot]``), ``<out>.png``.

    Returns:
        The files written (the PNG is left out without matplotlib).
    """
    import csv
    import io

    from vhd.fileio import atomic_write

    base = Path(out)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["thresholds", "accuracy", "calls_per_sample", "debate_share", "pareto", "chosen"])
    front = set(pick.pareto())
    for p in pick.curve:
        cells = ";".join(f"{lo:.4f}:{hi:.4f}" for lo, hi in p.thresholds)
        writer.writerow(
            [
                cells,
                f"{p.accuracy:.4f}",
                f"{p.calls_per_sample:.4f}",
                f"{p.debate_share:.4f}",
                int(p in front),
                int(p == pick.chosen),
            ]
        )
    written = [atomic_write(base.with_suffix(".csv"), buf.getvalue())]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return written
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(
        [p.calls_per_sample for p in pick.curve], [p.accuracy for p in pick.curve], s=8, alpha=0.35, label="tried"
    )
    pareto = pick.pareto()
    ax.plot([p.calls_per_sample for p in pareto], [p.accuracy for p in pareto], "-o", ms=3, label="Pareto front")
    ax.scatter([pick.debate.calls_per_sample], [pick.debate.accuracy], marker="s", s=50, label="all debate")
    ax.scatter([pick.chosen.calls_per_sample], [pick.chosen.accuracy], marker="*", s=120, label="chosen")
    ax.axhline(pick.target, ls="--", lw=0.8, color="grey", label="target accuracy")
    ax.set_xlabel("model calls per sample")
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    png = base.with_suffix(".png")
    atomic_write(png, lambda f: fig.savefig(f, format="png", dpi=120), binary=True)
    plt.close(fig)
    written.append(png)
    return written
