"""A whole `vhd annotate` against an endpoint that echoes every credential back: none is kept.

The loopback server below speaks just enough of the OpenAI Chat Completions API. In ``reject``
mode it answers 401 with an error that quotes the request's ``Authorization`` header (the
``Basic base64(user:key)`` form when the base URL carries user info), its path and query, and
the ``extra_body`` key; in ``echo`` mode the models' replies quote the same, raw, base64- and
URL-encoded. The keys sit in the environment, the user info, the path, the query and
``extra_body``. Afterwards the store file, every export format (the Hugging Face dataset too),
``vhd show``, ``vhd runs``, the ``-vv`` logs (text and JSON) and every line printed are searched
for each secret in every encoding: no hit.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from tests.annotate.test_api import make_images
from vhd.cli.main import main
from vhd.redaction import forget_secrets

ENV_KEY = "sk-env-SECRET0a1b2c3d"
USER_KEY = "sk-userinfo-SECRET1x2y3z"
PATH_KEY = "sk-path-SECRET4q5r6s7t"
QUERY_KEY = "query-SECRET8u9v0w"
BODY_KEY = "body-SECRET5e6f7g8h"
SECRETS = (ENV_KEY, USER_KEY, PATH_KEY, QUERY_KEY, BODY_KEY)


def encodings(secret: str) -> set[str]:
    """The texts a secret can be found as: raw, URL-encoded, and base64 (also inside longer base64)."""
    forms = {secret, quote(secret, safe=""), quote_plus(secret), quote(secret, safe="").lower()}
    raw = secret.encode()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms.add(encode(raw).decode().rstrip("="))
        for offset in (1, 2):  # the bytes before it shift the encoding; the middle groups are its own
            text = encode(b"x" * offset + raw).decode()
            forms.add(text[4 : 4 * ((offset + len(raw)) // 3)])
    return forms


FORMS = {secret: encodings(secret) for secret in SECRETS}


def hits(text: str | bytes) -> list[str]:
    """Every secret form found in ``text``."""
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    return [form for forms in FORMS.values() for form in forms if form.encode() in data]


class _Echo(BaseHTTPRequestHandler):
    server: _EchoServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "test"}]})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw or b"{}")
        auth = self.headers.get("Authorization", "")
        with self.server.lock:
            self.server.seen.append(f"{auth} {self.path} {body.get('api_key')}")
        said = f"key was {auth}; url {self.path} ({base64.b64encode(self.path.encode()).decode()})"
        said += f"; body {body.get('api_key')} ({quote(json.dumps(body.get('api_key')), safe='')})"
        if self.server.mode == "reject":
            error = {"message": f"Incorrect API key provided: {said}", "type": "invalid_request_error"}
            self._send(401, {"error": {**error, "code": "invalid_api_key"}})
            return
        system = body["messages"][0]["content"]
        system = system if isinstance(system, str) else " ".join(p.get("text", "") for p in system)
        text = f"Yes, harmful: {said}" if "judge" in system else f"1. {said}\n2. Another point."
        usage = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        self._send(200, {"id": "c", "object": "chat.completion", "model": "m", "choices": [choice], "usage": usage})


class _EchoServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Echo)
        self.mode = "reject"
        self.lock = threading.Lock()
        self.seen: list[str] = []


@pytest.fixture
def echo_server() -> Iterator[_EchoServer]:
    srv = _EchoServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _config(path: Path, port: int, userinfo: bool) -> Path:
    who = f"user:{USER_KEY}@" if userinfo else ""
    path.write_text(
        "[backends.openai]\n"
        f'base_url = "http://{who}127.0.0.1:{port}/{PATH_KEY}/v1?api-key={QUERY_KEY}"\n'
        f'extra_body = {{ api_key = "{BODY_KEY}" }}\n'
        "max_retries = 0\nbackoff_base = 0.01\n"
    )
    return path


def test_an_echoing_endpoint_leaves_no_secret_anywhere(
    echo_server: _EchoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    db = tmp_path / "s.db"
    printed: list[str] = []
    port = echo_server.server_address[1]
    phases = [  # (images, server mode, user info in base_url, log format)
        ("rejected", 9, "reject", True, "text"),  # 8 failures in a row stop the run: the stop line quotes one
        ("echo_basic", 2, "echo", True, "json"),
        ("echo_bearer", 2, "echo", False, "text"),
    ]
    for size, (name, count, mode, userinfo, log_format) in enumerate(phases, start=40):
        make_images(tmp_path / name, count, size=size)  # sizes differ: no sample is another phase's
        echo_server.mode = mode
        cfg = _config(tmp_path / f"{name}.toml", port, userinfo)
        args = ["annotate", str(tmp_path / name), "--model", "openai:m", "--store", str(db), "--config", str(cfg)]
        code = main([*args, "--no-progress", "-vv", "--log-format", log_format, "--concurrency", "1"])
        assert code in (0, 1), code
        out = capsys.readouterr()
        printed += [out.out, out.err]
    forget_secrets()  # what follows runs as a later process would: it knows no secret

    # the secrets did reach the endpoint, in each form (or the test would prove nothing)
    seen = "\n".join(echo_server.seen)
    assert f"Basic {base64.b64encode(f'user:{USER_KEY}'.encode()).decode()}" in seen
    assert f"Bearer {ENV_KEY}" in seen
    assert all(s in seen for s in (PATH_KEY, QUERY_KEY, BODY_KEY))
    assert any("samples in a row failed with" in text for text in printed)  # the stop line was printed
    assert any('"level": "info"' in text for text in printed), printed  # the JSON log lines were printed

    # every output format
    outputs: dict[str, str | bytes] = {}
    for fmt in ("vhd11k-csv", "jsonl", "parquet"):
        target = tmp_path / "exports" / f"all.{fmt}"
        assert main(["export", str(db), "--format", fmt, "--include-unparsed", "-o", str(target)]) == 0
        for f in (tmp_path / "exports").glob(f"all*.{fmt}"):
            outputs[f.name] = f.read_bytes()
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "exports" / "all.parquet").to_pylist()
    outputs["parquet rows"] = json.dumps(table, default=str)
    texts = json.dumps(table, default=str)
    assert "key was" in texts and "Yes, harmful" in texts and "Incorrect API key provided" in texts

    try:
        import datasets
    except ImportError:
        datasets = None
    if datasets is not None:
        hf = tmp_path / "exports" / "hf"
        assert main(["export", str(db), "--format", "hf", "--include-unparsed", "-o", str(hf)]) == 0
        outputs.update({str(f): f.read_bytes() for f in hf.rglob("*") if f.is_file()})
        rows = [r for split in datasets.load_from_disk(str(hf)).values() for r in split]
        outputs["hf rows"] = json.dumps([{k: v for k, v in r.items() if k != "image"} for r in rows], default=str)

    for sample in sorted((tmp_path / "rejected").iterdir())[:2] + sorted((tmp_path / "echo_basic").iterdir()):
        for extra in ([], ["--json"]):
            main(["show", str(db), str(sample), *extra])
    for extra in ([], ["--json"]):
        assert main(["runs", str(db), *extra]) == 0
    out = capsys.readouterr()
    printed += [out.out, out.err]
    assert "key was" in out.out  # vhd show printed the replies

    for f in tmp_path.glob("s.db*"):
        outputs[f.name] = f.read_bytes()
    outputs.update({f"printed {i}": text for i, text in enumerate(printed)})
    found = {where: hits(data) for where, data in outputs.items() if hits(data)}
    assert found == {}
