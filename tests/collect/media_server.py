"""A scriptable HTTP/1.1 server on 127.0.0.1 that misbehaves on purpose, for fetch tests and benchmarks.

Each path is a `Route`: a status and body, optionally slow (a delay before the headers, or a
trickle of small chunks), truncated (a ``Content-Length`` larger than what is sent, then the
connection is closed), oversized (filler bytes streamed after the body, chunked or declared),
failing for its first N requests, or a redirect. It speaks real HTTP/1.1 with keep-alive over
asyncio streams, so the client under test opens real sockets; nothing is mocked.

In tests it runs in a background thread::

    with MediaServer() as srv:
        srv.add("/a.png", Route(body=png_bytes))
        url = srv.url("/a.png")
        ...
        assert srv.hits["/a.png"] == 1

For benchmarks it runs as its own process (``python -m tests.collect.media_server ROUTES.json``),
printing ``PORT <n>`` once it listens; ROUTES.json maps paths to `Route` fields, with
``body_file`` naming a file whose bytes are the body.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

_REASONS = {
    200: "OK",
    301: "Moved Permanently",
    302: "Found",
    303: "See Other",
    307: "Temporary Redirect",
    308: "Permanent Redirect",
    404: "Not Found",
    410: "Gone",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_FILL = b"\0" * 65536


@dataclass
class Route:
    """How the server answers one path.

    Attributes:
        status: HTTP status.
        body: Response body.
        headers: Extra headers (``Location`` for redirects, ``Content-Type``...).
        delay: Seconds to wait before sending the headers.
        chunk_delay: Seconds between body chunks (a slow, trickling body).
        chunk_size: Bytes per body chunk.
        declare_length: ``Content-Length`` to declare instead of the true one; larger than what
            is sent makes a truncated response (the connection is closed after the body).
        chunked: Use chunked transfer encoding (no ``Content-Length``).
        extra_bytes: Zero bytes streamed after ``body`` (an oversized response).
        fail_first: The first this-many requests get ``fail_status`` instead.
        fail_status: Status of those failures.
        body_file: Read the body from this file (benchmark routes).
    """

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunk_delay: float = 0.0
    chunk_size: int = 65536
    declare_length: int | None = None
    chunked: bool = False
    extra_bytes: int = 0
    fail_first: int = 0
    fail_status: int = 500
    body_file: str | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Route:
        known = {f.name for f in fields(cls)}
        route = cls(**{k: v for k, v in d.items() if k in known})
        if route.body_file:
            route.body = Path(route.body_file).read_bytes()
        elif isinstance(d.get("body"), str):
            route.body = d["body"].encode()
        return route


class MediaServer:
    """The server; see the module docs."""

    def __init__(self, routes: dict[str, Route] | None = None) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.hits: Counter[str] = Counter()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.connections = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    # -- configuration ---------------------------------------------------------------------

    def add(self, path: str, route: Route) -> str:
        """Serve ``route`` at ``path`` and return its URL."""
        self.routes[path] = route
        return self.url(path)

    def url(self, path: str) -> str:
        """The URL of ``path`` on this server."""
        return f"http://127.0.0.1:{self.port}{path}"

    # -- protocol --------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
                parts = request_line.split(" ")
                path = parts[1] if len(parts) > 1 else "/"
                self.hits[path] += 1
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                try:
                    keep = await self._respond(writer, path)
                finally:
                    self.in_flight -= 1
                if not keep:
                    return
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            writer.close()

    async def _respond(self, writer: asyncio.StreamWriter, path: str) -> bool:
        route = self.routes.get(path) or Route(status=404, body=b"not here")
        status, body = route.status, route.body
        if self.hits[path] <= route.fail_first:
            status, body = route.fail_status, b"failing on purpose"
        if route.delay:
            await asyncio.sleep(route.delay)
        total = len(body) + (route.extra_bytes if status == route.status else 0)
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in route.headers.items()]
        if route.chunked:
            lines.append("Transfer-Encoding: chunked")
        else:
            declared = route.declare_length if route.declare_length is not None else total
            lines.append(f"Content-Length: {declared}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        sent = 0
        for start in range(0, len(body), route.chunk_size):
            sent += await self._send(writer, body[start : start + route.chunk_size], route)
        remaining = total - len(body)
        while remaining > 0:
            piece = _FILL[: min(remaining, route.chunk_size, len(_FILL))]
            sent += await self._send(writer, piece, route)
            remaining -= len(piece)
        if route.chunked:
            writer.write(b"0\r\n\r\n")
        await writer.drain()
        truncated = route.declare_length is not None and route.declare_length > sent
        return not truncated

    async def _send(self, writer: asyncio.StreamWriter, data: bytes, route: Route) -> int:
        if route.chunked:
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        else:
            writer.write(data)
        await writer.drain()
        if route.chunk_delay:
            await asyncio.sleep(route.chunk_delay)
        return len(data)

    # -- lifecycle -------------------------------------------------------------------------

    async def serve(self, port: int = 0) -> None:
        """Listen on 127.0.0.1 (port 0: any free port) until cancelled."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        async with self._server:
            await self._server.serve_forever()

    def __enter__(self) -> MediaServer:
        def main() -> None:
            self._loop = asyncio.new_event_loop()
            task = self._loop.create_task(self.serve())
            try:
                self._loop.run_until_complete(task)
            except asyncio.CancelledError:
                pass
            finally:
                self._loop.close()

        self._thread = threading.Thread(target=main, name="media-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("media server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        loop = self._loop
        if loop is not None and self._server is not None:
            loop.call_soon_threadsafe(self._stop)
        if self._thread is not None:
            self._thread.join(10)

    def _stop(self) -> None:
        for task in asyncio.all_tasks():
            task.cancel()


def main(argv: list[str]) -> None:
    """Serve the routes in a JSON file until killed; print ``PORT <n>`` when listening."""
    spec = json.loads(Path(argv[0]).read_text())
    server = MediaServer({path: Route.from_dict(d) for path, d in spec.items()})

    async def run() -> None:
        task = asyncio.create_task(server.serve())
        while not server.port:
            await asyncio.sleep(0.01)
        print(f"PORT {server.port}", flush=True)
        await task

    asyncio.run(run())


if __name__ == "__main__":
    main(sys.argv[1:])
