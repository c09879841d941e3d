"""What the guard-model detectors share: a backend, a crosswalk scheme, one image per question.

`GuardDetector` is the base of ``llamaguard`` and ``llavaguard``: a guard model (or any model told
to act as one) behind a model backend (``NAME:BACKEND:MODEL``) is asked about one image at a time,
its answer is read into a `Prediction`, and the categories it names map to VHD11K codes through a
crosswalk scheme. A subclass gives its options model, prompt and answer reader.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from vhd.backends.base import Backend, GenerateConfig, Message, ask
from vhd.detectors.base import Detector, Prediction
from vhd.detectors.vlm import parse_options
from vhd.errors import BackendError, ConfigError
from vhd.media.encoded import EncodedImage
from vhd.records import Kind


class GuardDetector(Detector):
    """A guard model behind a backend, asked about one image at a time (videos frame by frame).

    Subclasses set `name`, `scheme`, `example` (model specs for the error when none is given),
    `options_type` (a pydantic model with at least `GuardOptions`' fields) and implement
    `messages`, `read` and `prompt_identity`.

    Attributes:
        scheme: The crosswalk scheme of the model's own category codes.
        example: Example specs, e.g. ``"llamaguard:openai:MODEL or llamaguard:hf:MODEL"``.
        options_type: The options model.
        wants_logprobs: Whether to ask the backend for first-token log-probabilities (where it has them).
    """

    video_native = False
    multiclass = True
    scheme: ClassVar[str] = ""
    example: ClassVar[str] = ""
    options_type: ClassVar[type[BaseModel]] = BaseModel
    wants_logprobs: ClassVar[bool] = False

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model, options)
        if not model:
            raise ConfigError(f"detector {label}: {self.name} needs a backend model, e.g. {self.example}")
        self.opts: Any = parse_options(label, self.options, self.options_type)
        from vhd.backends.registry import create_backend
        from vhd.taxonomy.crosswalk import load_crosswalk

        self.crosswalk = load_crosswalk(self.opts.crosswalk)
        if self.scheme not in self.crosswalk.schemes:
            raise ConfigError(
                f"detector {label}: the crosswalk has no {self.scheme!r} scheme; add one or use vhd's own"
            )
        self.backend: Backend = create_backend(model, self.opts.backends)
        self.generate_config = GenerateConfig(
            temperature=self.opts.temperature,
            max_tokens=self.opts.max_tokens,
            logprobs=self.wants_logprobs and self.backend.supports_logprobs,
            tag=f"detector:{self.name}",
        )

    def prompt_identity(self) -> dict[str, Any]:
        """The prompt's part of `identity` (its mode, its text)."""
        return {}

    def identity(self) -> dict[str, Any]:
        """Backend, prompt, decoding settings and the crosswalk's version; never keys."""
        from vhd.redaction import redact

        return {
            "name": self.name,
            "backend": self.backend.identity(),
            "backends": redact(self.opts.backends),
            **self.prompt_identity(),
            "temperature": self.opts.temperature,
            "max_tokens": self.opts.max_tokens,
            "crosswalk": {
                "version": self.crosswalk.version,
                "map": {k: list(v.to) for k, v in sorted(self.crosswalk.schemes[self.scheme].items())},
            },
        }

    async def check(self) -> None:
        """Check the backend (credentials, endpoint, local model)."""
        await self.backend.check()

    async def aclose(self) -> None:
        """Close the backend."""
        await self.backend.aclose()

    @abc.abstractmethod
    def messages(self, images: Sequence[EncodedImage]) -> list[Message]:
        """The conversation for one image."""

    @abc.abstractmethod
    def read(self, text: str, logprobs: Mapping[str, float] | None) -> Prediction:
        """Turn an answer (and its first token's log-probabilities, where asked for) into a prediction."""

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Assess one image (videos arrive frame by frame through `Detector.predict`)."""
        start = time.perf_counter()
        if len(images) != 1:
            return Prediction(None, error=f"{self.name} judges one image at a time, got {len(images)}")
        out = await ask(self.backend, self.messages(images), self.generate_config)
        if isinstance(out, BackendError):
            return Prediction(None, error=str(out), latency_s=time.perf_counter() - start)
        if out.refused:
            pred = Prediction(None, raw=out.text or None, error="refused by the provider (content policy)")
        else:
            pred = self.read(out.text, out.first_token_logprobs)
        pred.latency_s = time.perf_counter() - start
        return pred
