"""Severity metrics (`SeverityMetrics`): a confusion matrix by level and the quadratic-weighted kappa.

A policy's severity scale is ordered (e.g. ``low`` < ``high``). Where labels give each harmful
sample a level and a detector gives one with its harmful decisions (the debate's judge does,
under a policy with a scale), the two are compared on one ordinal scale whose lowest step is
`NOT_HARMFUL`: an unharmful sample (or decision) sits below every level of the policy. So
calling a ``high`` sample unharmful costs more than calling it ``low``, which is what the
quadratic weights of Cohen's kappa measure.

`SeverityScale` holds the order and reads level names (case-insensitive) or 1-based numbers
(``3``: the third level) the way the judge's parser and a labels file may write them. Without
a scale given, `infer_scale` orders the levels a labels file uses when they are numbers, or
all belong to one of the common ladders (`LADDERS`); otherwise it asks for the scale.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from vhd.bench.metrics.agreement import weighted_kappa_value
from vhd.bench.metrics.values import BOOTSTRAP, Value, mean_value, pandas_module
from vhd.errors import ConfigError

NOT_HARMFUL = "none"
"""The step below a scale's lowest level: an unharmful label or decision."""

NO_LEVEL = "no level"
"""The confusion matrix's last column: no decision, or harmful without a level on the scale."""

LADDERS: tuple[tuple[str, ...], ...] = (
    ("low", "medium", "high", "critical"),
    ("low", "moderate", "high", "critical"),
    ("mild", "moderate", "severe", "extreme"),
)
"""Common level names whose order goes without saying, lowest first (`infer_scale`)."""


@dataclass(frozen=True)
class SeverityScale:
    """An ordered severity scale, lowest level first.

    Attributes:
        levels: The level names, lowest first (distinct, case-insensitively).
    """

    levels: tuple[str, ...]

    def __post_init__(self) -> None:
        folded = [name.strip().casefold() for name in self.levels]
        if not self.levels or any(not f for f in folded):
            raise ConfigError("a severity scale needs at least one named level, e.g. low,high")
        if len(set(folded)) != len(folded) or NOT_HARMFUL in folded:
            raise ConfigError(
                f"severity scale {', '.join(self.levels)}: each level once, and not {NOT_HARMFUL!r} "
                "(the step below the scale): rename the level"
            )

    @classmethod
    def parse(cls, text: str) -> SeverityScale:
        """A scale from ``low,medium,high`` (comma-separated, lowest first).

        Raises:
            ConfigError: An empty or repeated level.
        """
        return cls(tuple(part.strip() for part in text.split(",")))

    def find(self, value: str | None) -> str | None:
        """The scale's name of a level written as a name (any case) or a 1-based number; None when it is not one."""
        if value is None:
            return None
        text = str(value).strip()
        for name in self.levels:
            if name.casefold() == text.casefold():
                return name
        if text.isdigit() and 1 <= int(text) <= len(self.levels):
            return self.levels[int(text) - 1]
        return None

    def steps(self) -> list[str]:
        """`NOT_HARMFUL` then the levels: the ordinal scale the metrics compare on."""
        return [NOT_HARMFUL, *self.levels]


def infer_scale(names: Iterable[str]) -> SeverityScale | None:
    """The order of the severity levels a labels file uses, where it goes without saying.

    Args:
        names: Level names as written (any case).

    Returns:
        None when no name is given; a scale of the numbers ``1..max`` when every name is a
        positive number; the first ladder of `LADDERS` holding every name otherwise.

    Raises:
        ConfigError: The names' order cannot be told: the message asks for ``--severity-scale``.
    """
    given = sorted({str(n).strip() for n in names if str(n).strip()})
    if not given:
        return None
    if all(n.isdigit() and int(n) >= 1 for n in given):
        return SeverityScale(tuple(str(k) for k in range(1, max(int(n) for n in given) + 1)))
    folded = {n.casefold() for n in given}
    for ladder in LADDERS:
        if folded <= set(ladder):
            return SeverityScale(ladder)
    raise ConfigError(
        f"the labels' severity levels ({', '.join(given[:6])}) have no order vhd can tell: "
        "pass --severity-scale with every level, lowest first (e.g. --severity-scale low,high)"
    )


@dataclass
class SeverityResult:
    """A detector's severity levels against the labels' on one group of samples.

    Attributes:
        steps: The ordinal scale, `NOT_HARMFUL` first, then the policy's levels.
        confusion: Rows: the label's step; columns: the detector's step, then `NO_LEVEL`.
        kappa: Quadratic-weighted Cohen's kappa on the samples where both give a step.
        exact: Share of labelled samples whose step the detector gave exactly (`NO_LEVEL` counts wrong).
        n: Samples with a labelled step (unharmful, or harmful with a level).
        answered: Of those, samples the detector gave a step for.
    """

    steps: list[str]
    confusion: list[list[int]]
    kappa: Value
    exact: Value
    n: int
    answered: int

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "steps": self.steps,
            "columns": [*self.steps, NO_LEVEL],
            "confusion": self.confusion,
            "kappa_quadratic": self.kappa.to_dict(),
            "exact": self.exact.to_dict(),
            "n": self.n,
            "answered": self.answered,
        }

    def to_rows(self) -> list[dict[str, Any]]:
        """The kappa and the exact agreement as metric rows."""
        return [
            {"metric": "severity_kappa_quadratic", **self.kappa.to_dict()},
            {"metric": "severity_exact", **self.exact.to_dict()},
        ]

    def to_pandas(self) -> Any:
        """The confusion matrix as a pandas DataFrame (rows: labels; columns: detector; needs pandas)."""
        return pandas_module().DataFrame(self.confusion, index=self.steps, columns=[*self.steps, NO_LEVEL])


class SeverityMetrics:
    """Accumulates (labelled step, detector's step) pairs and computes a `SeverityResult`.

    Args:
        scale: The policy's severity scale.
        resamples: Bootstrap resamples (0: no intervals).
        seed: Bootstrap seed.
    """

    def __init__(self, scale: SeverityScale, *, resamples: int = BOOTSTRAP, seed: int = 0) -> None:
        self.scale = scale
        self.steps = scale.steps()
        self.resamples, self.seed = resamples, seed
        self.truth: list[int] = []
        self.pred: list[int | None] = []

    def update(self, truth: Sequence[str | None], predicted: Sequence[str | None]) -> SeverityMetrics:
        """Add a batch of steps (`NOT_HARMFUL` or a level name; None: unknown).

        A sample whose labelled step is None (harmful without a level) is left out; a predicted
        step that is None or not on the scale goes to the `NO_LEVEL` column.
        """
        if len(truth) != len(predicted):
            raise ValueError("truth and predicted must have the same length")
        for t, p in zip(truth, predicted, strict=True):
            row = self._step(t)
            if row is not None:
                self.truth.append(row)
                self.pred.append(self._step(p))
        return self

    def _step(self, value: str | None) -> int | None:
        if value is None:
            return None
        if value == NOT_HARMFUL:
            return 0
        name = self.scale.find(value)
        return None if name is None else self.steps.index(name)

    def compute(self) -> SeverityResult:
        """The confusion matrix, the weighted kappa and the exact agreement."""
        width = len(self.steps)
        confusion = [[0] * (width + 1) for _ in range(width)]
        for t, p in zip(self.truth, self.pred, strict=True):
            confusion[t][width if p is None else p] += 1
        pairs = [(t, p) for t, p in zip(self.truth, self.pred, strict=True) if p is not None]
        kappa = weighted_kappa_value(
            [t for t, _ in pairs], [p for _, p in pairs], width, resamples=self.resamples, seed=self.seed
        )
        exact = mean_value(
            [float(t == p) for t, p in zip(self.truth, self.pred, strict=True)], self.resamples, self.seed
        )
        return SeverityResult(self.steps, confusion, kappa, exact, len(self.truth), len(pairs))
