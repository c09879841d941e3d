"""Pure parts of the OpenAI-compatible backend: options, request payloads, response parsing.

Nothing here does I/O or imports the OpenAI SDK, so all of it is unit-tested directly. It is
long (about 460 lines) because the options model documents every key of the backend's table in
one place; splitting it would part each option from the code that reads it.
"""

from __future__ import annotations

import email.utils
import json
import random
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from vhd.backends.base import GenerateConfig, Message, Output, validate_table
from vhd.errors import BackendError, ConfigError
from vhd.media.encoded import EncodedImage, EncodedVideo
from vhd.netread import DEFAULT_MAX_REPLY_BYTES, ReplyRefused, parse_json

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PLACEHOLDER_API_KEY = "sk-no-key-required"
"""Sent to non-default endpoints when no key is set: local servers ignore the key."""

MAX_TOP_LOGPROBS = 20
"""OpenAI's limit for ``top_logprobs`` (vLLM's default limit too)."""


class OpenAIOptions(BaseModel):
    """Options of the ``openai`` backend, from the config file's ``[backends.openai]`` table.

    Attributes:
        base_url: Endpoint, e.g. ``http://localhost:8000/v1``; else ``$OPENAI_BASE_URL``, else
            OpenAI's. With ``azure = true``, the Azure resource endpoint
            (``https://NAME.openai.azure.com``; else ``$AZURE_OPENAI_ENDPOINT``).
        base_urls: Several endpoints serving the same model, instead of ``base_url``; requests
            are balanced over them (see `vhd.backends.endpoints`).
        api_key_env: Name of the environment variable holding the key (never the key itself).
            Default ``OPENAI_API_KEY`` (``AZURE_OPENAI_API_KEY`` with ``azure = true``).
        azure: Talk to Azure OpenAI (the model part of the spec is the deployment name).
        api_version: Azure API version (else ``$OPENAI_API_VERSION``).
        timeout: Seconds per HTTP attempt, from sending the request to the last byte of the
            answer (a wall-clock deadline: a server that answers slowly byte by byte is cut off).
        max_reply_bytes: Largest answer read (default 32 MiB); a longer one is refused, reading
            stops at the cap, and the call fails with that reason.
        max_retries: Retries after the first attempt on 429, 408, 409, 5xx, timeouts and
            connection errors.
        backoff_base: First backoff ceiling in seconds; doubles every retry (full jitter).
        backoff_max: Cap on any single wait, including a server's ``Retry-After``.
        max_in_flight: Concurrent requests per endpoint, shared by every backend instance with
            the same base URL in one event loop.
        rpm: Requests per minute allowed to each endpoint (None: no limit), shared by every
            role and task of the process.
        tpm: Tokens per minute allowed to each endpoint (prompt plus completion; estimated
            before a call, corrected with the reported usage after it).
        cooldown: Seconds an endpoint of several is taken out after a connection error,
            timeout, 429 or 5xx (doubling on repeated failures, at most ``backoff_max``).
        image_detail: ``auto``, ``low`` or ``high`` (OpenAI's image ``detail``).
        extra_body: Extra JSON fields sent with every request (e.g. vLLM sampling options);
            they override the fields vhd sets.
        send_seed: Send ``GenerateConfig.seed`` when one is set.
        max_tokens_field: ``max_tokens`` (widest support) or ``max_completion_tokens``
            (required by OpenAI's reasoning models, where it caps hidden reasoning and the
            visible answer together).
        reasoning_effort: ``minimal``, ``low``, ``medium`` or ``high``, sent as
            ``reasoning_effort`` to the models that take it (OpenAI's o-series and gpt-5, vLLM
            with a reasoning parser); None sends nothing.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None
    base_urls: list[str] | None = Field(default=None, min_length=1)
    api_key_env: str | None = None
    azure: bool = False
    api_version: str | None = None
    timeout: float = Field(default=120.0, gt=0)
    max_reply_bytes: int = Field(default=DEFAULT_MAX_REPLY_BYTES, ge=1024)
    max_retries: int = Field(default=6, ge=0)
    backoff_base: float = Field(default=0.5, ge=0)
    backoff_max: float = Field(default=60.0, ge=0)
    max_in_flight: int = Field(default=64, ge=1)
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)
    cooldown: float = Field(default=10.0, ge=0)
    image_detail: Literal["auto", "low", "high"] = "auto"
    extra_body: dict[str, Any] = Field(default_factory=dict)
    send_seed: bool = True
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None

    @property
    def key_env(self) -> str:
        """The environment variable that holds the API key."""
        if self.api_key_env:
            return self.api_key_env
        return "AZURE_OPENAI_API_KEY" if self.azure else "OPENAI_API_KEY"


def parse_options(options: Mapping[str, Any], table: str = "openai") -> OpenAIOptions:
    """Validate a ``[backends.*]`` table into `OpenAIOptions`.

    Args:
        options: The table's keys (``type`` already removed by the registry).
        table: The table's name, for messages.

    Raises:
        ConfigError: Unknown key (listing the valid ones) or a bad value.
    """
    if "api_key" in options:
        raise ConfigError(
            f"[backends.{table}] must not hold an API key: put the key in an environment "
            "variable and name it with api_key_env"
        )
    return validate_table(OpenAIOptions, options, table)


PER_ENDPOINT = frozenset({"base_url", "api_key_env", "api_version", "timeout", "max_in_flight", "rpm", "tpm"})
"""Options each endpoint of a list of tables may set for itself; the others are the first table's."""


def endpoint_options(options: Mapping[str, Any], table: str = "openai") -> list[OpenAIOptions]:
    """The options of every endpoint of a backend, one `OpenAIOptions` each with its ``base_url`` set.

    Args:
        options: A ``[backends.*]`` table (``base_url`` or ``base_urls``), or ``{"endpoints":
            [table, ...]}`` for a list of tables (``[[backends.NAME]]`` in TOML).
        table: The table's name, for messages.

    Raises:
        ConfigError: Invalid options, both ``base_url`` and ``base_urls``, or a later table that
            sets a shared option (anything but ``PER_ENDPOINT``) differently from the first.
    """
    if "endpoints" in options:
        tables = options["endpoints"]
        if set(options) != {"endpoints"} or not isinstance(tables, list) or not tables:
            raise ConfigError(f"[[backends.{table}]] must be a non-empty list of tables")
        parsed = [parse_options(t, table) for t in tables]
        first = parsed[0]
        for i, opts in enumerate(parsed[1:], start=2):
            for name in sorted(opts.model_fields_set - PER_ENDPOINT):
                if getattr(opts, name) != getattr(first, name):
                    raise ConfigError(
                        f"[[backends.{table}]] table {i} sets {name} differently from table 1: only "
                        f"{', '.join(sorted(PER_ENDPOINT))} may differ between endpoints"
                    )
            if opts.base_urls:
                raise ConfigError(f"[[backends.{table}]] table {i}: use base_url in each table, not base_urls")
        if first.base_urls:
            raise ConfigError(f"[[backends.{table}]] table 1: use base_url in each table, not base_urls")
        shared = {name: getattr(first, name) for name in OpenAIOptions.model_fields if name not in PER_ENDPOINT}
        return [first] + [
            OpenAIOptions.model_validate(shared | {n: getattr(o, n) for n in PER_ENDPOINT}) for o in parsed[1:]
        ]
    opts = parse_options(options, table)
    if opts.base_urls is None:
        return [opts]
    if opts.base_url:
        raise ConfigError(f"[backends.{table}] sets both base_url and base_urls: keep one")
    if len(set(opts.base_urls)) != len(opts.base_urls):
        raise ConfigError(f"[backends.{table}] base_urls lists an endpoint twice")
    return [opts.model_copy(update={"base_url": url, "base_urls": None}) for url in opts.base_urls]


# -- request ---------------------------------------------------------------------------------


_NONCE = secrets.token_hex(8)
"""Makes image placeholders impossible to forge from message text."""


Media = EncodedImage | EncodedVideo


def media_part(part: Media, detail: str) -> dict[str, Any]:
    """The content part of an image (``image_url``) or a clip (vLLM's ``video_url``, a base64 MP4 data URL)."""
    if isinstance(part, EncodedVideo):
        return {"type": "video_url", "video_url": {"url": part.data_url}}
    return {"type": "image_url", "image_url": {"url": part.data_url, "detail": detail}}


def _content(message: Message, detail: str, spliced: list[Media] | None = None) -> str | list[Any]:
    if isinstance(message.content, str):
        return message.content
    if message.role != "user":
        if message.images or message.videos:
            raise BackendError(
                f"openai backend: images and videos are only allowed in user messages, not {message.role} ones",
                retryable=False,
            )
        return message.text
    if all(isinstance(p, str) for p in message.content):
        return message.text
    parts: list[Any] = []
    for part in message.content:
        if isinstance(part, str):
            if part:
                parts.append({"type": "text", "text": part})
        elif spliced is not None:
            parts.append(f"\x00{_NONCE}:{len(spliced)}\x00")  # a placeholder, replaced after json.dumps
            spliced.append(part)
        else:
            parts.append(media_part(part, detail))
    return parts


def build_payload(
    model: str,
    messages: Sequence[Message],
    config: GenerateConfig,
    options: OpenAIOptions,
    *,
    _spliced: list[Media] | None = None,
) -> dict[str, Any]:
    """Build a Chat Completions request body.

    Images become ``image_url`` parts holding the image's cached base64 data URL, so a
    sample's images are encoded once however many calls send them. A clip (native video input)
    becomes vLLM's ``video_url`` part, ``{"type": "video_url", "video_url": {"url":
    "data:video/mp4;base64,..."}}``.

    Args:
        model: Model name (or Azure deployment).
        messages: The conversation.
        config: Decoding settings.
        options: Backend options (image detail, seed, token field, extra body).

    Returns:
        The JSON-ready request body.
    """
    payload: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m.role, "content": _content(m, options.image_detail, _spliced)} for m in messages],
        "temperature": config.temperature,
        options.max_tokens_field: config.max_tokens,
    }
    if config.top_p is not None:
        payload["top_p"] = config.top_p
    if config.seed is not None and options.send_seed:
        payload["seed"] = config.seed
    if config.stop:
        payload["stop"] = list(config.stop)
    if options.reasoning_effort is not None:
        payload["reasoning_effort"] = options.reasoning_effort
    if config.logprobs:
        payload["logprobs"] = True
        payload["top_logprobs"] = max(0, min(config.top_logprobs, MAX_TOP_LOGPROBS))
    if options.extra_body:
        payload.update(options.extra_body)
    return payload


_PLACEHOLDER = re.compile(rf'"\\u0000{_NONCE}:(\d+)\\u0000"')


def encode_payload(model: str, messages: Sequence[Message], config: GenerateConfig, options: OpenAIOptions) -> bytes:
    """The request body of `build_payload`, serialised to JSON bytes cheaply.

    Only the text is run through the JSON encoder. Each image's data URL (base64, which needs no
    escaping) is spliced in as it is, so the megabytes of a judge call that carries in-context
    images are copied once rather than scanned character by character on every call.
    """
    images: list[Media] = []
    text_only = json.dumps(build_payload(model, messages, config, options, _spliced=images), separators=(",", ":"))
    detail = json.dumps(options.image_detail)

    def image_part(match: re.Match[str]) -> str:
        part = images[int(match.group(1))]
        if isinstance(part, EncodedVideo):
            return f'{{"type":"video_url","video_url":{{"url":"{part.data_url}"}}}}'
        return f'{{"type":"image_url","image_url":{{"url":"{part.data_url}","detail":{detail}}}}}'

    return _PLACEHOLDER.sub(image_part, text_only).encode()


# -- response --------------------------------------------------------------------------------


def _malformed(why: str) -> BackendError:
    return BackendError(f"malformed response from the model server: {why}", retryable=True)


def _first_token_logprobs(logprobs: Any) -> dict[str, float] | None:
    """Read ``{token: logprob}`` for the first non-whitespace generated token, in either known shape.

    Leading whitespace-only tokens (Llama Guard answers with a blank line first) carry no answer, so
    the first position whose token has visible text is read; the first position when none has.
    """
    if not isinstance(logprobs, dict):
        return None
    content = logprobs.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        entries = [c for c in content if isinstance(c, dict)]
        first = next((c for c in entries if str(c.get("token", "")).strip()), entries[0])
        table: dict[str, float] = {}
        for alt in first.get("top_logprobs") or []:
            if isinstance(alt, dict) and "token" in alt and alt.get("logprob") is not None:
                token, lp = str(alt["token"]), float(alt["logprob"])
                table[token] = max(lp, table.get(token, lp))
        if "token" in first and first.get("logprob") is not None:
            table.setdefault(str(first["token"]), float(first["logprob"]))
        return table or None
    legacy = logprobs.get("top_logprobs")  # completions-style: a {token: logprob} per position
    if isinstance(legacy, list) and legacy and isinstance(legacy[0], dict):
        tokens = logprobs.get("tokens")
        at = 0
        if isinstance(tokens, list):
            at = next((i for i, t in enumerate(tokens[: len(legacy)]) if str(t).strip()), 0)
        row = legacy[at] if isinstance(legacy[at], dict) else legacy[0]
        return {str(t): float(lp) for t, lp in row.items() if lp is not None} or None
    return None


def _cached_tokens(usage: dict[str, Any]) -> int:
    """``usage.prompt_tokens_details.cached_tokens`` (0 when the endpoint does not report it)."""
    details = usage.get("prompt_tokens_details")
    try:
        return max(0, int(details.get("cached_tokens") or 0)) if isinstance(details, dict) else 0
    except (TypeError, ValueError):
        return 0


def _reasoning_tokens(usage: dict[str, Any]) -> int | None:
    details = usage.get("completion_tokens_details")
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if value is None:
        value = usage.get("reasoning_tokens")  # some OpenAI-compatible servers put it at the top
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def parse_response(data: Any, *, max_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> Output:
    """Turn a Chat Completions response body into an `Output`.

    Args:
        data: The decoded JSON body (raw ``bytes``/``str`` are decoded first, by
            `vhd.netread.parse_json`).
        max_bytes: The byte cap the body was read under (bounds the lists and objects decoded).

    Returns:
        The output; ``latency_s`` is left at 0 for the caller to fill. A choice that stopped
        with ``finish_reason == "content_filter"`` (or carries a ``refusal``) is marked
        ``refused``.

    Raises:
        BackendError: (retryable) when the body is not JSON or has no usable choice.
        ReplyRefused: The body is nested too deeply or holds too many lists and objects.
    """
    if isinstance(data, bytes | bytearray | str):
        try:
            data = parse_json(data, max_bytes=max_bytes)
        except ReplyRefused:
            raise
        except ValueError:
            text = data[:80].decode("utf-8", "replace") if isinstance(data, bytes | bytearray) else data[:80]
            raise _malformed(f"not JSON ({text!r})") from None
    try:
        return _read_completion(data)
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:  # a field of the wrong type
        raise _malformed(f"{type(exc).__name__}: {str(exc)[:120]}") from None


def _read_completion(data: Any) -> Output:
    if not isinstance(data, dict):
        raise _malformed(f"expected a JSON object, got {type(data).__name__}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        if isinstance(data.get("error"), dict):
            raise _malformed(f"error in a 200 answer: {str(data['error'].get('message', ''))[:200]}")
        raise _malformed("no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _malformed("choice without a message")
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    text = "" if content is None else str(content)
    finish_reason = choice.get("finish_reason")
    refusal = message.get("refusal")
    raw_usage = data.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    out = Output(
        text=text,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        first_token_logprobs=_first_token_logprobs(choice.get("logprobs")),
        refused=finish_reason == "content_filter" or bool(refusal),
        finish_reason=None if finish_reason is None else str(finish_reason),
        model=str(data.get("model") or ""),
        cached_tokens=_cached_tokens(usage),
        reasoning_tokens=_reasoning_tokens(usage),
    )
    if refusal:
        out.extra["refusal"] = str(refusal)
    return out


# -- errors and retries ------------------------------------------------------------------------

_POLICY_CODES = {"content_policy_violation", "content_filter", "responsibleaipolicyviolation"}
_POLICY_WORDS = re.compile(r"content[ _-]?(policy|management policy|filter)|safety system", re.I)


def is_content_policy_error(status: int, body: Any) -> bool:
    """Whether an error answer is a provider's content-policy rejection (a refusal, not a bug).

    Recognises OpenAI's ``content_policy_violation`` / "safety system" 400s and Azure's
    ``content_filter`` / ``ResponsibleAIPolicyViolation`` errors.
    """
    if status != 400:
        return False
    err = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(err, dict):
        codes = {str(err.get("code") or "").lower(), str(err.get("type") or "").lower()}
        inner = err.get("innererror")
        if isinstance(inner, dict):
            codes.add(str(inner.get("code") or "").lower())
        if codes & _POLICY_CODES:
            return True
        return bool(_POLICY_WORDS.search(str(err.get("message") or "")))
    return bool(_POLICY_WORDS.search(str(err or "")))


def parse_retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds a server asked us to wait, from ``retry-after-ms`` or ``Retry-After``.

    Args:
        headers: Response headers (case-insensitive mapping, or lower-case keys).
        now: Current Unix time, for the HTTP-date form.

    Returns:
        Seconds (never negative), or None when absent or unreadable.
    """

    def get(name: str) -> str | None:
        value = headers.get(name)
        if value is None:
            value = headers.get(name.title())
        return value

    ms = get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now)


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter: uniform in ``[0, min(cap, base * 2**attempt)]``.

    Args:
        attempt: Retries already made (0 for the first retry).
        base: First ceiling in seconds.
        cap: Largest ceiling.
        rng: Random source (tests pass a seeded one).
    """
    ceiling = min(cap, base * (2.0 ** min(attempt, 60)))
    return (rng or random).uniform(0.0, ceiling)
