"""LlavaGuard's policy assessment over any model backend (``llavaguard:BACKEND:MODEL``).

``llavaguard:hf:AIML-TUDA/LlavaGuard-v1.2-0.5B-OV-hf`` runs a LlavaGuard checkpoint locally;
``llavaguard:openai:MODEL`` asks any OpenAI-compatible endpoint (a served LlavaGuard, or any VLM
told to follow the same policy). The image is shown with the O1-O9 policy prompt
(`vhd.detectors.llavaguard_policy`); the JSON answer's rating decides (``Unsafe`` is harmful)
and its O-category maps to VHD11K codes through the bench crosswalk (``llavaguard`` scheme).
Unreadable answers give ``harmful=None`` and an error. Videos are judged frame by frame.

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    temperature: Sampling temperature (default 0).
    max_tokens: Cap on the answer's tokens (default 300: the rationale takes room).
    crosswalk: A crosswalk file of the packaged layout (default: vhd's own).
    backends: Backend tables as in the config file's ``[backends.*]``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vhd.backends.base import Backend, GenerateConfig, Message
from vhd.detectors.base import Detector, Prediction
from vhd.detectors.llavaguard_policy import UnreadableAnswer, parse_assessment, policy_prompt
from vhd.detectors.vlm import parse_options
from vhd.errors import BackendError, ConfigError
from vhd.media.encoded import EncodedImage
from vhd.records import Kind

SCHEME = "llavaguard"
"""The crosswalk scheme of LlavaGuard's O1-O9 categories."""


class LlavaGuardOptions(BaseModel):
    """Options of the ``llavaguard`` detector."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=300, ge=16)
    crosswalk: str | None = None
    backends: dict[str, dict[str, Any]] = Field(default_factory=dict)


class LlavaGuardDetector(Detector):
    """Ask a model LlavaGuard's policy question about each image and read its JSON verdict.

    ``labels`` holds ``{"O<n>": 1.0}`` for the category named by an unsafe verdict;
    ``categories`` its VHD11K codes. The score is 1.0 for Unsafe and 0.0 for Safe (the answer
    starts with ``{``, so first-token probabilities say nothing about the rating).
    """

    name = "llavaguard"
    video_native = False
    multiclass = True

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model, options)
        if not model:
            raise ConfigError(
                f"detector {label}: llavaguard needs a backend model, e.g. "
                "llavaguard:hf:AIML-TUDA/LlavaGuard-v1.2-0.5B-OV-hf or llavaguard:openai:MODEL"
            )
        self.opts: LlavaGuardOptions = parse_options(label, self.options, LlavaGuardOptions)
        from vhd.backends.registry import create_backend
        from vhd.taxonomy.crosswalk import load_crosswalk

        self.crosswalk = load_crosswalk(self.opts.crosswalk)
        if SCHEME not in self.crosswalk.schemes:
            raise ConfigError(f"detector {label}: the crosswalk has no {SCHEME!r} scheme; add one or use vhd's own")
        self.backend: Backend = create_backend(model, self.opts.backends)
        self.generate_config = GenerateConfig(
            temperature=self.opts.temperature, max_tokens=self.opts.max_tokens, tag="detector:llavaguard"
        )

    def identity(self) -> dict[str, Any]:
        """Backend, prompt text, decoding settings and the crosswalk's version; never keys."""
        from vhd.redaction import redact

        return {
            "name": self.name,
            "backend": self.backend.identity(),
            "backends": redact(self.opts.backends),
            "prompt_text": policy_prompt(),
            "temperature": self.opts.temperature,
            "max_tokens": self.opts.max_tokens,
            "crosswalk": {
                "version": self.crosswalk.version,
                "map": {k: list(v.to) for k, v in sorted(self.crosswalk.schemes[SCHEME].items())},
            },
        }

    async def check(self) -> None:
        """Check the backend (credentials, endpoint, local model)."""
        await self.backend.check()

    async def aclose(self) -> None:
        """Close the backend."""
        await self.backend.aclose()

    def messages(self, images: Sequence[EncodedImage]) -> list[Message]:
        """The conversation for one image: the image, then the policy prompt (as LlavaGuard was tuned)."""
        return [Message("user", (*images, policy_prompt()))]

    def read(self, text: str) -> Prediction:
        """Turn an answer into a prediction."""
        try:
            verdict = parse_assessment(text)
        except UnreadableAnswer as exc:
            return Prediction(None, raw=text, error=f"unparsed: {exc}")
        if not verdict.unsafe:
            return Prediction(False, score=0.0, raw=text)
        labels = {verdict.category: 1.0} if verdict.category else {}
        categories = self.crosswalk.to_vhd(SCHEME, labels) if labels else []
        return Prediction(True, score=1.0, labels=labels, categories=categories, raw=text)

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Assess one image (videos arrive frame by frame through `Detector.predict`)."""
        start = time.perf_counter()
        if len(images) != 1:
            return Prediction(None, error=f"llavaguard judges one image at a time, got {len(images)}")
        try:
            out = await self.backend.generate(self.messages(images), self.generate_config)
        except BackendError as exc:
            return Prediction(None, error=str(exc), latency_s=time.perf_counter() - start)
        if out.refused:
            pred = Prediction(None, raw=out.text or None, error="refused by the provider (content policy)")
        else:
            pred = self.read(out.text)
        pred.latency_s = time.perf_counter() - start
        return pred
