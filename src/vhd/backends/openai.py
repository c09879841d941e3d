"""Backend for any OpenAI-compatible Chat Completions endpoint.

Works with OpenAI, Azure OpenAI, vLLM, SGLang, Ollama, LM Studio and ``transformers serve``
through the official ``openai`` SDK's async client. Configure it in the config file::

    [backends.openai]
    base_url = "http://localhost:8000/v1"   # else $OPENAI_BASE_URL, else OpenAI
    api_key_env = "OPENAI_API_KEY"          # the variable's name, never the key
    max_in_flight = 32
    extra_body = { top_k = 20 }

The SDK's own retries are off: this module retries 429, 408, 409, 5xx, timeouts and
connection errors itself (exponential backoff with full jitter, honouring ``Retry-After``), so
waiting never holds one of the endpoint's ``max_in_flight`` slots. Requests go through the
SDK's raw ``post`` and the JSON is read by `parse_response`, skipping the SDK's pydantic models
(they cost more CPU than the rest of a call). Content-policy rejections come back as
``Output(refused=True)``, not as errors.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import os
import time
import weakref
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vhd.backends.base import Backend, GenerateConfig, Message, Output
from vhd.backends.openai_payload import (
    DEFAULT_BASE_URL,
    PLACEHOLDER_API_KEY,
    OpenAIOptions,
    backoff_delay,
    build_payload,
    encode_payload,
    is_content_policy_error,
    parse_options,
    parse_response,
    parse_retry_after,
)
from vhd.errors import BackendError, BackendUnavailableError, ConfigError
from vhd.redaction import redact_text

if TYPE_CHECKING:
    from openai import APIStatusError, AsyncOpenAI

__all__ = ["OpenAIBackend", "endpoint_semaphore"]

log = logging.getLogger(__name__)

_CHECK_TIMEOUT_S = 5.0
_SEMAPHORES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def endpoint_semaphore(endpoint: str, limit: int) -> asyncio.Semaphore:
    """The semaphore that caps concurrent requests to one endpoint in the running loop.

    Every backend instance talking to the same endpoint shares it; the first caller's
    ``limit`` sizes it.

    Args:
        endpoint: Normalised base URL.
        limit: Slots, used when the semaphore is created.
    """
    per_loop = _SEMAPHORES.setdefault(asyncio.get_running_loop(), {})
    sem = per_loop.get(endpoint)
    if sem is None:
        sem = per_loop[endpoint] = asyncio.Semaphore(limit)
    return sem


def _display_url(url: str) -> str:
    """The URL without user info or query, safe for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}".rstrip("/")


CONNECTIONS_PER_CLIENT = 8
"""Requests are spread round-robin over ceil(max_in_flight / 8) SDK clients. httpx's connection
pool scans its connections on every request and every response; at 64 requests in flight one
pool of 64 connections spent about a sixth of the client's CPU in that scan (BENCHMARKS.md)."""


async def _close_with_loop(clients: Sequence[AsyncOpenAI]) -> AsyncGenerator[None, None]:
    """Suspends once; closing it (`aclose`, or the loop's ``shutdown_asyncgens``) closes the clients."""
    try:
        yield
    finally:
        for client in clients:
            await client.close()


@dataclass
class _Retry:
    """A failed attempt that may succeed later."""

    reason: str
    wait_hint: float | None = None


class OpenAIBackend(Backend):
    """Chat Completions over HTTP with the official SDK (``openai:MODEL``).

    Args:
        model: Model name as the endpoint knows it (Azure: the deployment name).
        options: The ``[backends.openai]`` table; see `OpenAIOptions`.

    Raises:
        ConfigError: Unknown or invalid options.
    """

    name = "openai"
    supports_logprobs = True

    def __init__(self, model: str, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(model, options)
        self.opts: OpenAIOptions = parse_options(self.options)
        self.base_url = self._resolve_base_url()
        self._endpoint = self.base_url.rstrip("/")
        self._clients: list[AsyncOpenAI] = []
        self._turn = itertools.count()
        self._client_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._guard: AsyncGenerator[None, None] | None = None
        self._secrets: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"OpenAIBackend({self.spec!r}, base_url={_display_url(self.base_url)!r})"

    # -- configuration ---------------------------------------------------------------------

    def _resolve_base_url(self) -> str:
        if self.opts.azure:
            url = self.opts.base_url or os.environ.get("AZURE_OPENAI_ENDPOINT")
            if not url:
                raise ConfigError(
                    "[backends.openai] azure = true needs base_url (https://NAME.openai.azure.com) "
                    "or $AZURE_OPENAI_ENDPOINT"
                )
            if not (self.opts.api_version or os.environ.get("OPENAI_API_VERSION")):
                raise ConfigError(
                    '[backends.openai] azure = true needs api_version (e.g. "2024-10-21") or $OPENAI_API_VERSION'
                )
            return url
        return self.opts.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL

    @property
    def is_default_endpoint(self) -> bool:
        """Whether requests go to OpenAI's own API (where a key is mandatory)."""
        return urlsplit(self.base_url).hostname == urlsplit(DEFAULT_BASE_URL).hostname

    def _api_key(self) -> str:
        env = self.opts.key_env
        key = os.environ.get(env, "").strip()
        if key:
            return key
        table = f"[backends.{self.alias or self.name}]"
        if self.opts.api_key_env:
            raise BackendUnavailableError(f"{env} is not set: export it (named by {table} api_key_env)")
        if self.opts.azure:
            raise BackendUnavailableError(f"{env} is not set: export your Azure OpenAI key")
        if self.is_default_endpoint:
            raise BackendUnavailableError(f"{env} is not set: export it, or point {table} base_url at a local server")
        return PLACEHOLDER_API_KEY

    def _make_client(self, ssl_context: Any) -> AsyncOpenAI:
        import httpx2
        import openai

        key = self._api_key()
        self._secrets = (key,) if key != PLACEHOLDER_API_KEY else ()
        timeout = httpx2.Timeout(self.opts.timeout, connect=min(self.opts.timeout, 10.0))
        # One SSL context for every shard: loading the CA bundle costs ~15 ms each time.
        http = openai.DefaultAsyncHttpxClient(verify=ssl_context, timeout=timeout)
        if self.opts.azure:
            version = self.opts.api_version or os.environ["OPENAI_API_VERSION"]
            if "/openai" in urlsplit(self.base_url).path:  # a full base URL, deployment included
                return openai.AsyncAzureOpenAI(
                    base_url=self.base_url,
                    api_version=version,
                    api_key=key,
                    timeout=timeout,
                    max_retries=0,
                    http_client=http,
                )
            return openai.AsyncAzureOpenAI(
                azure_endpoint=self.base_url,
                api_version=version,
                api_key=key,
                timeout=timeout,
                max_retries=0,
                http_client=http,
            )
        return openai.AsyncOpenAI(api_key=key, base_url=self.base_url, max_retries=0, http_client=http)

    async def _client_now(self) -> AsyncOpenAI:
        """The client for the running event loop (a new one if the loop changed).

        A client's connections belong to one loop. Each client is tied to a suspended async
        generator, which `asyncio.run` closes before its loop ends (``shutdown_asyncgens``), so
        a backend used across several ``asyncio.run`` calls without `aclose` still closes its
        sockets cleanly.
        """
        loop = asyncio.get_running_loop()
        if not self._clients or self._client_loop is None or self._client_loop() is not loop:
            import httpx2

            shards = max(1, math.ceil(self.opts.max_in_flight / CONNECTIONS_PER_CLIENT))
            ssl_context = httpx2.create_ssl_context()
            self._clients = [self._make_client(ssl_context) for _ in range(shards)]
            self._client_loop = weakref.ref(loop)
            self._guard = _close_with_loop(self._clients)
            await anext(self._guard)
        return self._clients[next(self._turn) % len(self._clients)]

    def identity(self) -> dict[str, Any]:
        """Spec, endpoint host, image detail and extra body (never the key)."""
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return {
            "spec": self.spec,
            "host": host,
            "image_detail": self.opts.image_detail,
            "extra_body": dict(self.opts.extra_body),
        }

    # -- calls -----------------------------------------------------------------------------

    def _error_text(self, exc: APIStatusError) -> str:
        body = exc.body
        message: Any = body.get("message") if isinstance(body, dict) else None
        if not message:
            message = body if isinstance(body, str) and body else exc.message
        return redact_text(" ".join(str(message).split()), self._secrets)[:300]

    def _on_status(self, exc: APIStatusError) -> Output | _Retry:
        status = exc.status_code
        text = self._error_text(exc)
        url = _display_url(self.base_url)
        if is_content_policy_error(status, exc.body):
            return Output(
                text="",
                refused=True,
                finish_reason="content_filter",
                model=self.model,
                extra={"error": f"HTTP {status}: {text}"},
            )
        code = str(exc.body.get("code") or "") if isinstance(exc.body, dict) else ""
        no_retry = exc.response.headers.get("x-should-retry") == "false" or code == "insufficient_quota"
        if (status in (408, 409, 429) or status >= 500) and not no_retry:
            return _Retry(f"HTTP {status}: {text}", parse_retry_after(exc.response.headers, time.time()))
        env = self.opts.key_env
        if status == 401:
            fix = f"set {env} to a valid key"
            message = f"openai: {url} rejected the API key (HTTP 401: {text}): {fix}"
        elif status == 403:
            message = f"openai: {url} denied access to {self.model!r} (HTTP 403: {text}): check the key's permissions"
        elif status == 404:
            message = (
                f"openai: model {self.model!r} not found at {url} (HTTP 404: {text}): check the model "
                f"name (GET {url}/models lists them) and that base_url ends in /v1"
            )
        elif status == 429:
            message = f"openai: quota exhausted at {url} (HTTP 429: {text}): check your plan and billing"
        else:
            message = f"openai: {url} rejected the request for {self.model!r} (HTTP {status}: {text})"
        raise BackendError(message, retryable=False)

    async def _attempt(self, client: AsyncOpenAI, payload: bytes | dict[str, Any]) -> Output | _Retry:
        import httpx2
        import openai

        # Errors are handled outside the except blocks so that no BackendError we raise
        # carries the SDK exception (which holds the request and its headers) as context.
        failed: APIStatusError | None = None
        try:
            body = {"content": payload} if isinstance(payload, bytes) else {"body": payload}
            response = await client.post(
                "/chat/completions",
                cast_to=httpx2.Response,
                options={"security": {"bearer_auth": True}},
                **body,
            )
        except openai.APIStatusError as exc:
            failed = exc
        except openai.APITimeoutError:
            return _Retry(f"timed out after {self.opts.timeout:g} s")
        except openai.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ else "connection error"
            return _Retry(f"connection failed ({cause})")
        if failed is not None:
            return self._on_status(failed)
        try:
            return parse_response(response.content)
        except BackendError as exc:
            return _Retry(redact_text(str(exc), self._secrets))

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> Output:
        """Send one conversation; retry transient failures; return the answer.

        Returns:
            The output; ``refused`` when the provider rejected the request on content policy.
            ``latency_s`` covers every attempt and backoff but not waiting for a free slot
            (that is ``extra["queue_s"]``); ``extra["attempts"]`` counts HTTP attempts.

        Raises:
            BackendUnavailableError: No API key for OpenAI's own endpoint.
            BackendError: Retries exhausted (``retryable=True``), or a request the endpoint
                will never accept (bad key, unknown model: ``retryable=False``).
        """
        # Azure's client reads the deployment from a dict body's "model", so it gets the dict.
        payload: bytes | dict[str, Any] = (
            build_payload(self.model, messages, config, self.opts)
            if self.opts.azure
            else encode_payload(self.model, messages, config, self.opts)
        )
        client = await self._client_now()
        sem = endpoint_semaphore(self._endpoint, self.opts.max_in_flight)
        start = time.perf_counter()
        queued = 0.0
        attempt = 0
        while True:
            waited = time.perf_counter()
            async with sem:
                queued += time.perf_counter() - waited
                result = await self._attempt(client, payload)
            if isinstance(result, Output):
                result.latency_s = time.perf_counter() - start - queued
                result.model = result.model or self.model
                result.extra["attempts"] = attempt + 1
                result.extra["queue_s"] = queued
                return result
            if attempt >= self.opts.max_retries:
                raise BackendError(
                    f"openai: {result.reason} from {_display_url(self.base_url)}; "
                    f"gave up after {attempt + 1} attempt(s)",
                    retryable=True,
                )
            if result.wait_hint is not None:
                delay = min(result.wait_hint, self.opts.backoff_max)
            else:
                delay = backoff_delay(attempt, self.opts.backoff_base, self.opts.backoff_max)
            log.info(
                "%s: %s; retry %d/%d in %.2f s", self.spec, result.reason, attempt + 1, self.opts.max_retries, delay
            )
            await asyncio.sleep(delay)
            attempt += 1

    async def check(self) -> None:
        """Fail fast: a missing key for OpenAI, or an endpoint that does not answer at all.

        Any HTTP answer from ``GET {base_url}/models`` (even 404 or 500) counts as reachable,
        except 401/403, which mean the key will not work.

        Raises:
            BackendUnavailableError: With a one-line fix.
        """
        import httpx2
        import openai

        client = await self._client_now()
        url = _display_url(self.base_url)
        status = 200
        try:
            await client.get(
                "/models",
                cast_to=httpx2.Response,
                options={"timeout": min(_CHECK_TIMEOUT_S, self.opts.timeout), "security": {"bearer_auth": True}},
            )
        except openai.APIStatusError as exc:
            status = exc.status_code
        except openai.APIConnectionError:
            status = 0
        if status == 0:
            raise BackendUnavailableError(f"cannot reach {url}: is the server running?")
        if status in (401, 403):
            raise BackendUnavailableError(
                f"{url} rejected the API key (HTTP {status}): set {self.opts.key_env} to a valid key"
            )

    async def aclose(self) -> None:
        """Close the HTTP client (a later call opens a new one)."""
        guard, loop_ref = self._guard, self._client_loop
        self._clients, self._client_loop, self._guard = [], None, None
        if guard is not None and loop_ref is not None and loop_ref() is asyncio.get_running_loop():
            await guard.aclose()  # closes the client
