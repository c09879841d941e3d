"""Bounded reading of replies from servers vhd does not control: a deadline, a byte cap, safe JSON.

Every network reader of vhd that takes a whole reply into memory (the ``openai`` backend and its
batch result files, the Hive and OpenAI moderation detectors, Label Studio pulls) reads it through
here, so that no server can hold a run or fill its memory:

- **A wall-clock deadline per request.** `client_limits` gives an ``httpx`` (or ``httpx2``) client
  event hooks that stamp each request with a deadline (``timeout`` seconds from when it is sent)
  and check it between every chunk of the body, so a server that trickles a byte every few
  seconds (which a per-read timeout never catches) is cut off. The client's own connect, read and
  pool timeouts are set to the same figure, so a silent server is cut off too. Async callers also
  wrap the whole call in ``asyncio.timeout`` (exact, even while headers trickle in).
- **A byte cap per reply.** A ``Content-Length`` above the cap is refused before the body is read;
  otherwise reading stops at the cap (an endless chunked body never grows memory past it). The
  client asks for ``Accept-Encoding: identity`` and a compressed body is refused, since its size on
  the wire says nothing about its size once inflated (a 32 MiB gzip bomb inflates to gigabytes).
- **JSON that cannot recurse or explode.** `parse_json` refuses text nested deeper than
  `vhd.fileio.JSON_MAX_DEPTH` (before parsing: no `RecursionError`) or holding more lists and
  objects than the cap allows (a few bytes each on the wire, a hundred in memory).

A client that is not httpx (the ``openai`` backend's aiohttp sessions) reads each body with
`read_capped`, under an ``asyncio.timeout`` for the deadline.

Everything refused raises a `ReplyRefused` (a `ValueError`, so an item boundary records it as the
item's outcome); each reader turns it into its own error with what to do. Nothing here imports
httpx: the caller passes its module.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from vhd.fileio import JSON_MAX_DEPTH, JSONTooDeep, json_depth

__all__ = [
    "BYTES_PER_NODE",
    "DEFAULT_MAX_REPLY_BYTES",
    "MAX_BYTES",
    "TIMEOUT",
    "ReplyRefused",
    "ReplyTooLarge",
    "ReplyTooSlow",
    "client_limits",
    "parse_json",
    "read_capped",
    "reply_limits",
]

DEFAULT_MAX_REPLY_BYTES = 32 * 1024 * 1024
"""Largest reply read from a model endpoint or detector API (a real answer is a few kilobytes;
one with per-token log-probabilities of a long answer, a few megabytes)."""

BYTES_PER_NODE = 256
"""`parse_json` allows one list or object per this many bytes of the byte cap (131,072 under the
default cap): a real reply has tens to a few thousand, and each costs 60-200 bytes of memory."""

_DEADLINE = "vhd_deadline"
"""The request extension that holds its deadline (``time.monotonic()`` seconds)."""

MAX_BYTES = "vhd_max_bytes"
"""A request extension that sets that request's byte cap instead of the client's (a bulk export)."""

TIMEOUT = "vhd_timeout"
"""A request extension that sets that request's deadline, in seconds, instead of the client's."""


class ReplyRefused(ValueError):
    """A server's reply that vhd will not read: too large, too slow, too deep or compressed."""


class ReplyTooLarge(ReplyRefused):
    """A reply over the byte cap (or holding too many lists and objects)."""


class ReplyTooSlow(ReplyRefused, TimeoutError):
    """A reply still arriving at its deadline."""


_OVERRIDE: ContextVar[dict[str, float]] = ContextVar("vhd_reply_limits", default={})  # noqa: B039 - never mutated


@contextmanager
def reply_limits(*, max_bytes: int | None = None, timeout: float | None = None) -> Iterator[None]:
    """Give the requests sent inside this block their own byte cap and deadline (a bulk download).

    For calls whose request a library builds (so no extension can be passed): the client's request
    hook reads the override from a context variable, which follows the running task.
    """
    limits = {MAX_BYTES: max_bytes, TIMEOUT: timeout}
    token = _OVERRIDE.set({k: v for k, v in limits.items() if v is not None})
    try:
        yield
    finally:
        _OVERRIDE.reset(token)


def _mib(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):.4g} GiB"
    return f"{n / (1 << 20):.4g} MiB" if n >= 1 << 20 else f"{n} bytes"


def _check_headers(headers: Any, max_bytes: int) -> None:
    encoding = str(headers.get("content-encoding") or "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise ReplyRefused(f"the server sent a compressed reply (Content-Encoding: {encoding}) although none was asked")
    length = headers.get("content-length")
    if length is not None and str(length).strip().isdigit() and int(length) > max_bytes:
        raise ReplyTooLarge(f"the reply is {_mib(int(length))}, over the cap of {_mib(max_bytes)}")


def _count(total: int, chunk: bytes, max_bytes: int, deadline: float | None, timeout: float | None) -> int:
    total += len(chunk)
    if total > max_bytes:
        raise ReplyTooLarge(f"the reply went past the cap of {_mib(max_bytes)}; reading stopped there")
    if deadline is not None and time.monotonic() > deadline:
        raise ReplyTooSlow(f"the reply was still arriving after {timeout:g} s")
    return total


async def read_capped(headers: Any, chunks: AsyncIterable[bytes], max_bytes: int) -> bytes:
    """A reply's whole body, refused as soon as it cannot be read within the byte cap.

    The headers are checked first: a compressed body, or a ``Content-Length`` over the cap, is
    refused before a byte of it is read; otherwise reading stops at the cap. The deadline is the
    caller's (wrap the call in ``asyncio.timeout``).

    Args:
        headers: The reply's headers (a case-insensitive mapping).
        chunks: The body as it arrives.
        max_bytes: Largest body read.

    Raises:
        ReplyRefused: Compressed.
        ReplyTooLarge: Announced or found over ``max_bytes``.
    """
    _check_headers(headers, max_bytes)
    parts: list[bytes] = []
    total = 0
    async for chunk in chunks:
        total = _count(total, chunk, max_bytes, None, None)
        parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


_STREAMS: dict[str, type] = {}


def _stream_class(module: Any) -> type:
    """A byte stream of ``module`` (httpx or httpx2) that counts, caps and times the body it passes on."""
    cls = _STREAMS.get(module.__name__)
    if cls is not None:
        return cls

    class BoundedStream(module.AsyncByteStream, module.SyncByteStream):  # type: ignore[misc]
        def __init__(self, inner: Any, max_bytes: int, deadline: float | None, timeout: float | None) -> None:
            self.inner, self.max_bytes, self.deadline, self.timeout = inner, max_bytes, deadline, timeout

        async def __aiter__(self) -> AsyncIterator[bytes]:
            total = 0
            async for chunk in self.inner:
                total = _count(total, chunk, self.max_bytes, self.deadline, self.timeout)
                yield chunk

        def __iter__(self) -> Iterator[bytes]:
            total = 0
            for chunk in self.inner:
                total = _count(total, chunk, self.max_bytes, self.deadline, self.timeout)
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

        def close(self) -> None:
            self.inner.close()

    _STREAMS[module.__name__] = BoundedStream
    return BoundedStream


def client_limits(
    module: Any, *, timeout: float, max_bytes: int = DEFAULT_MAX_REPLY_BYTES, asynchronous: bool = True
) -> dict[str, Any]:
    """Keyword arguments for an ``httpx``/``httpx2`` client that bound every reply it reads.

    Example::

        client = httpx.AsyncClient(**client_limits(httpx, timeout=60.0))

    Reading a body past ``max_bytes`` or past ``timeout`` seconds after its request was sent raises
    `ReplyTooLarge` or `ReplyTooSlow`, wherever it is read (the caller's code or a library's). The
    deadline is checked as chunks arrive; async callers also wrap the call in ``asyncio.timeout``.
    One request may set its own cap and deadline with the `MAX_BYTES` and `TIMEOUT` extensions
    (``client.get(url, extensions={MAX_BYTES: 1 << 30, TIMEOUT: 600.0})``).

    Args:
        module: The ``httpx`` or ``httpx2`` module the client comes from.
        timeout: Seconds a request may take from sending to its last byte (also the client's
            connect, read, write and pool timeout).
        max_bytes: Largest body read.
        asynchronous: For an ``AsyncClient`` (async hooks) rather than a ``Client``.

    Returns:
        ``timeout``, ``headers`` and ``event_hooks`` for the client's constructor (merge your own
        headers into ``headers``).
    """
    stream_cls = _stream_class(module)

    def on_request(request: Any) -> None:
        for name, value in _OVERRIDE.get().items():
            request.extensions.setdefault(name, value)
        request.extensions[_DEADLINE] = time.monotonic() + float(request.extensions.get(TIMEOUT, timeout))

    def on_response(response: Any) -> None:
        extensions = response.request.extensions
        cap = int(extensions.get(MAX_BYTES, max_bytes))
        _check_headers(response.headers, cap)
        seconds = float(extensions.get(TIMEOUT, timeout))
        response.stream = stream_cls(response.stream, cap, extensions.get(_DEADLINE), seconds)

    async def on_request_async(request: Any) -> None:
        on_request(request)

    async def on_response_async(response: Any) -> None:
        on_response(response)

    hooks = (
        {"request": [on_request_async], "response": [on_response_async]}
        if asynchronous
        else {"request": [on_request], "response": [on_response]}
    )
    return {
        "timeout": module.Timeout(timeout),
        "headers": {"Accept-Encoding": "identity"},
        "event_hooks": hooks,
    }


def parse_json(data: bytes | bytearray | str, *, max_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> Any:
    """Decode a reply's JSON, refusing what would recurse or blow up in memory.

    Args:
        data: The body (bytes are decoded as UTF-8, undecodable bytes replaced).
        max_bytes: The byte cap the body was read under: at most ``max_bytes // BYTES_PER_NODE``
            lists and objects are built.

    Raises:
        ReplyTooLarge: More lists and objects than allowed.
        ReplyRefused: Nested deeper than `vhd.fileio.JSON_MAX_DEPTH`.
        ValueError: Not JSON (`json.JSONDecodeError`).
    """
    text = data.decode("utf-8", "replace") if isinstance(data, bytes | bytearray) else data
    nodes = text.count("[") + text.count("{")  # an upper bound: brackets inside strings count too
    limit = max(1000, max_bytes // BYTES_PER_NODE)
    if nodes > limit:  # first: the count costs nothing, the depth scan copies the text
        raise ReplyTooLarge(f"the reply holds up to {nodes} lists and objects (at most {limit} are read)")
    if nodes > JSON_MAX_DEPTH and (depth := json_depth(text)) > JSON_MAX_DEPTH:
        raise ReplyRefused(f"the reply is {JSONTooDeep(depth, JSON_MAX_DEPTH)}")
    try:
        return json.loads(text)
    except RecursionError:  # unreachable behind the depth guard; the last line of defence
        raise ReplyRefused("the reply is nested too deeply to read") from None
