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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vhd.bench.calibration import Reliability, reliability
from vhd.bench.data import UNHARMFUL, BenchItem
from vhd.bench.metrics import BinaryMetrics, BinaryResult, MulticlassMetrics, MulticlassResult, Value, mean_value
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
    """

    label: str
    run: dict[str, Any]
    groups: dict[str, GroupResult]
    multiclass_scheme: str | None
    misclassified: list[str]

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
        }


def group_items(items: list[BenchItem]) -> dict[str, list[BenchItem]]:
    """The groups each number is broken down by; empty groups are left out."""
    groups = {
        "all": items,
        "image": [i for i in items if i.kind.value == "image"],
        "video": [i for i in items if i.kind.value == "video"],
        "real": [i for i in items if i.source == Source.REAL],
        "synthetic": [i for i in items if i.source == Source.SYNTHETIC],
    }
    return {k: v for k, v in groups.items() if v}


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
) -> DetectorResult:
    """Every number of one detector over the items (a failed prediction counts as wrong)."""
    scheme = _scheme(run, crosswalk)
    groups: dict[str, GroupResult] = {}
    for name, members in group_items(items).items():
        answers = [run.predictions.get(i.id) for i in members]
        given = [p if p is not None and p.harmful is not None else None for p in answers]
        binary = BinaryMetrics(resamples=resamples, seed=seed).update(
            [i.harmful for i in members],
            [None if p is None else bool(p.harmful) for p in given],
            [None if p is None else p.score for p in given],
        )
        result = GroupResult(binary.compute())
        if scheme is not None:
            mc = [(i, p) for i, p in zip(members, given, strict=True) if not i.harmful or i.categories]
            metrics = MulticlassMetrics(taxonomy.codes, resamples=resamples, seed=seed)
            metrics.update(
                [i.categories if i.harmful else [UNHARMFUL] for i, _ in mc],
                [None if p is None else predicted_class(p, run, taxonomy, crosswalk) for _, p in mc],
            )
            result.multiclass = metrics.compute()
        for code in taxonomy.codes:
            hits = [
                float(p is not None and bool(p.harmful))
                for i, p in zip(members, given, strict=True)
                if code in i.categories
            ]
            if hits:
                result.category_recall[code] = mean_value(hits, resamples, seed)
        scored = [(i, p) for i, p in zip(members, given, strict=True) if p is not None]
        if scored and all(p.score is not None for _, p in scored):
            result.reliability = reliability([i.harmful for i, _ in scored], [float(p.score or 0) for _, p in scored])
        groups[name] = result
    wrong = [i.id for i in items if i.id in run.predictions and run.predictions[i.id].harmful not in (None, i.harmful)]
    return DetectorResult(run.label, run.summary(), groups, scheme, wrong)


def evaluate(
    bench_run: BenchRun, *, crosswalk: Crosswalk | None = None, resamples: int = 1000, seed: int = 0
) -> list[DetectorResult]:
    """Numbers for every detector of a run, in the run's order."""
    return [
        evaluate_detector(
            r, bench_run.bench.items, bench_run.bench.taxonomy, crosswalk=crosswalk, resamples=resamples, seed=seed
        )
        for r in bench_run.detectors
    ]
