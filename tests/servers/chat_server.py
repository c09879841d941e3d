"""A real OpenAI-compatible Chat Completions server on 127.0.0.1, for tests and benchmarks.

It runs the stdlib `ThreadingHTTPServer` (one thread per connection, HTTP/1.1 keep-alive, a
listen backlog of 512) in a background thread, on a free port chosen by the OS. Nothing is
mocked on the client side: a backend under test opens real sockets to it.

Example::

    from tests.servers.chat_server import ChatServer, Failure

    with ChatServer(reply="No, a kitchen.", latency=0.1) as srv:
        backend = OpenAIBackend("test-model", {"base_url": srv.base_url})
        srv.fail_next([Failure.rate_limit(retry_after=0.2), "500"])
        ...
        assert len(srv.requests) == 3          # two failures, then the answer
        assert srv.requests[-1].json["model"] == "test-model"
        assert srv.peak_in_flight <= 8

API:
    ``ChatServer(reply=..., latency=0.0, model="test-model", top_logprobs=None, usage=None,
    api_key=None, models_status=200, record=True, capacity=None)``

    - ``reply``: a string, or a callable taking the request's JSON body and returning a string.
    - ``latency``: seconds added to every chat request before answering (``0.1`` is the
      benchmark's "+100 ms per request" mode).
    - ``top_logprobs``: ``{token: logprob}`` returned for the first generated token when a
      request asks for ``logprobs`` (default: the reply's first word at -0.01 and "No"/"Yes"
      alternatives).
    - ``usage``: fixed ``(prompt_tokens, completion_tokens)``, or a callable of the body returning
      them; default: counted in words (85 per image or video part).
    - ``api_key``: when set, requests without ``Authorization: Bearer <key>`` (or an Azure
      ``api-key`` header with it) get a 401.
    - ``models_status``: status for ``GET .../models`` (``transformers serve`` answers 500 in
      some setups).
    - ``record``: keep every request (set False for long benchmarks).
    - ``logprobs``: a callable taking the request's JSON body and returning the whole
      ``choices[0].logprobs`` object (to replay a server's exact shape, e.g. a leading
      whitespace token before the answer).
    - ``cached_tokens``: when set (an int, or a callable of the body), ``usage`` carries
      ``prompt_tokens_details.cached_tokens`` as OpenAI reports prompt-cache hits.
    - ``finish_reason``: a string, or a callable of the body, for answers not turned into a
      failure (default ``stop``); ``length`` is how a reply cut off by ``max_tokens`` ends.
    - ``reasoning_tokens``: when set (an int, or a callable of the body), ``usage`` carries
      ``completion_tokens_details.reasoning_tokens`` and ``completion_tokens`` includes them, as
      OpenAI reports a reasoning model's hidden tokens.
    - ``capacity``: most chat requests answered at once; later ones wait their turn (with
      ``latency``, this makes the server a bottleneck of ``capacity / latency`` requests/s).
    - ``peer_pids``: record the process id of the client that sent each chat request
      (`RecordedRequest.peer_pid`, found with psutil from the connection's local port), to tell
      which worker process made which call; ``current()`` is the request being answered in the
      calling thread (a ``reply`` callable may read it).

    Attributes and methods: ``base_url`` (``http://127.0.0.1:PORT/v1``), ``root_url``,
    ``requests`` (chat requests as `RecordedRequest`, in arrival order), ``log`` (every request
    as ``(method, path, status)``), ``in_flight``, ``peak_in_flight``, ``bytes_received``,
    ``chat_requests`` and ``images_received`` (counted even with ``record=False``),
    ``fail_next(failures)``, ``reset()``, ``start()``, ``stop()``.

Failures are queued with `ChatServer.fail_next` and consumed one per chat request, in order.
Each is a `Failure` or one of the names ``"429"``, ``"500"``, ``"503"``, ``"malformed"``,
``"empty"``, ``"content_policy"``, ``"content_filter"``, ``"azure_content_filter"``,
``"disconnect"``. `Failure` also builds any status with an OpenAI-style error body
(``Failure.http(404, "no such model")``), slow answers (``Failure.hang(2.0)``) and 429s with
``Retry-After`` in seconds, HTTP-date or ``retry-after-ms`` (``Failure.rate_limit(...)``), and
hostile answers: headers then silence (``Failure.stall_after_headers()``), a byte every two
seconds (``Failure.trickle()``), an endless chunked body (``Failure.endless()``), a huge body
(``Failure.huge(size)``), JSON nested 200,000 deep (``Failure.deep()``) and a million choices
(``Failure.many_choices()``).
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

Reply = str | Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class Failure:
    """One injected misbehaviour for the next chat request.

    Attributes:
        status: HTTP status to answer with (ignored when ``disconnect``).
        body: Raw response body (bytes are sent as is; anything else as JSON).
        headers: Extra response headers (e.g. ``Retry-After``).
        delay: Seconds to wait before answering (use it to trigger client timeouts).
        disconnect: Close the connection without answering.
        finish_reason: For a 200 answer built from the normal reply, override finish_reason.
        write: Writes the whole answer itself, status line included (the hostile answers below).
    """

    status: int = 500
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    disconnect: bool = False
    finish_reason: str | None = None
    write: Callable[[BaseHTTPRequestHandler], None] | None = None

    @staticmethod
    def error_body(message: str, code: str | None = None, type_: str = "server_error") -> Any:
        """An OpenAI-style ``{"error": {...}}`` body."""
        return {"error": {"message": message, "type": type_, "param": None, "code": code}}

    @classmethod
    def rate_limit(cls, retry_after: float | str | None = None, retry_after_ms: float | None = None) -> Failure:
        """429 with optional ``Retry-After`` (seconds or HTTP-date) / ``retry-after-ms``."""
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        if retry_after_ms is not None:
            headers["retry-after-ms"] = str(retry_after_ms)
        body = cls.error_body("Rate limit reached, slow down.", "rate_limit_exceeded", "requests")
        return cls(status=429, body=body, headers=headers)

    @classmethod
    def server_error(cls, status: int = 500, message: str = "The server had an error.") -> Failure:
        """A 5xx answer with an OpenAI-style error body."""
        return cls(status=status, body=cls.error_body(message))

    @classmethod
    def http(cls, status: int, message: str, code: str | None = None) -> Failure:
        """Any status with an OpenAI-style error body (401, 404, 400...)."""
        return cls(status=status, body=cls.error_body(message, code, "invalid_request_error"))

    @classmethod
    def malformed(cls) -> Failure:
        """200 whose body is not JSON."""
        return cls(status=200, body=b"<html>upstream hiccup</html>")

    @classmethod
    def empty_choices(cls) -> Failure:
        """200 with valid JSON but no choices."""
        return cls(status=200, body={"id": "x", "object": "chat.completion", "choices": []})

    @classmethod
    def content_policy(cls) -> Failure:
        """400 the way OpenAI rejects an image on content policy."""
        return cls(
            status=400,
            body=cls.error_body(
                "Your request was rejected as a result of our safety system.",
                "content_policy_violation",
                "invalid_request_error",
            ),
        )

    @classmethod
    def azure_content_filter(cls) -> Failure:
        """400 the way Azure OpenAI rejects a prompt on its content filter."""
        body = {
            "error": {
                "message": "The response was filtered due to the prompt triggering Azure "
                "OpenAI's content management policy.",
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
                "innererror": {"code": "ResponsibleAIPolicyViolation"},
            }
        }
        return cls(status=400, body=body)

    @classmethod
    def content_filter(cls) -> Failure:
        """200 whose choice stopped with ``finish_reason: content_filter`` and no content."""
        return cls(status=200, finish_reason="content_filter")

    @classmethod
    def hang(cls, seconds: float) -> Failure:
        """Wait ``seconds`` before answering normally (for client timeouts)."""
        return cls(status=200, delay=seconds)

    @classmethod
    def drop(cls) -> Failure:
        """Close the connection without any answer."""
        return cls(disconnect=True)

    # -- hostile answers: a server that stalls, trickles, never ends, or sends a bomb ----------

    @classmethod
    def stall_after_headers(cls, seconds: float = 30.0) -> Failure:
        """Send 200 and its headers (a 100-byte body announced), then nothing for ``seconds``."""

        def write(handler: BaseHTTPRequestHandler) -> None:
            _headers(handler, {"Content-Length": "100"})
            _idle(handler, seconds)

        return cls(status=200, write=write)

    @classmethod
    def trickle(cls, every: float = 2.0, seconds: float = 60.0, *, in_headers: bool = False) -> Failure:
        """Send 200, headers, then one byte of a long body every ``every`` seconds for ``seconds``.

        With ``in_headers``, the status line and then one byte of an endless header every ``every``
        seconds (the answer never gets to its first body byte).
        """

        def write(handler: BaseHTTPRequestHandler) -> None:
            end = time.monotonic() + seconds
            if in_headers:
                handler.close_connection = True
                if not _send_bytes(handler, b"HTTP/1.1 200 OK\r\nX-Slow: "):
                    return
                while time.monotonic() < end and _send_bytes(handler, b"a"):
                    time.sleep(every)
                return
            _headers(handler, {"Content-Length": "1000000"})
            while time.monotonic() < end and _send_bytes(handler, b" "):
                time.sleep(every)

        return cls(status=200, write=write)

    @classmethod
    def endless(cls, chunk: int = 1 << 16, limit: int = 1 << 31) -> Failure:
        """Send 200 and a chunked JSON body that never ends (until the client leaves, or ``limit`` bytes)."""

        def write(handler: BaseHTTPRequestHandler) -> None:
            _headers(handler, {"Transfer-Encoding": "chunked"})
            frame = f"{chunk:x}\r\n".encode() + b" " * chunk + b"\r\n"
            sent = 0
            while sent < limit and _send_bytes(handler, frame):
                sent += chunk

        return cls(status=200, write=write)

    @classmethod
    def huge(cls, size: int, *, announce: bool = True) -> Failure:
        """Send 200 and a ``size``-byte body of JSON whitespace around ``{}`` (``Content-Length`` with ``announce``)."""

        def write(handler: BaseHTTPRequestHandler) -> None:
            _headers(handler, {"Content-Length": str(size)} if announce else {"Connection": "close"})
            handler.close_connection = True
            block = b" " * (1 << 16)
            left = size - 2
            if not _send_bytes(handler, b"{"):
                return
            while left > 0 and _send_bytes(handler, block[: min(left, len(block))]):
                left -= len(block)
            _send_bytes(handler, b"}")

        return cls(status=200, write=write)

    @classmethod
    def raw(cls, data: bytes) -> Failure:
        """Send ``data`` as the whole answer, status line included, then close the connection."""

        def write(handler: BaseHTTPRequestHandler) -> None:
            handler.close_connection = True
            _send_bytes(handler, data)

        return cls(status=200, write=write)

    @classmethod
    def deep(cls, depth: int = 200_000) -> Failure:
        """200 whose body is a list nested ``depth`` deep (parsing it recursively overflows)."""
        return cls(status=200, body=b"[" * depth + b"]" * depth)

    @classmethod
    def many_choices(cls, n: int = 1_000_000) -> Failure:
        """200 with ``n`` choices of the smallest shape (a few bytes each on the wire)."""
        one = b'{"message":{"content":"No"}}'
        return cls(status=200, body=b'{"choices":[' + b",".join([one] * n) + b"]}")


_NAMED: dict[str, Callable[[], Failure]] = {
    "429": Failure.rate_limit,
    "500": Failure.server_error,
    "503": lambda: Failure.server_error(503, "Service unavailable."),
    "malformed": Failure.malformed,
    "empty": Failure.empty_choices,
    "content_policy": Failure.content_policy,
    "content_filter": Failure.content_filter,
    "azure_content_filter": Failure.azure_content_filter,
    "disconnect": Failure.drop,
}


@dataclass
class RecordedRequest:
    """A chat request as the server received it.

    Attributes:
        path: Path with query string.
        headers: Request headers (lower-cased names).
        body: Raw body bytes.
        json: The parsed body (``{}`` when not JSON).
        received_at: ``time.monotonic()`` on arrival.
        peer_pid: The sending process's id (with ``peer_pids``; None when unknown).
    """

    path: str
    headers: dict[str, str]
    body: bytes
    json: dict[str, Any]
    received_at: float
    peer_pid: int | None = None

    @property
    def images(self) -> list[dict[str, Any]]:
        """Every ``image_url`` part in the request's messages."""
        out: list[dict[str, Any]] = []
        for message in self.json.get("messages", []):
            content = message.get("content")
            if isinstance(content, list):
                out.extend(p["image_url"] for p in content if p.get("type") == "image_url")
        return out

    @property
    def videos(self) -> list[dict[str, Any]]:
        """Every ``video_url`` part (vLLM's video content part) in the request's messages."""
        out: list[dict[str, Any]] = []
        for message in self.json.get("messages", []):
            content = message.get("content")
            if isinstance(content, list):
                out.extend(p["video_url"] for p in content if p.get("type") == "video_url")
        return out


def _count_words(body: Mapping[str, Any]) -> int:
    words = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            words += len(content.split())
        elif isinstance(content, list):
            for part in content:
                if part.get("type") == "text":
                    words += len(str(part.get("text", "")).split())
                else:
                    words += 85
    return words


class ChatServer:
    """Chat Completions on a loopback port; see the module docstring for the API."""

    def __init__(
        self,
        reply: Reply = "No, nothing harmful is shown.",
        *,
        latency: float = 0.0,
        model: str = "test-model",
        top_logprobs: Mapping[str, float] | None = None,
        usage: tuple[int, int] | Callable[[dict[str, Any]], tuple[int, int]] | None = None,
        api_key: str | None = None,
        models_status: int = 200,
        record: bool = True,
        logprobs: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        cached_tokens: int | Callable[[dict[str, Any]], int] | None = None,
        capacity: int | None = None,
        finish_reason: str | Callable[[dict[str, Any]], str] = "stop",
        reasoning_tokens: int | Callable[[dict[str, Any]], int] | None = None,
        peer_pids: bool = False,
        tls: tuple[str, str] | None = None,
    ) -> None:
        self.reply = reply
        self.tls = tls  # (certificate file, key file): serve https
        self.peer_pids = peer_pids
        self._here = threading.local()
        self.finish_reason = finish_reason
        self.reasoning_tokens = reasoning_tokens
        self.latency = latency
        self.model = model
        self.top_logprobs = dict(top_logprobs) if top_logprobs is not None else None
        self.usage = usage
        self.api_key = api_key
        self.models_status = models_status
        self.record = record
        self.logprobs = logprobs
        self.cached_tokens = cached_tokens
        self.capacity = capacity
        self._slots = threading.BoundedSemaphore(capacity) if capacity else None
        self.requests: list[RecordedRequest] = []
        self.log: list[tuple[str, str, int]] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self.bytes_received = 0
        self.chat_requests = 0
        self.images_received = 0
        self._failures: deque[Failure] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ChatServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        handler = type("_BoundHandler", (_Handler,), {"server_state": self})
        httpd = _Server(("127.0.0.1", 0), handler)
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port."""
        if self._httpd is None:
            raise RuntimeError("ChatServer is not running: call start() or use it as a context manager")
        return int(self._httpd.server_address[1])

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` (https with ``tls``; Azure-style clients append ``/openai/...``)."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what an OpenAI client takes as base URL."""
        return f"{self.root_url}/v1"

    # -- test controls ---------------------------------------------------------------------

    def fail_next(self, failures: Iterable[Failure | str] | Failure | str) -> None:
        """Queue failures, consumed one per chat request in order.

        Args:
            failures: `Failure` objects or names (``"429"``, ``"500"``, ``"503"``,
                ``"malformed"``, ``"empty"``, ``"content_policy"``, ``"content_filter"``,
                ``"azure_content_filter"``, ``"disconnect"``).
        """
        items = [failures] if isinstance(failures, Failure | str) else list(failures)
        resolved = []
        for item in items:
            if isinstance(item, str):
                if item not in _NAMED:
                    raise ValueError(f"unknown failure {item!r}; known: {sorted(_NAMED)}")
                item = _NAMED[item]()
            resolved.append(item)
        with self._lock:
            self._failures.extend(resolved)

    @property
    def pending_failures(self) -> int:
        """Failures queued and not yet used."""
        with self._lock:
            return len(self._failures)

    def reset(self) -> None:
        """Forget recorded requests, counters and queued failures."""
        with self._lock:
            self.requests.clear()
            self.log.clear()
            self._failures.clear()
            self.peak_in_flight = self.in_flight
            self.bytes_received = 0
            self.chat_requests = 0
            self.images_received = 0

    # -- answers ---------------------------------------------------------------------------

    def current(self) -> RecordedRequest | None:
        """The chat request being answered in this thread (None outside a request, or with ``record=False``)."""
        found: RecordedRequest | None = getattr(self._here, "request", None)
        return found

    def _next_failure(self) -> Failure | None:
        with self._lock:
            return self._failures.popleft() if self._failures else None

    def _completion(self, body: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
        text = self.reply(body) if callable(self.reply) else self.reply
        filtered = finish_reason == "content_filter"
        fixed = self.usage(body) if callable(self.usage) else self.usage
        prompt_tokens, completion_tokens = fixed or (_count_words(body), len(text.split()))
        reasoning = self.reasoning_tokens(body) if callable(self.reasoning_tokens) else self.reasoning_tokens
        completion_tokens += reasoning or 0
        default_finish = self.finish_reason(body) if callable(self.finish_reason) else self.finish_reason
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": None if filtered else text, "refusal": None},
            "finish_reason": finish_reason or default_finish,
            "logprobs": None,
        }
        if body.get("logprobs") and not filtered:
            choice["logprobs"] = (
                self.logprobs(body) if self.logprobs else self._logprobs(text, int(body.get("top_logprobs") or 0))
            )
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if self.cached_tokens is not None:
            cached = self.cached_tokens(body) if callable(self.cached_tokens) else self.cached_tokens
            usage["prompt_tokens_details"] = {"cached_tokens": cached, "audio_tokens": 0}
        if reasoning is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return {
            "id": f"chatcmpl-{time.monotonic_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or self.model),
            "choices": [choice],
            "usage": usage,
        }

    def _logprobs(self, text: str, k: int) -> dict[str, Any]:
        words = text.split() or [""]
        first = words[0].rstrip(",.")
        table = self.top_logprobs or {"No": -4.6, "Yes": -5.3, first: -0.01}
        ranked = sorted(table.items(), key=lambda kv: -kv[1])[:k]
        content = []
        for i, word in enumerate(words):
            token = first if i == 0 else " " + word
            top = ranked if i == 0 else [(token, -0.01)][:k]
            content.append(
                {
                    "token": token,
                    "logprob": table.get(first, -0.01) if i == 0 else -0.01,
                    "bytes": list(token.encode()),
                    "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top],
                }
            )
        return {"content": content, "refusal": None}


def _headers(handler: BaseHTTPRequestHandler, headers: Mapping[str, str]) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.flush()


def _send_bytes(handler: BaseHTTPRequestHandler, data: bytes) -> bool:
    """Write and flush; False once the client has gone."""
    try:
        handler.wfile.write(data)
        handler.wfile.flush()
    except OSError:
        return False
    return True


def _idle(handler: BaseHTTPRequestHandler, seconds: float) -> None:
    """Hold the connection open and silent for ``seconds`` (or until the client closes it)."""
    import select
    import socket

    handler.close_connection = True
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([handler.connection], [], [], min(left, 0.2))
        if ready and not handler.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):  # b"": closed
            return


def _peer_pid(client_port: int, server_port: int) -> int | None:
    """The id of the local process whose TCP connection from ``client_port`` reaches ``server_port``."""
    import psutil

    for conn in psutil.net_connections(kind="tcp"):
        if conn.laddr and conn.laddr.port == client_port and conn.raddr and conn.raddr.port == server_port:
            return conn.pid
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512
    allow_reuse_address = True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else headers and body in two writes cost a 40 ms delayed ACK
    server_state: ChatServer

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        pass

    def _send(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # a client that refused a hostile body and left
            self.close_connection = True
        with self.server_state._lock:
            self.server_state.log.append((self.command, self.path, status))

    def _authorised(self) -> bool:
        key = self.server_state.api_key
        if key is None:
            return True
        return self.headers.get("Authorization") == f"Bearer {key}" or self.headers.get("api-key") == key

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        state = self.server_state
        if not path.endswith("/models"):
            self._send(404, Failure.error_body(f"no route {path}", "not_found"))
        elif not self._authorised():
            self._send(401, Failure.error_body("Incorrect API key provided.", "invalid_api_key"))
        elif state.models_status != 200:
            self._send(state.models_status, Failure.error_body("models listing failed"))
        else:
            self._send(200, {"object": "list", "data": [{"id": state.model, "object": "model", "owned_by": "test"}]})

    def do_POST(self) -> None:
        state = self.server_state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        path = urlsplit(self.path).path
        if not path.endswith("/chat/completions"):
            self._send(404, Failure.error_body(f"no route {path}", "not_found"))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        images = sum(
            1
            for m in body.get("messages") or []
            if isinstance(m, dict) and isinstance(m.get("content"), list)
            for part in m["content"]
            if isinstance(part, dict) and part.get("type") == "image_url"
        )
        pid = _peer_pid(self.client_address[1], state.port) if state.peer_pids else None
        with state._lock:
            state.bytes_received += len(raw)
            state.chat_requests += 1
            state.images_received += images
            state.in_flight += 1
            state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
            state._here.request = None
            if state.record:
                headers = {k.lower(): v for k, v in self.headers.items()}
                state._here.request = RecordedRequest(self.path, headers, raw, body, time.monotonic(), pid)
                state.requests.append(state._here.request)
        try:
            if state._slots is not None:
                with state._slots:
                    self._answer(body)
            else:
                self._answer(body)
        finally:
            with state._lock:
                state.in_flight -= 1

    def _answer(self, body: dict[str, Any]) -> None:
        state = self.server_state
        failure = state._next_failure()
        if state.latency:
            time.sleep(state.latency)
        if failure is not None and failure.delay:
            time.sleep(failure.delay)
        if failure is not None and failure.write is not None:
            failure.write(self)
            with state._lock:
                state.log.append((self.command, self.path, failure.status))
            return
        if failure is not None and failure.disconnect:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if not self._authorised():
            self._send(401, Failure.error_body("Incorrect API key provided.", "invalid_api_key"))
            return
        if failure is not None and (failure.status != 200 or failure.body is not None):
            self._send(failure.status, failure.body if failure.body is not None else b"", failure.headers)
            return
        finish = failure.finish_reason if failure is not None else None
        self._send(200, state._completion(body, finish), failure.headers if failure else None)
