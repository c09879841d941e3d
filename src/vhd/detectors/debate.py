"""The debate annotator itself as a detector (``debate:BACKEND:MODEL``).

Two debaters argue over the sample for a few rounds and a judge decides, exactly as
`vhd annotate` does (`vhd.debate.engine.Debate`); the model of the spec plays every role.
Videos are debated over their numbered frames (video-native), the VHD11K protocol; when the
``config`` file sets ``[video] segments = true``, a video file is judged segment by segment as
`vhd annotate --segments` does (`vhd.debate.segmented.judge_video`: one decode, a screen call
per segment, the debate where it flags) and the prediction carries the segments.

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    config: An annotate config file (TOML/YAML) to start from: per-role models, prompts,
        temperatures, ``[backends.*]`` tables, media settings.
    rounds: Debate rounds (default 2, the paper's).
    icl: In-context examples for the judge (a file or folder; see `vhd.debate.icl`).
    backends: Backend tables, as the config file's ``[backends.*]``, merged over the file's.

The prediction is the judge's verdict: harmful, the score P(yes) where the backend gives
first-token log-probabilities, the judge's text as ``raw``, the VHD11K category of the
judge's "Yes, <category>" reason when the taxonomy recognises it, and the severity level the
judge gave with a harmful verdict (``Verdict.severity``), which ``vhd bench`` compares with
the labels' levels. A video judged by segments gives the video's verdict by the ``[video]`` rule,
its reason (the deciding spans) as ``raw``, the categories of its harmful segments, and every
segment in ``segments`` (``vhd bench`` scores the harmful ones against human spans).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from vhd.detectors.base import Detector, Prediction
from vhd.detectors.vlm import parse_options
from vhd.errors import ConfigError
from vhd.media.encoded import EncodedImage
from vhd.records import Kind, Role, Segment, Status, Verdict

if TYPE_CHECKING:
    from vhd.media.load import MediaSettings


def verdict_segments(verdict: Verdict) -> list[Segment] | None:
    """A debate verdict's segments as a prediction's (``vhd annotate --segments``); None without any."""
    return [Segment.from_dict(s.to_dict()) for s in verdict.segments] if verdict.segments else None


class DebateOptions(BaseModel):
    """Options of the ``debate`` detector."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config: str | None = None
    rounds: int | None = Field(default=None, ge=1, le=10)
    icl: str | None = None
    backends: dict[str, dict[str, Any]] = Field(default_factory=dict)


class DebateDetector(Detector):
    """Debate annotation (two debaters, a judge, optional in-context examples) as a detector."""

    name = "debate"
    video_native = True
    multiclass = False

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model, options)
        from vhd.backends.registry import build_backends
        from vhd.config import load_config
        from vhd.debate.engine import Debate
        from vhd.debate.icl import load_examples, policy_examples
        from vhd.debate.identity import config_identity
        from vhd.debate.prompts import Prompts
        from vhd.media.load import media_settings
        from vhd.policy import load_policy
        from vhd.taxonomy.taxonomy import default_taxonomy

        self.opts: DebateOptions = parse_options(label, self.options, DebateOptions)
        cfg = load_config(self.opts.config)
        debate = cfg.debate.model_copy(update={"rounds": self.opts.rounds}) if self.opts.rounds else cfg.debate
        every_role = dict.fromkeys(("model", "affirmative", "negative", "judge"), model) if model else {}
        cfg = cfg.with_overrides(
            **every_role,
            icl=self.opts.icl,
            backends={**cfg.backends, **self.opts.backends} if self.opts.backends else None,
            debate=debate.model_dump(),
        )
        if model:  # the spec's model plays every role, whatever the file's debaters say
            cfg = cfg.model_copy(update={"debaters": None})
        self.config = cfg
        policy = load_policy(cfg.resolve_path(cfg.policy)) if cfg.policy else None  # the config's `policy` key
        prompts = Prompts(cfg.prompts, Path(cfg.base_dir) if cfg.base_dir else None, policy=policy)
        self.backends = build_backends(cfg)
        try:
            examples = load_examples(cfg.resolve_path(cfg.icl), media_settings(cfg.media)) if cfg.icl else []
            if policy is not None and cfg.policy:
                examples += policy_examples(policy, cfg.resolve_path(cfg.policy).parent, media_settings(cfg.media))
        except ConfigError as exc:
            raise ConfigError(f"detector {label}: {exc}") from None
        self.debate = Debate(self.backends, cfg, prompts, examples)
        self._identity = config_identity(cfg, self.backends, prompts, examples)
        self.taxonomy = default_taxonomy()

    def identity(self) -> dict[str, Any]:
        """The annotation configuration's identity (models, rounds, prompts, examples); never keys.

        Judging videos by segments adds the ``[video]`` settings (cuts, frames, rule, call cap):
        its predictions are not the five frames' ones. Without segments the identity is as before.
        """
        if self.config.video.segments:
            from vhd.debate.segmented import segments_identity

            return {"name": self.name, "debate": self._identity, "video": segments_identity(self.config.video)}
        return {"name": self.name, "debate": self._identity}

    @property
    def judges_video_files(self) -> bool:
        """Whether videos are judged segment by segment from their files (the config's ``[video] segments``)."""
        return self.config.video.segments

    async def check(self) -> None:
        """Check every role's backend once."""
        for backend in {id(b): b for b in self.backends.values()}.values():
            await backend.check()

    async def aclose(self) -> None:
        """Close every backend."""
        for backend in {id(b): b for b in self.backends.values()}.values():
            await backend.aclose()

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Debate one image, or a video's numbered frames."""
        start = time.perf_counter()
        result = await self.debate.run(kind, images)
        judge = [t for t in result.turns if t.role is Role.JUDGE]
        return self._prediction(result.verdict, judge[-1].text if judge else None, result.error, start)

    async def predict_video_file(
        self,
        path: Path,
        settings: MediaSettings | None,
        whole_video: Callable[[], Sequence[EncodedImage]],
    ) -> Prediction:
        """Judge a video file segment by segment (`vhd.debate.segmented.judge_video`), as `vhd annotate --segments`.

        Frames are prepared by ``settings`` (the benchmark's); a video that cannot be segmented is
        debated over ``whole_video``'s frames (read only then), its prediction without segments.

        Raises:
            MediaError: The file is unreadable or damaged.
        """
        from vhd.debate.segmented import WHOLE_VIDEO, judge_video
        from vhd.media.load import MediaSettings

        start = time.perf_counter()

        def frames() -> tuple[list[EncodedImage], None]:
            return list(whole_video()), None

        judged = await judge_video(
            path, self.config.video, settings or MediaSettings(), debate=self.debate, whole_video=frames
        )
        if judged.decided_by == WHOLE_VIDEO:  # one debate over the five frames, as without segments
            judge = [t for t in judged.turns if t.role is Role.JUDGE]
            return self._prediction(judged.verdict, judge[-1].text if judge else None, judged.error, start)
        verdict = judged.verdict
        if verdict.status is Status.UNPARSED:  # a segment undecided: the reason says which
            elapsed = time.perf_counter() - start
            return Prediction(None, score=verdict.score, raw=verdict.reason, error=verdict.reason, latency_s=elapsed)
        return self._prediction(verdict, verdict.reason, judged.error, start, segmented=True)

    def _prediction(
        self, verdict: Verdict, raw: str | None, error: str | None, start: float, *, segmented: bool = False
    ) -> Prediction:
        """A debate verdict as a prediction (``segmented``: the categories come from its harmful segments)."""
        from vhd.taxonomy.answer import parse_answer

        elapsed = time.perf_counter() - start
        if verdict.status is Status.ERROR:
            return Prediction(None, raw=raw, error=error or "debate failed", latency_s=elapsed)
        if verdict.harmful is None:
            snippet = " ".join((raw or "").split())[:120]
            error = (
                "refused by the judge"
                if verdict.status is Status.REFUSED
                else verdict.reason  # "truncated: ... hit the token limit ..."
                if verdict.status is Status.TRUNCATED
                else f"unparsed: {snippet!r}"
            )
            return Prediction(None, score=verdict.score, raw=raw, error=error, latency_s=elapsed)
        reasons = [s.reason for s in verdict.segments if s.harmful] if segmented else [verdict.reason]
        categories: list[str] = []
        if verdict.harmful and not verdict.refused:
            codes = (parse_answer(reason, self.taxonomy).codes for reason in reasons if reason)
            categories = list(dict.fromkeys(code for found in codes for code in found))
        severity = verdict.severity if verdict.harmful else None
        return Prediction(
            verdict.harmful,
            score=verdict.score,
            categories=categories,
            raw=raw,
            latency_s=elapsed,
            segments=verdict_segments(verdict),
            severity=severity,
        )
