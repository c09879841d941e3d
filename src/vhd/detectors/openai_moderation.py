"""OpenAI's moderation endpoint with image input as a harmfulness detector (``openai-moderation``).

Each image (each frame of a video) is sent to ``POST {base_url}/moderations`` with the model
``omni-moderation-latest`` (or the spec's model: ``openai-moderation:omni-moderation-2024-09-26``)
as an ``image_url`` part holding a data URL. The image is harmful when OpenAI flags it, or, with
a ``threshold``, when any category scores at least that. The score is the highest category
score; categories map to VHD11K's codes through the crosswalk's ``openai_moderation``
scheme (sexual -> F, sexual/minors -> E and F, violence -> A, self-harm -> D, hate and
harassment -> G, illicit -> B and A).

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    threshold: Decide by category scores instead of OpenAI's ``flagged`` (default: flagged).
    api_key_env: Environment variable holding the key (default ``OPENAI_API_KEY``).
    base_url: API root (default ``$OPENAI_BASE_URL``, else ``https://api.openai.com/v1``).
    timeout: Seconds per attempt, from sending to the answer's last byte (default 60).
    max_retries: Retries on 429, 5xx and network errors (default 4; the SDK's backoff).

Answers are read through `vhd.netread` (at most 32 MiB, uncompressed, JSON at most 100 levels
deep) and used as plain JSON; a call as a whole ends after ``timeout * (max_retries + 1)`` plus
the SDK's waits between attempts.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vhd.detectors.base import Detector, Prediction, api_key
from vhd.detectors.vlm import parse_options
from vhd.errors import BackendError
from vhd.media.encoded import EncodedImage
from vhd.netread import ReplyRefused, client_limits, parse_json
from vhd.records import Kind
from vhd.redaction import redact_text, redact_url
from vhd.taxonomy.crosswalk import default_crosswalk

DEFAULT_MODEL = "omni-moderation-latest"
DEFAULT_BASE_URL = "https://api.openai.com/v1"


class ModerationOptions(BaseModel):
    """Options of the ``openai-moderation`` detector."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    api_key_env: str = "OPENAI_API_KEY"
    base_url: str | None = None
    timeout: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)


class OpenAIModerationDetector(Detector):
    """OpenAI omni-moderation on images; see the module docstring for the decision rule."""

    name = "openai-moderation"
    video_native = False
    multiclass = True

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model, options)
        self.moderation_model = model or DEFAULT_MODEL
        self.opts: ModerationOptions = parse_options(label, self.options, ModerationOptions)
        self.base_url = self.opts.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def identity(self) -> dict[str, Any]:
        """Moderation model and threshold (never the key)."""
        return {"name": self.name, "model": self.moderation_model, "threshold": self.opts.threshold}

    def _key(self) -> str:
        return api_key(self.opts.api_key_env, self.label, "your OpenAI API key")

    async def check(self) -> None:
        """Fail fast when the API key variable is unset."""
        self._key()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    def _openai(self) -> Any:
        import httpx2
        import openai

        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = openai.AsyncOpenAI(
                api_key=self._key(),
                base_url=self.base_url,
                timeout=self.opts.timeout,
                max_retries=self.opts.max_retries,
                http_client=openai.DefaultAsyncHttpxClient(**client_limits(httpx2, timeout=self.opts.timeout)),
            )
            self._client_loop = loop
        return self._client

    async def moderate(self, image: EncodedImage) -> dict[str, Any]:
        """Send one image; return the first result as plain data (``flagged``, ``category_scores``...).

        Raises:
            BackendError: The call failed (``retryable`` for rate limits, 5xx and network errors).
        """
        import openai

        where = redact_url(self.base_url)
        retries = self.opts.max_retries
        try:
            # The SDK waits at most 8 s between attempts; its raw answer skips the pydantic models.
            async with asyncio.timeout(self.opts.timeout * (retries + 1) + 8.0 * retries):
                response = await self._openai().moderations.with_raw_response.create(
                    model=self.moderation_model,
                    input=[{"type": "image_url", "image_url": {"url": image.data_url}}],
                )
                body = parse_json(response.http_response.content)
        except TimeoutError:  # ReplyTooSlow too
            raise BackendError(f"openai-moderation: timed out reaching {where}", retryable=True) from None
        except ReplyRefused as exc:
            raise BackendError(f"openai-moderation: refused the answer of {where}: {exc}", retryable=True) from None
        except ValueError as exc:
            raise BackendError(f"openai-moderation: the answer of {where} is not JSON ({exc})") from None
        except openai.AuthenticationError:
            raise BackendError(
                f"openai-moderation: the key in ${self.opts.api_key_env} was rejected by {redact_url(self.base_url)}"
            ) from None
        except (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError) as exc:
            message = f"openai-moderation: {type(exc).__name__} from {redact_url(self.base_url)}"
            raise BackendError(message, retryable=True) from None
        except openai.APIStatusError as exc:
            detail = redact_text(str(exc.message))
            message = f"openai-moderation: HTTP {exc.status_code} from {redact_url(self.base_url)}: {detail}"
            raise BackendError(message) from None
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list) or not results or not isinstance(results[0], dict):
            raise BackendError("openai-moderation: the response holds no result")
        return dict(results[0])

    def judge(self, result: Mapping[str, Any]) -> Prediction:
        """Turn one moderation result into a prediction.

        Raises:
            BackendError: A score that is not a number, or categories that are not a mapping.
        """
        try:
            raw_scores, raw_categories = result.get("category_scores") or {}, result.get("categories") or {}
            scores = {str(k): float(v) for k, v in raw_scores.items() if v is not None}
            named = [k for k, v in raw_categories.items() if v]
        except (AttributeError, TypeError, ValueError) as exc:
            raise BackendError(f"openai-moderation: unexpected answer shape ({type(exc).__name__}: {exc})") from None
        if self.opts.threshold is None:
            harmful = bool(result.get("flagged"))
            fired = named
        else:
            fired = [k for k, s in scores.items() if s >= self.opts.threshold]
            harmful = bool(fired)
        categories = default_crosswalk().to_vhd("openai_moderation", {k: scores.get(k, 0.0) for k in fired})
        return Prediction(
            harmful=harmful,
            score=max(scores.values(), default=0.0),
            labels=scores,
            categories=categories if harmful else [],
        )

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Judge one image (videos arrive frame by frame through `Detector.predict`)."""
        start = time.perf_counter()
        if len(images) != 1:
            return Prediction(None, error=f"openai-moderation judges one image at a time, got {len(images)}")
        try:
            pred = self.judge(await self.moderate(images[0]))
        except BackendError as exc:
            return Prediction(None, error=str(exc), latency_s=time.perf_counter() - start)
        pred.latency_s = time.perf_counter() - start
        return pred
