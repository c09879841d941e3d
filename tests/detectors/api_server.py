"""A tiny JSON HTTP server on 127.0.0.1 for replaying moderation APIs (Hive, OpenAI moderation).

``ApiServer(handler)`` where ``handler(request) -> (status, body, headers)``; ``request`` has
``path``, ``headers`` (lower-case keys), ``body`` (bytes) and ``files`` (multipart parts by
field name -> bytes). Failures queued with ``fail_next([429, 500, ...])`` are answered first;
hostile answers queued with ``hostile_next([Failure.trickle(), ...])`` (the chat server's
`tests.servers.chat_server.Failure`: stalls, trickles, endless, huge and deep bodies) before them.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def json(self) -> Any:
        return json.loads(self.body)


Handler = Callable[[Request], tuple[int, Any, dict[str, str]]]


def _multipart(content_type: str, body: bytes) -> dict[str, bytes]:
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    files: dict[str, bytes] = {}
    for part in msg.iter_parts():  # type: ignore[attr-defined]
        name = part.get_param("name", header="content-disposition")
        if name:
            files[str(name)] = part.get_payload(decode=True) or b""
    return files


class ApiServer:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self.failures: deque[int] = deque()
        self.hostile: deque[Any] = deque()
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                ctype = headers.get("content-type", "")
                files = _multipart(ctype, body) if ctype.startswith("multipart/") else {}
                req = Request(self.path, headers, body, files)
                outer.requests.append(req)
                if outer.hostile:
                    failure = outer.hostile.popleft()
                    if failure.write is not None:
                        failure.write(self)
                        return
                    status, data, extra = failure.status, failure.body, {}
                elif outer.failures:
                    status, payload = outer.failures.popleft(), {"error": "replayed failure"}
                    extra = {"Retry-After": "0", "retry-after-ms": "1"}
                    data = json.dumps(payload).encode()
                else:
                    status, payload, extra = outer.handler(req)
                    data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST  # the same answers (Pexels' search is a GET)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def fail_next(self, statuses: Iterable[int]) -> None:
        self.failures.extend(statuses)

    def hostile_next(self, failures: Iterable[Any]) -> None:
        """Queue hostile answers (`tests.servers.chat_server.Failure` with ``write`` or a ``body``)."""
        self.hostile.extend(failures)

    def __enter__(self) -> ApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
