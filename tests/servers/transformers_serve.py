"""A real ``transformers serve`` process serving the tiny LLaVA, shared by every test that needs one.

The server runs offline (``HF_HUB_OFFLINE=1``, a private ``HF_HOME``) on 127.0.0.1; one process
serves the whole test session (the ``served_llava`` fixture in tests/conftest.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers import free_port, popen_server

READY_TIMEOUT_S = 60.0


@dataclass
class Served:
    base_url: str
    model: str
    log: Path


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"transformers serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    pytest.fail(f"transformers serve not ready after {READY_TIMEOUT_S:.0f} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextmanager
def serve(tiny_llava_dir: Path, home: Path) -> Iterator[Served]:
    """Start ``transformers serve`` on the model directory; stop it on exit."""
    cli = Path(sys.executable).parent / "transformers"
    if not cli.exists():
        pytest.skip("the transformers CLI is not installed (pip install 'transformers[serving]')")
    (home / "hub").mkdir()  # without it GET /v1/models answers 500
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(home)}
    port = free_port()
    log = home / "serve.log"
    command = [str(cli), "serve", str(tiny_llava_dir), "--device", "cpu"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as sink:
        proc = popen_server(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        _wait_ready(proc, f"http://127.0.0.1:{port}/health", log)
        yield Served(f"http://127.0.0.1:{port}/v1", str(tiny_llava_dir), log)
    finally:
        _stop(proc)
