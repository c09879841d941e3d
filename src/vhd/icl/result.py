"""The results of the in-context example search: metrics of an example set, each round, the whole search.

`vhd.icl.search` runs the search and fills them; `vhd.icl.files` writes them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.icl.metrics import ICL_METRICS, rates
from vhd.labels.sets import LabelledItem
from vhd.records import Verdict

METRICS = ICL_METRICS
"""Metrics the search can rank by (`vhd.icl.metrics`; the registry is also the collection of their names)."""


@dataclass(frozen=True)
class Scored:
    """Metrics of one example set on a group of samples.

    Attributes:
        confusion: ``tp``, ``fp``, ``tn``, ``fn`` (an unreadable verdict counts as wrong).
        metrics: ``tpr``, ``tnr``, ``f1``, ``balanced_accuracy``, ``accuracy``.
        n: Samples scored.
        unreadable: Of those, without a harmful/unharmful verdict.
    """

    confusion: dict[str, int]
    metrics: dict[str, float | None]
    n: int
    unreadable: int

    def value(self, metric: str) -> float | None:
        """The metric (a plugin's is computed from the confusion counts); None where it is undefined."""
        return self.metrics[metric] if metric in self.metrics else ICL_METRICS.load(metric)(**self.confusion)

    def rank(self, metric: str) -> float:
        """The metric for ranking example sets: an undefined value ranks below every defined one (-inf).

        Never printed or plotted: `value` is what people see.
        """
        v = self.value(metric)
        return -math.inf if v is None else v

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {"confusion": self.confusion, "metrics": self.metrics, "n": self.n, "unreadable": self.unreadable}


def score(items: Sequence[LabelledItem], preds: dict[str, Verdict]) -> Scored:
    """Score verdicts against human labels; a missing or unreadable verdict counts as wrong."""
    c = {"tp": 0, "fp": 0, "tn": 0, "fn": 0}
    unreadable = 0
    for item in items:
        v = preds.get(item.id)
        said = v.harmful if v is not None else None
        if said is None:
            unreadable += 1
            said = not item.harmful
        c[("tp" if said else "fn") if item.harmful else ("fp" if said else "tn")] += 1
    return Scored(c, rates(**c), len(items), unreadable)


@dataclass
class Round:
    """One round of the search.

    Attributes:
        round: 0 for no examples.
        examples: The example set tried: ``{sample_id, path, answer}`` in order.
        added: Ids added this round.
        config_hash: The annotation configuration of the round.
        scored: The set's metrics on the search samples that are not its examples.
        best_before: The best set so far on the same samples (None in round 0).
        accepted: Whether the set became the best.
    """

    round: int
    examples: list[dict[str, str]]
    added: list[str]
    config_hash: str
    scored: Scored
    best_before: Scored | None = None
    accepted: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain data (written as ``rounds/round_NN.json``)."""
        return {
            "round": self.round,
            "examples": self.examples,
            "added": self.added,
            "config_hash": self.config_hash,
            "scored": self.scored.to_dict(),
            "best_before": self.best_before.to_dict() if self.best_before else None,
            "accepted": self.accepted,
        }


@dataclass
class SearchResult:
    """What `search_icl` did.

    Attributes:
        out: The output folder.
        metric: The metric ranked by.
        rounds: Every round, in order.
        best_round: The round whose example set is best.
        best_examples: Where the best set was written (``examples.csv`` inside).
        stopped: Why the search ended: ``max_rounds``, ``patience``, ``no_mistakes`` or ``budget``.
        holdout: ``{"without": Scored, "with": Scored}`` on the held-out samples (empty without).
        calls: Model calls this invocation made.
        cost: Dollars this invocation spent (0 without prices).
        message: A one-line note on why it stopped early, when it did.
        baseline: No examples, scored on the samples the best set is scored on (Table 4's first row).
    """

    out: Path
    metric: str
    rounds: list[Round] = field(default_factory=list)
    best_round: int = 0
    best_examples: Path | None = None
    stopped: str = "max_rounds"
    holdout: dict[str, Scored] = field(default_factory=dict)
    calls: int = 0
    cost: float = 0.0
    message: str = ""
    baseline: Scored | None = None

    def exit_code(self) -> int:
        """0 when the search finished, 1 when a budget or errors stopped it (run again to resume)."""
        return 1 if self.stopped in ("budget", "errors") else 0
