"""The debate annotator itself as a detector (``debate:BACKEND:MODEL``).

Two debaters argue over the sample for a few rounds and a judge decides, exactly as
`vhd annotate` does (`vhd.debate.engine.Debate`); the model of the spec plays every role.
Videos are debated over their numbered frames (video-native).

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    config: An annotate config file (TOML/YAML) to start from: per-role models, prompts,
        temperatures, ``[backends.*]`` tables, media settings.
    rounds: Debate rounds (default 2, the paper's).
    icl: In-context examples for the judge (a file or folder; see `vhd.debate.icl`).
    backends: Backend tables, as the config file's ``[backends.*]``, merged over the file's.

The prediction is the judge's verdict: harmful, the score P(yes) where the backend gives
first-token log-probabilities, the judge's text as ``raw``, and the VHD11K category of the
judge's "Yes, <category>" reason when the taxonomy recognises it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vhd.detectors.base import Detector, Prediction
from vhd.detectors.vlm import parse_options
from vhd.errors import ConfigError
from vhd.media.encoded import EncodedImage
from vhd.records import Kind, Role, Segment, Status, Verdict


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
        from vhd.debate.icl import load_examples
        from vhd.debate.identity import config_identity
        from vhd.debate.prompts import Prompts
        from vhd.media.load import media_settings
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
        prompts = Prompts(cfg.prompts, Path(cfg.base_dir) if cfg.base_dir else None)
        self.backends = build_backends(cfg)
        try:
            examples = load_examples(cfg.resolve_path(cfg.icl), media_settings(cfg.media)) if cfg.icl else []
        except ConfigError as exc:
            raise ConfigError(f"detector {label}: {exc}") from None
        self.debate = Debate(self.backends, cfg, prompts, examples)
        self._identity = config_identity(cfg, self.backends, prompts, examples)
        self.taxonomy = default_taxonomy()

    def identity(self) -> dict[str, Any]:
        """The annotation configuration's identity (models, rounds, prompts, examples); never keys."""
        return {"name": self.name, "debate": self._identity}

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
        from vhd.taxonomy.answer import parse_answer

        start = time.perf_counter()
        result = await self.debate.run(kind, images)
        verdict = result.verdict
        judge = [t for t in result.turns if t.role is Role.JUDGE]
        raw = judge[-1].text if judge else None
        elapsed = time.perf_counter() - start
        if verdict.status is Status.ERROR:
            return Prediction(None, raw=raw, error=result.error or "debate failed", latency_s=elapsed)
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
        categories: list[str] = []
        if verdict.harmful and verdict.reason and not verdict.refused:
            categories = list(parse_answer(verdict.reason, self.taxonomy).codes)
        return Prediction(
            verdict.harmful,
            score=verdict.score,
            categories=categories,
            raw=raw,
            latency_s=elapsed,
            segments=verdict_segments(verdict),
        )
