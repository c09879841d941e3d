"""The results of ``vhd compare``: each configuration's outcomes and scores, and the whole comparison.

`vhd.compare.runner` fills them; `vhd.compare.report` writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.bench.metrics import Value
from vhd.compare.single import SampleOutcome
from vhd.labels.sets import LabelledItem


@dataclass
class ConfigResult:
    """One configuration's outcomes and scores.

    Attributes:
        name: Row name (``single-short``, ``single-long``, ``single-long-icl``, ``sc-k5``,
            ``debate-r2``, ``debate-mixed-r2``).
        family: ``single``, ``self-consistency`` or ``debate``.
        params: What defines it (prompt, k, temperature, rounds, models).
        runs: ``[repeat][sample]`` outcomes, samples in the order of `CompareResult.items`.
        metrics: ``accuracy``, ``f1``, ``kappa`` (against people), ``tpr``, ``tnr`` and ``coverage``
            (answered / asked), every repeat pooled, with bootstrap intervals over samples (a
            sample's repeats resampled together); an unreadable or failed answer counts as wrong.
        accuracy_runs: Accuracy of each repeat.
        tokens_per_sample: Mean prompt + completion tokens per sample (all repeats).
        calls_per_sample: Mean model calls per sample.
        cost_per_sample: Mean dollars per sample; None (unknown) when a model it called has no
            ``[prices]`` entry.
        unparsed: Outcomes, over all repeats, without a readable answer (errors excluded).
        errors: Outcomes, over all repeats, whose model calls failed (retried on the next run).
        run_kappa: Mean pairwise Cohen's kappa between repeats (None with one repeat, or when
            undefined: both repeats give one and the same answer everywhere).
        run_agreement: Mean pairwise share of samples with the same decision.
        answered: Answers given, over every repeat.
        asked: Answers asked for: samples x repeats.
    """

    name: str
    family: str
    params: dict[str, Any]
    runs: list[list[SampleOutcome]]
    metrics: dict[str, Value] = field(default_factory=dict)
    accuracy_runs: list[float | None] = field(default_factory=list)
    tokens_per_sample: float = 0.0
    calls_per_sample: float = 0.0
    cost_per_sample: float | None = 0.0
    unparsed: int = 0
    errors: int = 0
    run_kappa: float | None = None
    run_agreement: float | None = None
    answered: int = 0
    asked: int = 0

    def to_dict(self, ids: Sequence[str] = ()) -> dict[str, Any]:
        """Plain data; with ``ids``, every outcome by sample id."""
        data: dict[str, Any] = {
            "name": self.name,
            "family": self.family,
            "params": self.params,
            "n": self.metrics["accuracy"].n if "accuracy" in self.metrics else 0,
            "answered": self.answered,
            "asked": self.asked,
            "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
            "accuracy_runs": self.accuracy_runs,
            "tokens_per_sample": self.tokens_per_sample,
            "calls_per_sample": self.calls_per_sample,
            "cost_per_sample": self.cost_per_sample,
            "unparsed": self.unparsed,
            "errors": self.errors,
            "run_kappa": self.run_kappa,
            "run_agreement": self.run_agreement,
        }
        if ids:
            data["outcomes"] = [{i: o.to_dict() for i, o in zip(ids, run, strict=True)} for run in self.runs]
        return data


@dataclass
class CompareResult:
    """What `compare` did.

    Attributes:
        out: The output folder.
        items: The labelled samples, in the order of every configuration's outcomes.
        configs: Every configuration, in the order run.
        matched: ``{debate, debate_tokens, sc, sc_tokens}``: each debate with the
            self-consistency configuration whose tokens per sample are closest.
        notes: One-line notes (left-out configurations, missing plot library).
    """

    out: Path
    items: list[LabelledItem]
    configs: list[ConfigResult] = field(default_factory=list)
    matched: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def exit_code(self) -> int:
        """0 when every configuration answered every sample; 1 when calls failed (run again to retry)."""
        return 1 if any(c.errors for c in self.configs) else 0
