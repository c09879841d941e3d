"""A loopback server speaking OpenAI's files and batches endpoints, for ``--batch-api`` tests.

Endpoints, with the documented shapes: ``POST /v1/files`` (multipart: ``purpose``, ``file``) ->
a file object; ``POST /v1/batches`` (``input_file_id``, ``endpoint``, ``completion_window``,
``metadata``) -> a batch object; ``GET /v1/batches/{id}`` -> the batch, whose status moves
``validating`` -> ``in_progress`` -> ``completed`` one step per poll (``steps``); ``GET
/v1/files/{id}/content`` -> the file's bytes. A completed batch's output file has one line per
request, ``{"id", "custom_id", "response": {"status_code": 200, "request_id", "body": <chat
completion>}, "error": null}``; requests for which ``fail(body)`` is true go to the error file with
``status_code`` 500. ``GET /v1/models`` answers an empty list (the backend's reachability check).

``broken`` makes every ``GET /v1/batches/{id}`` answer HTTP 500 (an endpoint down while batches
are processed); the batches still complete on the server's side. Hostile result files:
``mangle(body)`` returning bytes replaces that request's output line with them (a line nested
200,000 deep...); ``endless_files`` makes ``GET /v1/files/{id}/content`` of a result file a chunked
body that never ends.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], str]


class BatchServer:
    """The server; use as a context manager. ``base_url`` is ``http://127.0.0.1:PORT/v1``."""

    def __init__(self, reply: Reply, *, steps: int = 2, fail: Callable[[dict[str, Any]], bool] | None = None) -> None:
        self.reply = reply
        self.steps = steps
        self.fail = fail or (lambda _b: False)
        self.broken = False
        self.mangle: Callable[[dict[str, Any]], bytes | None] = lambda _b: None
        self.endless_files = False
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.polls: dict[str, int] = {}
        self.completed: set[str] = set()  # batches whose output and error files are written
        self.uploads: list[list[dict[str, Any]]] = []  # each uploaded batch file's request lines
        self.log: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> BatchServer:
        handler = type("Handler", (_Handler,), {"server_state": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- state ------------------------------------------------------------------------------

    def new_file(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        with self._lock:
            fid = f"file-{len(self.files) + 1}"
            self.files[fid] = data
        return {
            "id": fid,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }

    def create_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        lines = [json.loads(x) for x in self.files[body["input_file_id"]].decode().splitlines() if x.strip()]
        with self._lock:
            self.uploads.append(lines)
            bid = f"batch_{len(self.batches) + 1}"
            self.batches[bid] = {
                "id": bid,
                "object": "batch",
                "endpoint": body["endpoint"],
                "input_file_id": body["input_file_id"],
                "completion_window": body["completion_window"],
                "status": "validating",
                "created_at": int(time.time()),
                "metadata": body.get("metadata"),
                "output_file_id": None,
                "error_file_id": None,
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            }
            self.polls[bid] = 0
            return dict(self.batches[bid])

    def advance(self, bid: str) -> dict[str, Any]:
        """One poll: move the batch one step; complete it (writing its files) at the last step."""
        with self._lock:
            batch = self.batches[bid]
            self.polls[bid] += 1
            if batch["status"] != "completed":
                batch["status"] = "in_progress" if self.polls[bid] < self.steps else "completed"
        if batch["status"] == "completed" and bid not in self.completed:
            self._complete(batch)
        return dict(batch)

    def complete_all(self) -> None:
        """Finish every batch now (what the provider does while the client is away)."""
        for bid in list(self.batches):
            self.batches[bid]["status"] = "completed"
            if bid not in self.completed:
                self._complete(self.batches[bid])

    def _complete(self, batch: dict[str, Any]) -> None:
        self.completed.add(batch["id"])
        lines = [json.loads(x) for x in self.files[batch["input_file_id"]].decode().splitlines() if x.strip()]
        out, err = [], []
        for i, line in enumerate(lines):
            body = line["body"]
            if self.fail(body):
                err.append(
                    {
                        "id": f"batch_req_{i}",
                        "custom_id": line["custom_id"],
                        "response": {
                            "status_code": 500,
                            "request_id": f"req_{i}",
                            "body": {"error": {"message": "boom"}},
                        },
                        "error": None,
                    }
                )
                continue
            text = self.reply(body)
            completion = {
                "id": f"chatcmpl-{i}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": len(text.split()), "total_tokens": 100},
            }
            out.append(
                {
                    "id": f"batch_req_{i}",
                    "custom_id": line["custom_id"],
                    "response": {"status_code": 200, "request_id": f"req_{i}", "body": completion},
                    "error": None,
                }
            )
        if out:
            bodies = {line["custom_id"]: line["body"] for line in lines}
            data = b"".join((self.mangle(bodies[x["custom_id"]]) or json.dumps(x).encode()) + b"\n" for x in out)
            batch["output_file_id"] = self.new_file(data, "out.jsonl", "batch_output")["id"]
        if err:
            batch["error_file_id"] = self.new_file(
                "".join(json.dumps(x) + "\n" for x in err).encode(), "err.jsonl", "batch_output"
            )["id"]
        batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_state: BatchServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream" if raw is not None else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.server_state.log.append((self.command, self.path, status))

    def _endless(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        frame = b"10000\r\n" + b"\n" * 0x10000 + b"\r\n"
        for _ in range(1 << 15):  # 2 GiB at most, should the client never stop
            try:
                self.wfile.write(frame)
            except OSError:
                break
        self.close_connection = True

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:
        s = self.server_state
        path = self.path.split("?")[0]
        if path == "/v1/models":
            self._send(200, {"object": "list", "data": []})
        elif path.startswith("/v1/batches/"):
            bid = path.rsplit("/", 1)[1]
            if s.broken:
                self._send(500, {"error": {"message": "service unavailable", "type": "server_error"}})
            elif bid not in s.batches:
                self._send(404, {"error": {"message": f"no batch {bid}"}})
            else:
                self._send(200, s.advance(bid))
        elif path.startswith("/v1/files/") and path.endswith("/content"):
            fid = path.split("/")[3]
            if fid in s.files and s.endless_files and fid not in {b["input_file_id"] for b in s.batches.values()}:
                self._endless()
            elif fid in s.files:
                self._send(200, None, raw=s.files[fid])
            else:
                self._send(404, {"error": {"message": f"no file {fid}"}})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        s = self.server_state
        body = self._body()
        if self.path == "/v1/files":
            head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
            fields: dict[str, Any] = {}
            filename = "upload.jsonl"
            for part in msg.iter_parts():
                name = part.get_param("name", header="content-disposition")
                fields[str(name)] = part.get_payload(decode=True)
                filename = part.get_filename() or filename
            if fields.get("purpose") != b"batch" or "file" not in fields:
                self._send(400, {"error": {"message": "purpose must be batch, with a file"}})
                return
            self._send(200, s.new_file(fields["file"], filename, "batch"))
        elif self.path == "/v1/batches":
            data = json.loads(body)
            if data.get("input_file_id") not in s.files or data.get("endpoint") != "/v1/chat/completions":
                self._send(400, {"error": {"message": "bad batch request"}})
                return
            self._send(200, s.create_batch(data))
        else:
            self._send(404, {"error": {"message": "not found"}})
