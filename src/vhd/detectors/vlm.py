"""A vision-language model asked whether a sample is harmful (``vlm:BACKEND:MODEL``).

Any model backend works: ``vlm:openai:gpt-4o``, ``vlm:hf:/path/to/model``,
``vlm:scripted:demo``. Videos are shown as numbered frames in one conversation
(video-native), as the paper does for models that take several images.

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    prompt: ``short`` (default), ``long`` or ``multiclass`` (vhd's wording), or the paper's own
        appendix E.2 questions ``paper-short``, ``paper-long``, ``paper-multiclass`` (verbatim, cited
        in `vhd.detectors.vlm_prompts`).
    temperature: Sampling temperature (default 0).
    max_tokens: Cap on the answer's tokens (default 20; multiclass 30).
    taxonomy: Taxonomy file for the multi-class prompt (default: VHD11K's ten categories).
    refusal_is_harmful: Count a provider's content-policy refusal as harmful (default false:
        the sample gets an error).
    backends: Backend tables as in the config file's ``[backends.*]`` (endpoint, key variable).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vhd.backends.base import Backend, GenerateConfig, Message, ask
from vhd.detectors.base import Detector, Prediction
from vhd.detectors.vlm_prompts import (
    MULTICLASS_PROMPTS,
    PromptName,
    harmful_probability,
    read_binary,
    read_multiclass,
    render_prompt,
)
from vhd.errors import BackendError, ConfigError
from vhd.media.encoded import EncodedImage
from vhd.records import Kind
from vhd.redaction import redact
from vhd.taxonomy.taxonomy import Taxonomy, load_taxonomy


class VLMOptions(BaseModel):
    """Options of the ``vlm`` detector."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: PromptName = "short"
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1)
    taxonomy: str | None = None
    refusal_is_harmful: bool = False
    backends: dict[str, dict[str, Any]] = Field(default_factory=dict)


def parse_options(label: str, options: Mapping[str, Any], model: type[BaseModel]) -> Any:
    """Validate a detector's options with a pydantic model; one-line `ConfigError` otherwise."""
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "options"
        valid = ", ".join(model.model_fields)
        raise ConfigError(f"detector {label}: bad option {key}: {err['msg']} (valid options: {valid})") from None


class VLMDetector(Detector):
    """Ask one VLM the short, long or multi-class question and read its answer.

    Binary prompts: harmful for "yes", with the score P(yes) from first-token log-probabilities
    where the backend gives them. Multi-class prompt: harmful when a category is named (its code
    goes to ``categories``), unharmful for the unharmful class; the score is 1 - P(unharmful
    code). Unreadable answers give ``harmful=None`` and ``error="unparsed: ..."``.
    """

    name = "vlm"
    video_native = True
    multiclass = False

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model, options)
        if not model:
            raise ConfigError(f"detector {label}: vlm needs a model, e.g. vlm:openai:gpt-4o or vlm:hf:/path/to/model")
        self.opts: VLMOptions = parse_options(label, self.options, VLMOptions)
        self.taxonomy: Taxonomy = load_taxonomy(self.opts.taxonomy)
        self.multiclass = self.opts.prompt in MULTICLASS_PROMPTS  # type: ignore[misc]
        from vhd.backends.registry import create_backend

        self.backend: Backend = create_backend(model, self.opts.backends)
        max_tokens = self.opts.max_tokens or (30 if self.multiclass else 20)
        self.generate_config = GenerateConfig(
            temperature=self.opts.temperature,
            max_tokens=max_tokens,
            logprobs=self.backend.supports_logprobs,
            tag=f"detector:{self.opts.prompt}",
        )

    def identity(self) -> dict[str, Any]:
        """Backend, prompt (its text), decoding settings and taxonomy; never keys."""
        texts = {
            kind.value: render_prompt(self.opts.prompt, kind, 5, self.taxonomy) for kind in (Kind.IMAGE, Kind.VIDEO)
        }
        return {
            "name": self.name,
            "backend": self.backend.identity(),
            "backends": redact(self.opts.backends),
            "prompt": self.opts.prompt,
            "prompt_text": texts,
            "temperature": self.opts.temperature,
            "max_tokens": self.generate_config.max_tokens,
            "taxonomy": self.taxonomy.digest if self.multiclass else None,
            "refusal_is_harmful": self.opts.refusal_is_harmful,
        }

    async def check(self) -> None:
        """Check the backend (credentials, endpoint, local model)."""
        await self.backend.check()

    async def aclose(self) -> None:
        """Close the backend."""
        await self.backend.aclose()

    def messages(self, kind: Kind, images: Sequence[EncodedImage]) -> list[Message]:
        """The conversation sent for one sample: the media, then the question."""
        from vhd.debate.engine import media_parts

        question = render_prompt(self.opts.prompt, kind, len(images), self.taxonomy)
        return [Message("user", (*media_parts(kind, images), question))]

    def read(self, text: str, logprobs: Mapping[str, float] | None) -> Prediction:
        """Turn the model's answer into a prediction."""
        from vhd.debate.score import yes_probability

        if self.multiclass:
            reading = read_multiclass(text, self.taxonomy)
            score = harmful_probability(logprobs, self.taxonomy)
        else:
            reading = read_binary(text, self.taxonomy)
            score = yes_probability(logprobs)
        if reading.harmful is None:
            snippet = " ".join(text.split())[:120]
            return Prediction(None, score=score, raw=text, error=f"unparsed: {snippet!r}")
        return Prediction(reading.harmful, score=score, categories=list(reading.categories), raw=text)

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Ask the model about one image, or a video's numbered frames."""
        start = time.perf_counter()
        out = await ask(self.backend, self.messages(kind, images), self.generate_config)
        if isinstance(out, BackendError):
            return Prediction(None, error=str(out), latency_s=time.perf_counter() - start)
        if out.refused:
            if self.opts.refusal_is_harmful:
                pred = Prediction(True, score=1.0, raw=out.text or None)
            else:
                pred = Prediction(None, raw=out.text or None, error="refused by the provider (content policy)")
        else:
            pred = self.read(out.text, out.first_token_logprobs)
        pred.latency_s = time.perf_counter() - start
        return pred
