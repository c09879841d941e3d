"""The cascade: cheap detectors settle the clear samples, the debate gets only the uncertain ones.

``vhd annotate --cascade SPEC --cascade-thresholds LOW:HIGH`` (each repeatable, in the same
order) puts detector stages before the debate. Each stage judges the sample; it decides when its
prediction has a decision (``harmful`` not None, no error) and its score, raw or calibrated
(``--cascade-calibration``, the JSON ``vhd bench --calibrate`` writes), lies outside
``[low, high]``: below ``low`` the sample is unharmful, above ``high`` harmful. Refused, unparsed
and failed predictions, and scores inside the band, go on to the next stage and finally to the
debate. Every verdict records which stage decided it (``Annotation.decided_by``: the stage's
label, or ``debate``), with the stage's score and model in its reason; the run records the
stages in order (label, model, thresholds, calibration) under ``cascade`` in its configuration.

Calls: a stage costs one call per image, or per frame for a detector that judges videos frame by
frame; they are counted in the run's usage (with no tokens: detectors do not report any).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vhd.errors import ConfigError
from vhd.records import Annotation, Kind, Usage, Verdict

if TYPE_CHECKING:
    from vhd.detectors.base import Detector, Prediction
    from vhd.media.encoded import EncodedImage

DEBATE = "debate"
"""``decided_by`` of a sample that went through every stage to the debate."""


@dataclass(frozen=True)
class Stage:
    """One stage of a cascade.

    Attributes:
        detector: The detector (its ``label`` names the stage).
        low: Below this score the stage decides unharmful.
        high: Above this score the stage decides harmful.
        calibration: Maps the raw score to a calibrated one (None: the raw score is used).
        calibration_info: The calibration's parameters, for the configuration's identity.
    """

    detector: Detector
    low: float
    high: float
    calibration: Callable[[float], float] | None = None
    calibration_info: Mapping[str, Any] | None = None

    @property
    def label(self) -> str:
        """The stage's name: its detector's label."""
        return self.detector.label

    @property
    def model(self) -> str:
        """The stage's detector spec, ``NAME[:MODEL]``."""
        return self.detector.name + (f":{self.detector.model}" if self.detector.model else "")

    def score(self, pred: Prediction) -> float | None:
        """The score the thresholds apply to: calibrated when a calibration is given."""
        if pred.score is None:
            return None
        return self.calibration(pred.score) if self.calibration is not None else pred.score

    def decide(self, pred: Prediction) -> bool | None:
        """True (harmful) or False (unharmful) when this stage decides; None when the sample goes on."""
        if pred.harmful is None or pred.error is not None:
            return None
        score = self.score(pred)
        if score is None:
            return None
        if score < self.low:
            return False
        if score > self.high:
            return True
        return None

    def calls(self, kind: Kind, images: Sequence[EncodedImage]) -> int:
        """Model calls this stage makes on a sample (one per frame when it judges frames alone)."""
        return len(images) if kind is Kind.VIDEO and not self.detector.video_native else 1

    def identity(self) -> dict[str, Any]:
        """What makes this stage's decisions what they are."""
        return {
            "label": self.label,
            "detector": self.detector.identity(),
            "low": self.low,
            "high": self.high,
            "calibration": dict(self.calibration_info) if self.calibration_info is not None else None,
        }


@dataclass
class StageDecision:
    """A stage's decision on one sample.

    Attributes:
        label: The stage that decided.
        model: The stage's detector spec (``NAME[:MODEL]``).
        harmful: The decision.
        score: The score the thresholds were applied to.
        raw: The detector's raw answer, when it has one.
        categories: Taxonomy codes the detector named.
    """

    label: str
    model: str
    harmful: bool
    score: float
    raw: str | None = None
    categories: list[str] = field(default_factory=list)

    def reason(self) -> str:
        """The verdict's reason: which stage decided, with its model and score."""
        return f"decided by cascade stage {self.label} ({self.model}), score {self.score:.4f}"


def run_stage_models(run_config: Mapping[str, Any]) -> dict[str, str]:
    """Stage label to detector spec, from a run's stored configuration (`Cascade.record`).

    Empty for a run without a cascade, and for a cascade run recorded before its stages were stored
    (read its verdicts' reasons with `stage_model` then).
    """
    cascade = run_config.get("cascade")
    stages = cascade.get("stages") if isinstance(cascade, Mapping) else None
    if not isinstance(stages, list):
        return {}
    out = {}
    for stage in stages:
        if isinstance(stage, Mapping) and isinstance(stage.get("label"), str) and isinstance(stage.get("model"), str):
            out[stage["label"]] = stage["model"]
    return out


def stage_model(reason: str, label: str) -> str | None:
    """The detector spec a stage's verdict reason names (`StageDecision.reason`), or None for another reason.

    For runs recorded before the cascade's stages were stored with the run (`run_stage_models`).
    """
    head = f"decided by cascade stage {label} ("
    end = reason.rfind("), score ")
    return reason[len(head) : end] if reason.startswith(head) and end >= len(head) else None


@dataclass
class CascadeOutcome:
    """What the stages did with one sample.

    Attributes:
        decision: The deciding stage's decision; None when the sample goes to the debate.
        calls: Stage calls made on the sample.
        notes: ``label: why it went on`` for each stage that did not decide.
    """

    decision: StageDecision | None
    calls: int = 0
    notes: list[str] = field(default_factory=list)


class Cascade:
    """Detector stages run in order before the debate (see the module docstring)."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        if not stages:
            raise ConfigError("a cascade needs at least one stage: add --cascade SPEC")
        labels = [s.label for s in stages]
        if len(set(labels)) != len(labels) or DEBATE in labels:
            raise ConfigError(
                f"cascade stage labels must be distinct and not {DEBATE!r}: "
                "name them, e.g. --cascade guard=llamaguard:..."
            )
        self.stages = list(stages)

    def identity(self) -> dict[str, Any]:
        """Every stage's identity, in order (part of the run's configuration hash)."""
        return {"stages": [s.identity() for s in self.stages]}

    def record(self) -> dict[str, Any]:
        """The stages as the run records them (``cascade`` in its stored configuration; `run_stage_models` reads it)."""
        return {
            "stages": [
                {
                    "label": s.label,
                    "model": s.model,
                    "low": s.low,
                    "high": s.high,
                    "calibration": dict(s.calibration_info) if s.calibration_info is not None else None,
                }
                for s in self.stages
            ]
        }

    async def check(self) -> None:
        """Check every stage's detector before any work."""
        for stage in self.stages:
            await stage.detector.check()

    async def aclose(self) -> None:
        """Close every stage's detector."""
        for stage in self.stages:
            await stage.detector.aclose()

    def most_calls(self, kind: Kind, images: int) -> int:
        """The calls the stages make at most on a sample of ``images`` frames (every stage, none deciding)."""
        return sum(images if kind is Kind.VIDEO and not s.detector.video_native else 1 for s in self.stages)

    async def run(self, kind: Kind, images: Sequence[EncodedImage]) -> CascadeOutcome:
        """Run the stages in order until one decides."""
        outcome = CascadeOutcome(None)
        for stage in self.stages:
            try:
                pred = await stage.detector.predict(kind, images)
            except Exception as exc:  # one sample's failure: it goes on to the next stage
                from vhd.detectors.base import Prediction

                pred = Prediction(None, error=f"{type(exc).__name__}: {exc}".splitlines()[0])
            outcome.calls += stage.calls(kind, images)
            harmful = stage.decide(pred)
            if harmful is None:
                outcome.notes.append(f"{stage.label}: {_why_not(stage, pred)}")
                continue
            score = stage.score(pred)
            assert score is not None
            outcome.decision = StageDecision(stage.label, stage.model, harmful, score, pred.raw, list(pred.categories))
            return outcome
        return outcome


def _why_not(stage: Stage, pred: Prediction) -> str:
    if pred.error is not None:
        return pred.error.splitlines()[0][:160]
    if pred.harmful is None:
        return "no decision"
    score = stage.score(pred)
    return "no score" if score is None else f"score {score:.4f} inside [{stage.low}, {stage.high}]"


def parse_thresholds(text: str) -> tuple[float, float]:
    """``"LOW:HIGH"`` as two floats with 0 <= LOW <= HIGH <= 1.

    Raises:
        ConfigError: Malformed or out of range.
    """
    low_s, colon, high_s = text.partition(":")
    try:
        low, high = float(low_s), float(high_s)
    except ValueError:
        low = high = float("nan")
    if not colon or not (0.0 <= low <= high <= 1.0):
        raise ConfigError(f"--cascade-thresholds {text!r} must be LOW:HIGH with 0 <= LOW <= HIGH <= 1, e.g. 0.1:0.9")
    return low, high


def build_cascade(
    detectors: Sequence[Detector],
    thresholds: Sequence[str | tuple[float, float]],
    calibrations: Mapping[str, Any] | None = None,
) -> Cascade:
    """A cascade from built detectors, one ``LOW:HIGH`` per detector, and optional calibrations.

    Args:
        detectors: The stages' detectors, in order.
        thresholds: ``"LOW:HIGH"`` strings or ``(low, high)`` pairs, same order.
        calibrations: By stage label, callables mapping a raw score to a calibrated one (``vhd
            bench --calibrate``'s calibrations, loaded with `vhd.bench.calibration.load_calibrations`);
            their ``to_dict()`` goes into the configuration's identity.

    Raises:
        ConfigError: Counts differ, a bad threshold, or a calibration for no stage.
    """
    if len(thresholds) != len(detectors):
        raise ConfigError(
            f"give one --cascade-thresholds LOW:HIGH per --cascade stage, in the same order "
            f"({len(detectors)} stage(s), {len(thresholds)} threshold pair(s))"
        )
    cals = dict(calibrations or {})
    labels = [d.label for d in detectors]
    stray = sorted(set(cals) - set(labels))
    if stray and not set(cals) & set(labels):
        raise ConfigError(
            f"--cascade-calibration has no calibration for any stage (it has {', '.join(sorted(cals))}; "
            f"stages: {', '.join(labels)}): calibrate with `vhd bench --calibrate` using the same labels"
        )
    stages = []
    for det, pair in zip(detectors, thresholds, strict=True):
        low, high = parse_thresholds(pair) if isinstance(pair, str) else (float(pair[0]), float(pair[1]))
        if not 0.0 <= low <= high <= 1.0:
            raise ConfigError(f"stage {det.label}: thresholds must satisfy 0 <= low <= high <= 1, got {low}:{high}")
        cal = cals.get(det.label)
        info = cal.to_dict() if cal is not None and hasattr(cal, "to_dict") else None
        stages.append(Stage(det, low, high, cal, info))
    return Cascade(stages)


def stage_annotation(
    outcome: CascadeOutcome, sample_id: str, run_id: str, config_hash: str, started: float
) -> Annotation:
    """The annotation of a sample a stage decided: the stage's decision and score, no debate turns."""
    import time

    decision = outcome.decision
    if decision is None:
        raise ValueError("no stage decided this sample")
    return Annotation(
        sample_id=sample_id,
        run_id=run_id,
        config_hash=config_hash,
        verdict=Verdict(harmful=decision.harmful, reason=decision.reason(), score=decision.score),
        usage=Usage(calls=outcome.calls),
        started_at=started,
        finished_at=time.time(),
        decided_by=decision.label,
    )
