"""Turn a benchmark run into numbers: per detector, per group (all, image, video, real, synthetic).

For each detector and group: the binary metrics (`BinaryResult`), multi-class accuracy where the
detector names categories (itself, or through the crosswalk from its raw labels), the share of
harmful samples of each category it caught (per-category recall), and calibration (ECE and
reliability bins) where it gives scores. A sample the detector failed on (or has no prediction
for) stays in every number and counts as wrong, as in ``vhd compare`` (`vhd.bench.metrics`);
``coverage`` (answered / total) says how many there were. Score-based numbers (ROC-AUC, PR-AUC,
calibration) stand on the answered samples. Each number says how many samples it stands on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vhd.bench.calibration import Reliability, reliability
from vhd.bench.data import UNHARMFUL, BenchItem
from vhd.bench.metrics import (
    IOU,
    BinaryMetrics,
    BinaryResult,
    MulticlassMetrics,
    MulticlassResult,
    SegmentMetrics,
    SegmentResult,
    Value,
    mean_value,
)
from vhd.bench.timeline import segment_truth
from vhd.records import Source

if TYPE_CHECKING:
    from vhd.bench.runner import BenchRun, DetectorRun
    from vhd.detectors.base import Prediction
    from vhd.taxonomy.crosswalk import Crosswalk
    from vhd.taxonomy.taxonomy import Taxonomy


@dataclass
class GroupResult:
    """One detector's numbers on one group of samples.

    Attributes:
        binary: Decision and score metrics.
        multiclass: Multi-class accuracy, when the detector names categories.
        category_recall: Category code -> share of its harmful samples predicted harmful.
        reliability: Calibration bins and ECE, when the detector gives scores.
    """

    binary: BinaryResult
    multiclass: MulticlassResult | None = None
    category_recall: dict[str, Value] = field(default_factory=dict)
    reliability: Reliability | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "binary": self.binary.to_dict(),
            "multiclass": self.multiclass.to_dict() if self.multiclass else None,
            "category_recall": {k: v.to_dict() for k, v in self.category_recall.items()},
            "calibration": self.reliability.to_dict() if self.reliability else None,
        }


@dataclass
class DetectorResult:
    """One detector's numbers.

    Attributes:
        label: Its label.
        run: Its run summary (counts, throughput, identity).
        groups: Group name (``all``, ``image``, ``video``, ``real``, ``synthetic``) -> numbers.
        multiclass_scheme: How categories were obtained: ``native``, a crosswalk scheme, or None.
        misclassified: Sample ids it got wrong (binary), in file order.
        segments: Where in the videos it found harm, against the human spans
            (`vhd.bench.metrics.segments`): when labels carry spans and the detector gave segments.
    """

    label: str
    run: dict[str, Any]
    groups: dict[str, GroupResult]
    multiclass_scheme: str | None
    misclassified: list[str]
    segments: SegmentResult | None = None

    @property
    def coverage(self) -> tuple[int, int]:
        """(samples answered, samples) over all samples; a sample without an answer counts as wrong."""
        b = self.groups["all"].binary if "all" in self.groups else None
        return (b.n_answered, b.total) if b is not None else (0, 0)

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        answered, total = self.coverage
        return {
            "label": self.label,
            "coverage": {"answered": answered, "samples": total, "failures_count_as_wrong": True},
            "run": self.run,
            "multiclass_scheme": self.multiclass_scheme,
            "groups": {k: g.to_dict() for k, g in self.groups.items()},
            "misclassified": self.misclassified,
            "segments": None if self.segments is None else self.segments.to_dict(),
        }


def group_indices(items: Sequence[BenchItem]) -> dict[str, list[int]]:
    """The positions in ``items`` of each group's members (as `group_items`); empty groups are left out."""
    groups: dict[str, list[int]] = {
        "all": list(range(len(items))),
        "image": [k for k, i in enumerate(items) if i.kind.value == "image"],
        "video": [k for k, i in enumerate(items) if i.kind.value == "video"],
        "real": [k for k, i in enumerate(items) if i.source == Source.REAL],
        "synthetic": [k for k, i in enumerate(items) if i.source == Source.SYNTHETIC],
    }
    return {k: v for k, v in groups.items() if v}


def group_items(items: list[BenchItem]) -> dict[str, list[BenchItem]]:
    """The groups each number is broken down by; empty groups are left out."""
    return {name: [items[k] for k in at] for name, at in group_indices(items).items()}


def predicted_class(pred: Prediction, run: DetectorRun, taxonomy: Taxonomy, crosswalk: Crosswalk | None) -> str | None:
    """The class a prediction names: ``unharmful``, its first category code, or None (harmful, no category)."""
    if not pred.harmful:
        return UNHARMFUL
    codes: list[str] = []
    for c in pred.categories:
        cat = taxonomy.find(c)
        if cat is not None:
            codes.append(cat.code)
    if not codes and crosswalk is not None:
        scheme = crosswalk.scheme_for(run.name)
        if scheme is not None:
            codes = crosswalk.to_vhd(scheme, pred.labels)
    return codes[0] if codes else None


def _scheme(run: DetectorRun, crosswalk: Crosswalk | None) -> str | None:
    if run.multiclass:
        return "native"
    return crosswalk.scheme_for(run.name) if crosswalk is not None else None


def evaluate_detector(
    run: DetectorRun,
    items: list[BenchItem],
    taxonomy: Taxonomy,
    *,
    crosswalk: Crosswalk | None = None,
    resamples: int = 1000,
    seed: int = 0,
    iou: float = IOU,
) -> DetectorResult:
    """Every number of one detector over the items (a failed prediction counts as wrong).

    When some video's label carries harmful spans and the detector gave segments, its segment
    metrics (`vhd.bench.metrics.segments`, a pair matching at ``iou``) stand on the videos with
    spans to compare (`vhd.bench.timeline.segment_truth`); a video it gave no segments for counts
    as answering nothing in time.

    The predictions are read once, one at a time, into what the numbers need per sample (the
    decision, the score, the class named): a few numbers a sample, never the `Prediction`
    objects of the whole set at once.
    """
    scheme = _scheme(run, crosswalk)
    truth = segment_truth(items)
    spans = SegmentMetrics(iou=iou, resamples=resamples, seed=seed)
    gave_segments = False
    decisions: list[bool | None] = []
    scores: list[float | None] = []
    classes: list[str | None] = []
    wrong: list[str] = []
    for item, true_spans in zip(items, truth, strict=True):
        p = run.predictions.get(item.id)
        if true_spans is not None:
            spans.update(true_spans, None if p is None else p.segments)
            gave_segments = gave_segments or (p is not None and p.segments is not None)
        if p is None or p.harmful is None:
            decisions.append(None)
            scores.append(None)
            classes.append(None)
            continue
        decisions.append(bool(p.harmful))
        scores.append(p.score)
        classes.append(predicted_class(p, run, taxonomy, crosswalk) if scheme is not None else None)
        if p.harmful != item.harmful:
            wrong.append(item.id)
    groups: dict[str, GroupResult] = {}
    for name, at in group_indices(items).items():
        members = [items[k] for k in at]
        given = [decisions[k] for k in at]
        binary = BinaryMetrics(resamples=resamples, seed=seed).update(
            [i.harmful for i in members], given, [scores[k] for k in at]
        )
        result = GroupResult(binary.compute())
        if scheme is not None:
            mc = [(i, k) for i, k in zip(members, at, strict=True) if not i.harmful or i.categories]
            metrics = MulticlassMetrics(taxonomy.codes, resamples=resamples, seed=seed)
            metrics.update([i.categories if i.harmful else [UNHARMFUL] for i, _ in mc], [classes[k] for _, k in mc])
            result.multiclass = metrics.compute()
        for code in taxonomy.codes:
            hits = [float(bool(decisions[k])) for i, k in zip(members, at, strict=True) if code in i.categories]
            if hits:
                result.category_recall[code] = mean_value(hits, resamples, seed)
        scored = [(i, k) for i, k in zip(members, at, strict=True) if decisions[k] is not None]
        if scored and all(scores[k] is not None for _, k in scored):
            result.reliability = reliability([i.harmful for i, _ in scored], [float(scores[k] or 0) for _, k in scored])
        groups[name] = result
    return DetectorResult(run.label, run.summary(), groups, scheme, wrong, spans.compute() if gave_segments else None)


def evaluate(
    bench_run: BenchRun,
    *,
    crosswalk: Crosswalk | None = None,
    resamples: int = 1000,
    seed: int = 0,
    iou: float = IOU,
) -> list[DetectorResult]:
    """Numbers for every detector of a run, in the run's order (``iou``: the segment numbers' matching threshold)."""
    bench = bench_run.bench
    return [
        evaluate_detector(r, bench.items, bench.taxonomy, crosswalk=crosswalk, resamples=resamples, seed=seed, iou=iou)
        for r in bench_run.detectors
    ]
