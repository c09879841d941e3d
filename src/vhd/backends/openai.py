"""Backend for any OpenAI-compatible Chat Completions endpoint, or several serving one model.

Works with OpenAI, Azure OpenAI, vLLM, SGLang, Ollama, LM Studio and ``transformers serve``.
Chat calls go straight through an aiohttp session per endpoint (`vhd.backends.http`) and speak
the same protocol as the official ``openai`` SDK (same URL, bearer key, ``OpenAI-Organization`` /
``OpenAI-Project`` headers from ``$OPENAI_ORG_ID`` / ``$OPENAI_PROJECT_ID``, same error bodies
read the same way); Azure OpenAI (deployment routing, ``api-key``, ``api-version``) and the batch
API use the SDK's async client.
Configure it in the config file::

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
waiting never holds one of the endpoint's ``max_in_flight`` slots. Each request is built once
(body serialised by `encode_payload`, URL and headers prepared per endpoint) and sent as it is;
the JSON is read by `parse_response`. Going around the SDK and httpx for chat calls takes the
client's CPU per call from about 3.5 ms (SDK) and 1.8 ms (httpx2) to about 0.8, and keeps the SDK
out of a run's start-up (importing it costs about a second of CPU; BENCHMARKS.md).
Content-policy rejections come back as ``Output(refused=True)``, not as errors.

This module is long (about 600 lines) on purpose: it is the HTTP-facing I/O of the backend (clients
per endpoint, one attempt, mapping HTTP errors, retries, checks), one unit that reads best whole;
what needs no I/O lives in `vhd.backends.openai_payload` and `vhd.backends.endpoints`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import os
import ssl
import time
import weakref
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vhd.backends.base import Backend, GenerateConfig, Message, Output
from vhd.backends.endpoints import Endpoint, EndpointPool, endpoint_state, estimate_tokens
from vhd.backends.http import ConnectionFailed, EndpointSession, Reply, split_userinfo
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
from vhd.netread import ReplyRefused, client_limits, parse_json
from vhd.redaction import redact_text, redact_url, remember_secret, remember_secrets_in

if TYPE_CHECKING:
    import httpx2
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
"""Azure's SDK requests are spread round-robin over ceil(max_in_flight / 8) SDK clients. httpx's
connection pool scans its connections on every request and every response; at 64 requests in
flight one pool of 64 connections spent about a sixth of the client's CPU in that scan
(BENCHMARKS.md). Other endpoints have one aiohttp session, whose pool does not scan."""


async def _close_with_loop(clients: list[Any]) -> AsyncGenerator[None, None]:
    """Suspends once; closing it (`aclose`, or the loop's ``shutdown_asyncgens``) closes the clients.

    The list may grow after the generator started (the batch API's SDK client is opened on demand).
    """
    try:
        yield
    finally:
        for client in clients:
            if hasattr(client, "aclose"):  # an aiohttp session
                await client.aclose()
            else:  # an SDK client
                await client.close()


@dataclass
class _Retry:
    """A failed attempt that may succeed later."""

    reason: str
    wait_hint: float | None = None


@dataclass
class _StatusFailure:
    """An HTTP error answer (4xx or 5xx), read the way the SDK reads it.

    Attributes:
        status: The HTTP status.
        body: The error body: the JSON's ``error`` object when there is one, else the decoded
            JSON, else the text.
        message: ``Error code: N`` and the error's ``message`` when it has one.
        headers: The response headers.
    """

    status: int
    body: Any
    message: str
    headers: Mapping[str, str]

    @classmethod
    def from_sdk(cls, exc: APIStatusError) -> _StatusFailure:
        return cls(exc.status_code, exc.body, exc.message, exc.response.headers)

    @classmethod
    def from_reply(cls, reply: Reply, max_bytes: int) -> _StatusFailure:
        status = reply.status
        message = f"Error code: {status}"
        text = reply.body.decode("utf-8", "replace").strip()
        body: Any = text
        try:
            body = parse_json(text, max_bytes=max_bytes)
        except ValueError:  # not JSON, or a bomb (ReplyRefused): the text stands
            pass
        else:
            error = body.get("error", body) if isinstance(body, dict) else None
            detail = error.get("message") if isinstance(error, dict) else None
            if isinstance(detail, str) and detail:
                message += f" - {detail}"
            body = body.get("error", body) if isinstance(body, dict) else body
        return cls(status, body, message, reply.headers)


@dataclass
class _Target:
    """One endpoint's options, resolved URL and HTTP clients (in `Endpoint.client`).

    Outside Azure, ``clients`` holds the endpoint's one `EndpointSession` and ``chat`` and
    ``models`` are its URLs, parsed once; on Azure, ``clients`` are the SDK's clients.
    """

    opts: OpenAIOptions
    base_url: str
    clients: list[Any]
    turn: itertools.count[int]
    chat: Any = None
    models: Any = None

    def client(self) -> Any:
        return self.clients[next(self.turn) % len(self.clients)]


def _endpoint_url(base_url: str, path: str) -> str:
    """``path`` under ``base_url`` (its path gets a trailing slash; the query stays at the end)."""
    parts = urlsplit(base_url)
    root = parts.path if parts.path.endswith("/") else parts.path + "/"
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc}{root}{path}{query}"


def _request_headers(key: str) -> dict[str, str]:
    """The headers of every chat request: what the SDK sends that a server may read, prepared once."""
    from vhd.version import version

    headers = {
        "Accept-Encoding": "identity",  # a compressed reply is refused (`vhd.netread`)
        "Connection": "keep-alive",
        "Accept": "application/json",
        "Content-Type": "application/json",
        "User-Agent": f"vhd/{version()}",
        "Authorization": f"Bearer {key}",
    }
    for env, name in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
        value = os.environ.get(env)
        if value:  # the SDK reads both variables too
            headers[name] = value
    return headers


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
        self._keys: list[str] = []
        self._ssl_context: Any = None
        self._every: list[Any] = []
        self._sdk: AsyncOpenAI | None = None

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

    def _http_client(self, target: _Target, ssl_context: Any) -> httpx2.AsyncClient:
        """An httpx client as the SDK configures one, whose every reply is bounded (`vhd.netread`)."""
        import httpx2

        opts = target.opts
        # Every reply is read under a deadline and a byte cap (`vhd.netread`), the SDK's reads too.
        limits = client_limits(httpx2, timeout=opts.timeout, max_bytes=opts.max_reply_bytes)
        limits["timeout"] = self._http_timeout(opts)
        # One SSL context for every shard: loading the CA bundle costs ~15 ms each time.
        return httpx2.AsyncClient(
            verify=ssl_context,
            limits=httpx2.Limits(max_connections=1000, max_keepalive_connections=100),  # the SDK's
            follow_redirects=True,
            **limits,
        )

    def _sdk_client(self, target: _Target, key: str, ssl_context: Any) -> AsyncOpenAI:
        import openai

        opts, base_url = target.opts, target.base_url
        timeout = self._http_timeout(opts)
        http = self._http_client(target, ssl_context)
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

    @staticmethod
    def _tls_context() -> ssl.SSLContext:
        import httpx2

        return httpx2.create_ssl_context()

    @staticmethod
    def _http_timeout(opts: OpenAIOptions) -> httpx2.Timeout:
        import httpx2

        return httpx2.Timeout(opts.timeout, connect=min(opts.timeout, 10.0))

    async def _clients_now(self) -> None:
        """Open the HTTP clients of every endpoint for the running event loop (anew if the loop changed).

        A client's connections belong to one loop. The clients are tied to a suspended async
        generator, which `asyncio.run` closes before its loop ends (``shutdown_asyncgens``), so
        a backend used across several ``asyncio.run`` calls without `aclose` still closes its
        sockets cleanly.
        """
        loop = asyncio.get_running_loop()
        if self._client_loop is not None and self._client_loop() is loop and self.targets[0].clients:
            return
        keys = [self._api_key(target) for target in self.targets]
        self._secrets = tuple(k for k in dict.fromkeys(keys) if k != PLACEHOLDER_API_KEY)
        remember_secret(*self._secrets)
        # httpx's context (its CA bundle, $SSL_CERT_FILE...), built only where TLS is spoken.
        tls = any(t.opts.azure or t.base_url.lower().startswith("https:") for t in self.targets)
        ssl_context = self._tls_context() if tls else None
        every: list[Any] = []
        for target, key in zip(self.targets, keys, strict=True):
            if target.opts.azure:
                shards = max(1, math.ceil(target.opts.max_in_flight / CONNECTIONS_PER_CLIENT))
                target.clients = [self._sdk_client(target, key, ssl_context) for _ in range(shards)]
            else:
                import yarl

                opts = target.opts
                url, login = split_userinfo(target.base_url)  # a login in the URL: Basic, as httpx sent it
                headers = _request_headers(key)
                if login is not None:
                    headers["Authorization"] = login
                session = EndpointSession(
                    url, headers=headers, timeout=opts.timeout, max_bytes=opts.max_reply_bytes, ssl_context=ssl_context
                )
                target.clients = [session]
                target.chat = yarl.URL(_endpoint_url(url, "chat/completions"))
                target.models = yarl.URL(_endpoint_url(url, "models"))
            every += target.clients
        self._keys = keys
        self._ssl_context = ssl_context
        self._every = every
        self._sdk = None
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

    def _error_text(self, exc: _StatusFailure) -> str:
        body = exc.body
        message: Any = body.get("message") if isinstance(body, dict) else None
        if not message:
            message = body if isinstance(body, str) and body else exc.message
        return redact_text(" ".join(str(message).split()), self._secrets)[:300]

    def _on_status(self, target: _Target, exc: _StatusFailure) -> Output | _Retry:
        status = exc.status
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
        no_retry = exc.headers.get("x-should-retry") == "false" or code == "insufficient_quota"
        if (status in (408, 409, 429) or status >= 500) and not no_retry:
            return _Retry(f"HTTP {status}: {text}", parse_retry_after(exc.headers, time.time()))
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
        if target.opts.azure:
            return await self._attempt_sdk(target, payload)
        # Errors are handled outside the except blocks so that no BackendError we raise
        # carries the HTTP exception as context.
        refused: ReplyRefused | None = None
        reply: Reply | None = None
        opts = target.opts
        if not isinstance(payload, bytes):  # only Azure's SDK client takes a dict body
            raise TypeError("the chat request body must be JSON bytes")
        session: EndpointSession = target.clients[0]
        try:
            async with asyncio.timeout(opts.timeout):  # connect, first byte and whole body, however slow
                reply = await session.request("POST", target.chat, body=payload)
        except TimeoutError:  # ReplyTooSlow is a TimeoutError too
            return _Retry(f"timed out after {opts.timeout:g} s")
        except ConnectionFailed as exc:
            return _Retry(f"connection failed ({exc.reason})")
        except ReplyRefused as exc:  # too large, or compressed: asking again would not help
            refused = exc
        if reply is not None and reply.status >= 400:
            return self._on_status(target, _StatusFailure.from_reply(reply, opts.max_reply_bytes))
        return self._read(target, None if reply is None else reply.body, refused)

    def _read(self, target: _Target, content: bytes | None, refused: ReplyRefused | None) -> Output | _Retry:
        """The reply's `Output`, or a retry for a malformed one; a refused reply is the call's error."""
        if refused is None and content is not None:
            try:
                return parse_response(content, max_bytes=target.opts.max_reply_bytes)
            except ReplyRefused as exc:
                refused = exc
            except BackendError as exc:
                return _Retry(redact_text(str(exc), self._secrets))
        raise BackendError(
            f"openai: refused the reply of {_display_url(target.base_url)}: {refused} "
            "(max_reply_bytes in the backend's table sets the cap)",
            retryable=True,
        )

    async def _attempt_sdk(self, target: _Target, payload: bytes | dict[str, Any]) -> Output | _Retry:
        """One attempt through the SDK's client (Azure OpenAI: deployment routing, ``api-key``)."""
        import httpx2
        import openai

        failed: APIStatusError | None = None
        refused: ReplyRefused | None = None
        opts = target.opts
        timed_out = _Retry(f"timed out after {opts.timeout:g} s")
        content: bytes | None = None
        try:
            body = {"content": payload} if isinstance(payload, bytes) else {"body": payload}
            async with asyncio.timeout(opts.timeout):  # connect, first byte and whole body, however slow
                response = await target.client().post(
                    "/chat/completions",
                    cast_to=httpx2.Response,
                    options={"security": {"bearer_auth": True}},
                    **body,
                )
            content = response.content
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
            return self._on_status(target, _StatusFailure.from_sdk(failed))
        return self._read(target, content, refused)

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
        timeout = min(_CHECK_TIMEOUT_S, target.opts.timeout)
        if not target.opts.azure:
            session: EndpointSession = target.clients[0]
            try:
                async with asyncio.timeout(timeout):
                    reply = await session.request("GET", target.models, timeout=timeout)
            except (ConnectionFailed, TimeoutError):
                return 0
            except ReplyRefused:  # an answer all the same: the endpoint is there
                return 200
            return reply.status if reply.status >= 400 else 200
        import httpx2
        import openai

        try:
            await target.clients[0].get(
                "/models",
                cast_to=httpx2.Response,
                options={"timeout": timeout, "security": {"bearer_auth": True}},
            )
        except openai.APIStatusError as exc:
            return exc.status_code
        except openai.APIConnectionError:
            return 0
        return 200

    async def sdk_client(self) -> AsyncOpenAI:
        """The SDK client of the first endpoint on the running loop, for the batch API.

        Batches use one endpoint: a batch is polled where it was created. The client is opened on
        first use (chat calls do not need the SDK) and closed with the others.
        """
        await self._clients_now()
        target = self.targets[0]
        if target.opts.azure:
            client: AsyncOpenAI = target.clients[0]
            return client
        if self._sdk is None:
            if self._ssl_context is None:
                self._ssl_context = self._tls_context()
            self._sdk = self._sdk_client(target, self._keys[0], self._ssl_context)
            self._every.append(self._sdk)
        return self._sdk

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
        self._sdk = None
        if guard is not None and loop_ref is not None and loop_ref() is asyncio.get_running_loop():
            await guard.aclose()  # closes the clients
