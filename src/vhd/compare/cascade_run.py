"""The cascade as a ``vhd compare`` configuration, replayed on the comparison's own debate verdicts.

Each stage detector judges every labelled sample once; the cascade rule
(`vhd.annotate.cascade`) is then replayed with the debate configuration's verdicts for the samples
that get through, so the row's accuracy, calls and tokens sit beside the debate it saves calls on.
Without thresholds, `vhd.compare.cascade.pick_thresholds` chooses them on the same labelled set (to
keep accuracy within the tolerance of that debate) and the cost/accuracy curve is written to
``<out>/cascade_curve.csv`` and ``.png``; that row is then tuned on the set it is scored on, and
its ``params`` say so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vhd.aio import run_sync
from vhd.compare.cascade import pick_thresholds, replay, write_curve
from vhd.compare.result import ConfigResult
from vhd.compare.single import SampleOutcome
from vhd.config import AnnotateConfig
from vhd.errors import ConfigError
from vhd.labels.sets import LabelledItem, load_labelled_media


@dataclass(frozen=True)
class CascadeReplay:
    """A ``cascade`` row for `vhd.compare.compare`: detector stages replayed on the first debate's verdicts.

    Attributes:
        stages: Detector specs of the stages, in order (as ``vhd bench`` takes them).
        thresholds: One ``LOW:HIGH`` per stage; without, they are picked on the labelled set to
            keep accuracy within ``tolerance`` of that debate, and the cost/accuracy curve is
            written to ``cascade_curve.csv``/``.png``.
        calibration: A ``vhd bench --calibrate`` file for the stages' scores.
        sets: Stage detector options ``LABEL.key=value``.
        tolerance: Accuracy the picked thresholds may lose (0.01 = one point).
    """

    stages: Sequence[str]
    thresholds: Sequence[str] = ()
    calibration: str | os.PathLike[str] | None = None
    sets: Sequence[str] = ()
    tolerance: float = 0.01


def run_cascade(
    name: str,
    debate: ConfigResult,
    items: Sequence[LabelledItem],
    cfg: AnnotateConfig,
    out: Path,
    *,
    specs: Sequence[str],
    thresholds: Sequence[str] = (),
    calibration: str | os.PathLike[str] | None = None,
    sets: Sequence[str] = (),
    tolerance: float = 0.01,
    say: Callable[[str], None] = lambda _m: None,
) -> ConfigResult:
    """The cascade of ``specs`` before ``debate`` (its first repeat), as a configuration row.

    Raises:
        ConfigError: Bad specs or thresholds (nothing is run).
    """
    from vhd.annotate.cascade import build_cascade, parse_thresholds
    from vhd.bench.calibration import load_calibrations
    from vhd.bench.pipeline import build_detectors
    from vhd.media.load import media_settings

    detectors = build_detectors(list(specs), sets=sets)
    calibrations = load_calibrations(calibration) if calibration is not None else None
    pairs = [parse_thresholds(t) for t in thresholds]
    if pairs and len(pairs) != len(detectors):
        raise ConfigError("give one --cascade-thresholds LOW:HIGH per --cascade stage, or none to have them picked")
    probe = build_cascade(detectors, pairs or [(0.0, 1.0)] * len(detectors), calibrations)
    loaded = load_labelled_media(items, media_settings(cfg.media))

    async def judge() -> list[list[tuple[float | None, int]]]:
        rows: list[list[tuple[float | None, int]]] = []
        try:
            for stage in probe.stages:
                await stage.detector.check()
                row = []
                for sample in loaded:
                    try:
                        pred = await stage.detector.predict(sample.sample.kind, sample.images)
                    except Exception as exc:  # one sample's failure: the replay sends it on
                        from vhd.detectors.base import Prediction

                        pred = Prediction(None, error=str(exc))
                    ok = pred.harmful is not None and pred.error is None
                    row.append((stage.score(pred) if ok else None, stage.calls(sample.sample.kind, sample.images)))
                rows.append(row)
                say(f"{name}: stage {stage.label} judged {len(loaded)} sample(s)")
        finally:
            await probe.aclose()
        return rows

    judged = run_sync(judge())
    scores = [[s for s, _ in row] for row in judged]
    stage_calls = [sum(c for _, c in row) / max(len(row), 1) for row in judged]
    outcomes = debate.runs[0]
    truth = [i.harmful for i in items]
    verdicts = [o.harmful for o in outcomes]
    debate_calls = sum(o.calls for o in outcomes) / max(len(outcomes), 1)
    params: dict[str, Any] = {
        "stages": list(specs),
        "debate": debate.name,
        "calibration": str(calibration) if calibration is not None else None,
        "replayed_from": f"{debate.name} repeat 1 and the stages' predictions",
    }
    if pairs:
        chosen = pairs
        params["thresholds_picked"] = False
    else:
        pick = pick_thresholds(
            scores, verdicts, truth, tolerance=tolerance, stage_calls=stage_calls, debate_calls=debate_calls
        )
        chosen = pick.thresholds
        files = write_curve(pick, out / "cascade_curve", title=f"{name}: calls per sample vs accuracy")
        params.update(thresholds_picked=True, tolerance=tolerance, curve=[str(f) for f in files], pick=pick.to_dict())
    params["thresholds"] = [f"{lo:g}:{hi:g}" for lo, hi in chosen]
    point = replay(chosen, scores, verdicts, truth, stage_calls=stage_calls, debate_calls=debate_calls)
    params["debate_share"] = point.debate_share
    run = []
    for i, o in enumerate(outcomes):
        stage_calls_i = 0
        decided: bool | None = None
        for s, (low, high) in enumerate(chosen):
            score, calls = judged[s][i]
            stage_calls_i += calls
            if score is not None and (score < low or score > high):
                decided = score > high
                break
        if decided is not None:
            run.append(SampleOutcome(decided, None, 0, 0, stage_calls_i))
        else:
            run.append(
                SampleOutcome(
                    o.harmful, o.score, o.prompt_tokens, o.completion_tokens, o.calls + stage_calls_i, o.cost, o.error
                )
            )
    return ConfigResult(name, "cascade", params, [run])
