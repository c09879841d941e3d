"""Hive's visual moderation API as a harmfulness detector (``hive``).

Each image (each frame of a video) is posted to Hive's synchronous task endpoint
(``POST {base_url}/api/v2/task/sync``, ``Authorization: Token <key>``, the image as the
multipart ``media`` field). Hive answers with confidence scores per class
(``status[0].response.output[*].classes[*] = {class, score}``). As in the paper's appendix E.1,
the image is harmful when any class of a harmful subset (the 43 classes listed there) scores at
least ``threshold``; the classes that fire are mapped to VHD11K's categories for multi-class
scoring (through the crosswalk's ``hive`` scheme, `vhd.taxonomy.crosswalk`).

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    threshold: Lowest score that counts as detected (default 0.9).
    labels: Harmful classes (default: the paper's 43; a list or a comma-separated string).
    api_key_env: Environment variable holding the key (default ``HIVE_API_KEY``).
    base_url: API root (default ``https://api.thehive.ai``).
    timeout: Seconds per attempt, from sending to the answer's last byte (default 60).
    max_retries: Retries on 429, 5xx and network errors (default 4).

Answers are read through `vhd.netread`: at most 32 MiB, uncompressed, JSON at most 100 levels
deep; a larger, deeper or compressed answer is that image's error.
    backoff_base: First retry wait ceiling in seconds, doubled each retry (default 1).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vhd.detectors.base import Detector, Prediction, api_key
from vhd.detectors.vlm import parse_options
from vhd.errors import BackendError, ConfigError
from vhd.media.encoded import EncodedImage
from vhd.netread import ReplyRefused, client_limits, parse_json
from vhd.records import Kind
from vhd.redaction import redact_text, redact_url
from vhd.taxonomy.crosswalk import default_crosswalk

HARMFUL_CLASSES: tuple[str, ...] = (
    "general_nsfw",
    "general_suggestive",
    "yes_sexual_activity",
    "yes_realistic_nsfw",
    "yes_sex_toy",
    "yes_female_nudity",
    "yes_male_nudity",
    "yes_bulge",
    "yes_breast",
    "yes_genitals",
    "yes_butt",
    "licking",
    "yes_sexual_intent",
    "yes_undressed",
    "animal_genitalia_and_human",
    "animal_genitalia_only",
    "animated_animal_genitalia",
    "gun_in_hand",
    "animated_gun",
    "knife_in_hand",
    "very_bloody",
    "a_little_bloody",
    "hanging",
    "noose",
    "human_corpse",
    "animated_corpse",
    "yes_emaciated_body",
    "yes_self_harm",
    "yes_fight",
    "yes_animal_abuse",
    "yes_pills",
    "illicit_injectables",
    "yes_smoking",
    "yes_marijuana",
    "yes_gambling",
    "yes_drinking_alcohol",
    "yes_alcohol",
    "animated_alcohol",
    "yes_nazi",
    "yes_terrorist",
    "yes_kkk",
    "yes_confederate",
    "yes_middle_finger",
)
"""The harmful classes listed in the paper's appendix E.1 (its text says 42; it lists these 43)."""

DEFAULT_BASE_URL = "https://api.thehive.ai"
SYNC_PATH = "/api/v2/task/sync"
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class HiveOptions(BaseModel):
    """Options of the ``hive`` detector."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = Field(default=0.9, ge=0.0, le=1.0)
    labels: tuple[str, ...] = HARMFUL_CLASSES
    api_key_env: str = "HIVE_API_KEY"
    base_url: str = DEFAULT_BASE_URL
    timeout: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)
    backoff_base: float = Field(default=1.0, ge=0)

    @field_validator("labels", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list | tuple) and not value:
            raise ValueError("needs at least one class")
        return value


def parse_response(data: Any) -> dict[str, float]:
    """Every class's highest score in a Hive task response.

    Raises:
        ValueError: The response does not have Hive's shape, or reports a failed task.
    """
    try:
        status = data["status"][0]
        code = str(status.get("status", {}).get("code", "0"))
        if code != "0":
            message = status.get("status", {}).get("message", "")
            raise ValueError(f"Hive task failed with code {code}: {message}")
        outputs = status["response"]["output"]
        scores: dict[str, float] = {}
        for output in outputs:
            for entry in output["classes"]:
                name, score = str(entry["class"]), float(entry["score"])
                scores[name] = max(score, scores.get(name, score))
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ValueError(f"unexpected Hive response shape ({type(exc).__name__}: {exc})") from None
    return scores


def _retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        return float(headers["retry-after"])
    except (KeyError, ValueError):
        return None


class HiveDetector(Detector):
    """Hive visual moderation: harmful when a harmful class scores at least ``threshold``.

    The score is the highest score among the harmful classes; ``labels`` holds every class's
    score; ``categories`` the VHD11K codes of the harmful classes that fired, the most
    confident first.
    """

    name = "hive"
    video_native = False
    multiclass = True

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model, options)
        if model:
            raise ConfigError(f"detector {label}: hive takes no model (write `hive`, not `hive:{model}`)")
        self.opts: HiveOptions = parse_options(label, self.options, HiveOptions)
        self.endpoint = self.opts.base_url.rstrip("/") + SYNC_PATH
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def identity(self) -> dict[str, Any]:
        """Threshold and harmful classes (the endpoint and key do not change what Hive answers)."""
        return {"name": self.name, "threshold": self.opts.threshold, "labels": sorted(self.opts.labels)}

    def _key(self) -> str:
        return api_key(self.opts.api_key_env, self.label, "your Hive visual moderation API key")

    async def check(self) -> None:
        """Fail fast when the API key variable is unset."""
        self._key()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    def _http(self) -> Any:
        import httpx

        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(**client_limits(httpx, timeout=self.opts.timeout))
            self._client_loop = loop
        return self._client

    async def classify(self, image: EncodedImage) -> dict[str, float]:
        """Post one image and return every class's score.

        Raises:
            BackendError: The request failed after the retries (``retryable`` when it may pass later).
            BackendUnavailableError: No key.
        """
        import httpx

        headers = {"Authorization": f"Token {self._key()}", "Accept": "application/json"}
        ext = image.mime.split("/")[-1]
        files = {"media": (f"image.{ext}", image.data, image.mime)}
        last = ""
        where = redact_url(self.endpoint)
        for attempt in range(self.opts.max_retries + 1):
            wait: float | None = None
            try:
                async with asyncio.timeout(self.opts.timeout):  # the whole answer, however slowly it comes
                    response = await self._http().post(self.endpoint, headers=headers, files=files)
            except (httpx.HTTPError, TimeoutError) as exc:  # ReplyTooSlow is a TimeoutError
                slow = isinstance(exc, TimeoutError | httpx.TimeoutException)
                last = f"hive: timed out after {self.opts.timeout:g} s" if slow else f"hive: {type(exc).__name__}"
                last += f" reaching {where}"
            except ReplyRefused as exc:
                raise BackendError(f"hive: refused the answer of {where}: {exc}", retryable=True) from None
            else:
                if response.status_code == 200:
                    try:
                        return parse_response(parse_json(response.content))
                    except ValueError as exc:  # not JSON, too deep, too many objects, a bad shape
                        raise BackendError(f"hive: {exc}") from None
                if response.status_code in (401, 403):
                    raise BackendError(
                        f"hive: {response.status_code} from {where}: check the key in ${self.opts.api_key_env}"
                    )
                if response.status_code not in _RETRY_STATUS:
                    raise BackendError(
                        f"hive: HTTP {response.status_code} from {where}: {redact_text(response.text[:200])}"
                    )
                last = f"hive: HTTP {response.status_code} from {where}"
                wait = _retry_after(response.headers)
            if attempt < self.opts.max_retries:
                ceiling = self.opts.backoff_base * 2**attempt
                await asyncio.sleep(wait if wait is not None else random.uniform(0, ceiling))
        raise BackendError(f"{last} (after {self.opts.max_retries + 1} attempts)", retryable=True)

    def judge(self, scores: Mapping[str, float]) -> Prediction:
        """Apply the harmful subset and threshold to Hive's class scores."""
        harmful = {c: s for c, s in scores.items() if c in self.opts.labels}
        fired = sorted((c for c, s in harmful.items() if s >= self.opts.threshold), key=lambda c: -harmful[c])
        categories = default_crosswalk().to_vhd("hive", {c: harmful[c] for c in fired})
        return Prediction(
            harmful=bool(fired),
            score=max(harmful.values(), default=0.0),
            labels=dict(scores),
            categories=categories,
        )

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Judge one image (videos arrive frame by frame through `Detector.predict`)."""
        start = time.perf_counter()
        if len(images) != 1:
            return Prediction(None, error=f"hive judges one image at a time, got {len(images)}")
        try:
            scores = await self.classify(images[0])
        except BackendError as exc:
            return Prediction(None, error=str(exc), latency_s=time.perf_counter() - start)
        pred = self.judge(scores)
        pred.latency_s = time.perf_counter() - start
        return pred
