"""Backend for any OpenAI-compatible Chat Completions endpoint, or several serving one model.

Works with OpenAI, Azure OpenAI, vLLM, SGLang, Ollama, LM Studio and ``transformers serve``
through the official ``openai`` SDK's async client. Configure it in the config file::

    [backends.openai]
    base_url = "http://localhost:8000/v1"   # else $OPENAI_BASE_URL, else OpenAI
    api_key_env = "OPENAI_API_KEY"          # the variable's name, never the key
    max_in_flight = 32
    extra_body = { top_k = 20 }

Several endpoints serving the same model take ``base_urls = [...]`` (same options for each), or
a list of tables (``[[backends.NAME]]``, each with its own ``base_url``, ``api_key_env``,
``max_in_flight``, ``rpm``, ``tpm``...). Each attempt goes to the endpoint with the fewest
requests in flight; one that fails (connection error, timeout, 429, 5xx) cools down and the
request is retried on another at once; ``rpm``/``tpm`` limits hold per endpoint and process
(`vhd.backends.endpoints`; a request waiting for a limit keeps its slot on that endpoint, so the
balancer sends new requests elsewhere). Per-endpoint figures are in `OpenAIBackend.endpoint_stats`.

The SDK's own retries are off: this module retries 429, 408, 409, 5xx, timeouts and
connection errors itself (exponential backoff with full jitter, honouring ``Retry-After``), so
waiting never holds one of the endpoint's ``max_in_flight`` slots. Requests go through the
SDK's raw ``post`` and the JSON is read by `parse_response`, skipping the SDK's pydantic models
(they cost more CPU than the rest of a call). Content-policy rejections come back as
``Output(refused=True)``, not as errors.

This module is long (about 490 lines) on purpose: it is the SDK-facing I/O of the backend (clients
per endpoint, one attempt, mapping HTTP errors, retries, checks), one unit that reads best whole;
what needs no I/O lives in `vhd.backends.openai_payload` and `vhd.backends.endpoints`.
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
from vhd.backends.endpoints import Endpoint, EndpointPool, endpoint_state, estimate_tokens
from vhd.backends.openai_payload import (
    DEFAULT_BASE_URL,
    PLACEHOLDER_API_KEY,
    OpenAIOptions,
    backoff_delay,
    build_payload,
    encode_payload,
    endpoint_options,
    is_content_policy_error,
    parse_response,
    parse_retry_after,
)
from vhd.errors import BackendError, BackendUnavailableError, ConfigError
from vhd.netread import ReplyRefused, client_limits
from vhd.redaction import redact_text, redact_url, remember_secret, remember_secrets_in

if TYPE_CHECKING:
    from openai import APIStatusError, AsyncOpenAI

__all__ = ["OpenAIBackend"]

log = logging.getLogger(__name__)

_CHECK_TIMEOUT_S = 5.0


def _display_url(url: str) -> str:
    """The URL without user info, query or key-like path segments, safe for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return redact_url(f"{parts.scheme}://{host}{parts.path}".rstrip("/"))


CONNECTIONS_PER_CLIENT = 8
"""Requests are spread round-robin over ceil(max_in_flight / 8) SDK clients per endpoint. httpx's
connection pool scans its connections on every request and every response; at 64 requests in
flight one pool of 64 connections spent about a sixth of the client's CPU in that scan
(BENCHMARKS.md)."""


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


@dataclass
class _Target:
    """One endpoint's options, resolved URL and SDK clients (in `Endpoint.client`)."""

    opts: OpenAIOptions
    base_url: str
    clients: list[AsyncOpenAI]
    turn: itertools.count[int]

    def client(self) -> AsyncOpenAI:
        return self.clients[next(self.turn) % len(self.clients)]


class OpenAIBackend(Backend):
    """Chat Completions over HTTP with the official SDK (``openai:MODEL``).

    Args:
        model: Model name as the endpoint knows it (Azure: the deployment name).
        options: The ``[backends.openai]`` table (see `OpenAIOptions`), or ``{"endpoints":
            [table, ...]}`` for a list of tables, one per endpoint.

    Raises:
        ConfigError: Unknown or invalid options.
    """

    name = "openai"
    supports_logprobs = True
    multi_endpoint = True
    takes_video = True  # vLLM's video_url part; whether the served model takes it, the server says

    def __init__(self, model: str, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(model, options)
        self.endpoint_opts = endpoint_options(self.options)
        self.opts: OpenAIOptions = self.endpoint_opts[0]
        self.targets: list[_Target] = []
        endpoints: list[Endpoint] = []
        remember_secrets_in(self.options)  # keys in base_url (user info, path, query), extra_body...
        for opts in self.endpoint_opts:
            url = self._resolve_base_url(opts)
            remember_secrets_in(url)  # also when it came from $OPENAI_BASE_URL / $AZURE_OPENAI_ENDPOINT
            target = _Target(opts, url, [], itertools.count())
            key = f"{url.rstrip('/')}#{opts.key_env}"
            state = endpoint_state(key, opts.rpm, opts.tpm)
            endpoints.append(Endpoint(_display_url(url), opts.max_in_flight, state, client=target))
            self.targets.append(target)
        names = [e.name for e in endpoints]
        if len(set(names)) != len(names):
            raise ConfigError(f"[backends.{self.name}] names an endpoint twice: {', '.join(names)}")
        self.base_url = self.targets[0].base_url
        self.pool = EndpointPool(endpoints, cooldown=self.opts.cooldown, cooldown_max=max(self.opts.backoff_max, 1.0))
        self._client_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._guard: AsyncGenerator[None, None] | None = None
        self._secrets: tuple[str, ...] = ()

    def __repr__(self) -> str:
        urls = ", ".join(e.name for e in self.pool.endpoints)
        return f"OpenAIBackend({self.spec!r}, base_url={urls!r})"

    # -- configuration ---------------------------------------------------------------------

    @staticmethod
    def _resolve_base_url(opts: OpenAIOptions) -> str:
        if opts.azure:
            url = opts.base_url or os.environ.get("AZURE_OPENAI_ENDPOINT")
            if not url:
                raise ConfigError(
                    "[backends.openai] azure = true needs base_url (https://NAME.openai.azure.com) "
                    "or $AZURE_OPENAI_ENDPOINT"
                )
            if not (opts.api_version or os.environ.get("OPENAI_API_VERSION")):
                raise ConfigError(
                    '[backends.openai] azure = true needs api_version (e.g. "2024-10-21") or $OPENAI_API_VERSION'
                )
            return url
        return opts.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL

    @property
    def is_default_endpoint(self) -> bool:
        """Whether requests go to OpenAI's own API (where a key is mandatory)."""
        return urlsplit(self.base_url).hostname == urlsplit(DEFAULT_BASE_URL).hostname

    def _api_key(self, target: _Target) -> str:
        opts = target.opts
        env = opts.key_env
        key = os.environ.get(env, "").strip()
        if key:
            return key
        table = f"[backends.{self.alias or self.name}]"
        if opts.api_key_env:
            raise BackendUnavailableError(f"{env} is not set: export it (named by {table} api_key_env)")
        if opts.azure:
            raise BackendUnavailableError(f"{env} is not set: export your Azure OpenAI key")
        if urlsplit(target.base_url).hostname == urlsplit(DEFAULT_BASE_URL).hostname:
            raise BackendUnavailableError(f"{env} is not set: export it, or point {table} base_url at a local server")
        return PLACEHOLDER_API_KEY

    def _make_client(self, target: _Target, key: str, ssl_context: Any) -> AsyncOpenAI:
        import httpx2
        import openai

        opts, base_url = target.opts, target.base_url
        timeout = httpx2.Timeout(opts.timeout, connect=min(opts.timeout, 10.0))
        # Every reply is read under a deadline and a byte cap (`vhd.netread`), the SDK's reads too.
        limits = client_limits(httpx2, timeout=opts.timeout, max_bytes=opts.max_reply_bytes)
        limits["timeout"] = timeout
        # One SSL context for every shard: loading the CA bundle costs ~15 ms each time.
        http = openai.DefaultAsyncHttpxClient(verify=ssl_context, **limits)
        if opts.azure:
            version = opts.api_version or os.environ["OPENAI_API_VERSION"]
            if "/openai" in urlsplit(base_url).path:  # a full base URL, deployment included
                return openai.AsyncAzureOpenAI(
                    base_url=base_url,
                    api_version=version,
                    api_key=key,
                    timeout=timeout,
                    max_retries=0,
                    http_client=http,
                )
            return openai.AsyncAzureOpenAI(
                azure_endpoint=base_url,
                api_version=version,
                api_key=key,
                timeout=timeout,
                max_retries=0,
                http_client=http,
            )
        # The SDK's own timeout (600 s) would override the client's: pass ours.
        return openai.AsyncOpenAI(api_key=key, base_url=base_url, timeout=timeout, max_retries=0, http_client=http)

    async def _clients_now(self) -> None:
        """Open the SDK clients of every endpoint for the running event loop (anew if the loop changed).

        A client's connections belong to one loop. The clients are tied to a suspended async
        generator, which `asyncio.run` closes before its loop ends (``shutdown_asyncgens``), so
        a backend used across several ``asyncio.run`` calls without `aclose` still closes its
        sockets cleanly.
        """
        loop = asyncio.get_running_loop()
        if self._client_loop is not None and self._client_loop() is loop and self.targets[0].clients:
            return
        import httpx2

        keys = [self._api_key(target) for target in self.targets]
        self._secrets = tuple(k for k in dict.fromkeys(keys) if k != PLACEHOLDER_API_KEY)
        remember_secret(*self._secrets)
        ssl_context = httpx2.create_ssl_context()
        every: list[AsyncOpenAI] = []
        for target, key in zip(self.targets, keys, strict=True):
            shards = max(1, math.ceil(target.opts.max_in_flight / CONNECTIONS_PER_CLIENT))
            target.clients = [self._make_client(target, key, ssl_context) for _ in range(shards)]
            every += target.clients
        self._client_loop = weakref.ref(loop)
        self._guard = _close_with_loop(every)
        await anext(self._guard)

    def identity(self) -> dict[str, Any]:
        """Spec, endpoint host(s), image detail, extra body and reasoning effort (never the key).

        One endpoint gives ``host``; several give ``hosts``, sorted, so their order does not matter.
        ``reasoning_effort`` is listed only when set, so configurations without it keep their hash.
        """
        hosts = []
        for target in self.targets:
            parts = urlsplit(target.base_url)
            host = parts.hostname or ""
            hosts.append(f"{host}:{parts.port}" if parts.port else host)
        where: dict[str, Any] = {"host": hosts[0]} if len(hosts) == 1 else {"hosts": sorted(hosts)}
        effort = {} if self.opts.reasoning_effort is None else {"reasoning_effort": self.opts.reasoning_effort}
        return {
            "spec": self.spec,
            **where,
            "image_detail": self.opts.image_detail,
            "extra_body": dict(self.opts.extra_body),
            **effort,
        }

    def endpoint_stats(self) -> dict[str, dict[str, Any]]:
        """Requests, errors, cool-downs, latency, tokens and rate-limit waits per endpoint URL."""
        return self.pool.stats()

    # -- calls -----------------------------------------------------------------------------

    def _error_text(self, exc: APIStatusError) -> str:
        body = exc.body
        message: Any = body.get("message") if isinstance(body, dict) else None
        if not message:
            message = body if isinstance(body, str) and body else exc.message
        return redact_text(" ".join(str(message).split()), self._secrets)[:300]

    def _on_status(self, target: _Target, exc: APIStatusError) -> Output | _Retry:
        status = exc.status_code
        text = self._error_text(exc)
        url = _display_url(target.base_url)
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
        env = target.opts.key_env
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

    async def _attempt(self, target: _Target, payload: bytes | dict[str, Any]) -> Output | _Retry:
        import httpx2
        import openai

        # Errors are handled outside the except blocks so that no BackendError we raise
        # carries the SDK exception (which holds the request and its headers) as context.
        failed: APIStatusError | None = None
        refused: ReplyRefused | None = None
        opts = target.opts
        timed_out = _Retry(f"timed out after {opts.timeout:g} s")
        try:
            body = {"content": payload} if isinstance(payload, bytes) else {"body": payload}
            async with asyncio.timeout(opts.timeout):  # connect, first byte and whole body, however slow
                response = await target.client().post(
                    "/chat/completions",
                    cast_to=httpx2.Response,
                    options={"security": {"bearer_auth": True}},
                    **body,
                )
        except openai.APIStatusError as exc:
            failed = exc
        except (openai.APITimeoutError, TimeoutError):  # ReplyTooSlow is a TimeoutError too
            return timed_out
        except openai.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ else "connection error"
            return _Retry(f"connection failed ({cause})")
        except ReplyRefused as exc:  # too large, or compressed: asking again would not help
            refused = exc
        if failed is not None:
            return self._on_status(target, failed)
        if refused is None:
            try:
                return parse_response(response.content, max_bytes=opts.max_reply_bytes)
            except ReplyRefused as exc:
                refused = exc
            except BackendError as exc:
                return _Retry(redact_text(str(exc), self._secrets))
        raise BackendError(
            f"openai: refused the reply of {_display_url(target.base_url)}: {refused} "
            "(max_reply_bytes in the backend's table sets the cap)",
            retryable=True,
        )

    async def _send(self, endpoint: Endpoint, payload: bytes | dict[str, Any], tokens: int) -> Output | _Retry:
        """One attempt on a chosen endpoint: wait for its rate limits, send, count."""
        target: _Target = endpoint.client
        limiter = endpoint.state.limiter
        if limiter.active:
            delay = limiter.reserve(tokens)
            if delay > 0:
                endpoint.stats.rate_wait_s += delay
                await asyncio.sleep(delay)
        endpoint.stats.requests += 1
        sent = time.perf_counter()
        try:
            result = await self._attempt(target, payload)
        except BaseException:
            endpoint.stats.errors += 1
            limiter.settle(tokens, 0)
            raise
        if isinstance(result, Output):
            took = time.perf_counter() - sent
            stats = endpoint.stats
            stats.latency_s += took
            stats.max_latency_s = max(stats.max_latency_s, took)
            stats.prompt_tokens += result.prompt_tokens
            stats.completion_tokens += result.completion_tokens
            limiter.settle(tokens, result.prompt_tokens + result.completion_tokens or tokens)
            self.pool.succeeded(endpoint)
        else:
            endpoint.stats.errors += 1
            limiter.settle(tokens, 0)
        return result

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> Output:
        """Send one conversation; retry transient failures (on another endpoint when there is one).

        Returns:
            The output; ``refused`` when the provider rejected the request on content policy.
            ``latency_s`` covers every attempt and backoff but not waiting for a free slot or a
            rate limit (that is ``extra["queue_s"]``); ``extra["attempts"]`` counts HTTP attempts
            and ``extra["endpoint"]`` names the endpoint that answered.

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
        await self._clients_now()
        limited = any(e.state.limiter.active for e in self.pool.endpoints)
        tokens = estimate_tokens(messages, config, self.opts.image_detail) if limited else 0
        start = time.perf_counter()
        queued = 0.0
        attempt = 0
        last: Endpoint | None = None
        while True:
            waited = time.perf_counter()
            endpoint = await self.pool.acquire(tokens, avoid=last)
            try:
                queued += time.perf_counter() - waited
                before = endpoint.stats.rate_wait_s
                result = await self._send(endpoint, payload, tokens)
                queued += endpoint.stats.rate_wait_s - before
            finally:
                await self.pool.release(endpoint)
            if isinstance(result, Output):
                result.latency_s = time.perf_counter() - start - queued
                result.model = result.model or self.model
                result.extra["attempts"] = attempt + 1
                result.extra["queue_s"] = queued
                if self.pool.multiple:
                    result.extra["endpoint"] = endpoint.name
                return result
            cooled = self.pool.failed(endpoint, result.wait_hint)
            if attempt >= self.opts.max_retries:
                where = endpoint.name if not self.pool.multiple else f"{len(self.pool.endpoints)} endpoints"
                raise BackendError(
                    f"openai: {result.reason} from {where}; gave up after {attempt + 1} attempt(s)",
                    retryable=True,
                )
            attempt += 1
            last = endpoint
            if self.pool.multiple:  # retried elsewhere at once; acquire waits if every endpoint is out
                log.debug("%s: %s from %s; cooling it %.1f s", self.spec, result.reason, endpoint.name, cooled)
                continue
            if result.wait_hint is not None:
                delay = min(result.wait_hint, self.opts.backoff_max)
            else:
                delay = backoff_delay(attempt - 1, self.opts.backoff_base, self.opts.backoff_max)
            log.info("%s: %s; retry %d/%d in %.2f s", self.spec, result.reason, attempt, self.opts.max_retries, delay)
            await asyncio.sleep(delay)

    async def _check_one(self, target: _Target) -> int:
        import httpx2
        import openai

        try:
            await target.clients[0].get(
                "/models",
                cast_to=httpx2.Response,
                options={"timeout": min(_CHECK_TIMEOUT_S, target.opts.timeout), "security": {"bearer_auth": True}},
            )
        except openai.APIStatusError as exc:
            return exc.status_code
        except openai.APIConnectionError:
            return 0
        return 200

    async def sdk_client(self) -> AsyncOpenAI:
        """The SDK client of the first endpoint on the running loop, for the batch API.

        Batches use one endpoint: a batch is polled where it was created.
        """
        await self._clients_now()
        return self.targets[0].clients[0]

    async def check(self) -> None:
        """Fail fast: a missing key for OpenAI, a rejected key, or no endpoint that answers at all.

        Any HTTP answer from ``GET {base_url}/models`` (even 404 or 500) counts as reachable,
        except 401/403, which mean the key will not work. Of several endpoints, those that do
        not answer are put in cool-down and the run goes on with the others.

        Raises:
            BackendUnavailableError: With a one-line fix.
        """
        await self._clients_now()
        statuses = await asyncio.gather(*(self._check_one(t) for t in self.targets))
        for target, status in zip(self.targets, statuses, strict=True):
            if status in (401, 403):
                raise BackendUnavailableError(
                    f"{_display_url(target.base_url)} rejected the API key (HTTP {status}): "
                    f"set {target.opts.key_env} to a valid key"
                )
        down = [e for e, status in zip(self.pool.endpoints, statuses, strict=True) if status == 0]
        if len(down) == len(self.pool.endpoints):
            names = ", ".join(e.name for e in down)
            raise BackendUnavailableError(f"cannot reach {names}: is the server running?")
        for endpoint in down:
            log.warning("%s: cannot reach %s; going on with the other endpoints", self.spec, endpoint.name)
            self.pool.failed(endpoint)

    async def aclose(self) -> None:
        """Close the HTTP clients (a later call opens new ones)."""
        guard, loop_ref = self._guard, self._client_loop
        self._client_loop, self._guard = None, None
        for target in self.targets:
            target.clients = []
        if guard is not None and loop_ref is not None and loop_ref() is asyncio.get_running_loop():
            await guard.aclose()  # closes the clients
