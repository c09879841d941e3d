"""The ``openai`` backend against a real ``transformers serve`` process serving a tiny LLaVA.

The server runs offline (``HF_HUB_OFFLINE=1``, a private ``HF_HOME``) on 127.0.0.1, so this is
the whole path a user with a local OpenAI-compatible endpoint takes: SDK, HTTP, base64 images,
the server's chat template and generation.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.backends.test_hf import ask, picture
from vhd.backends import Backend, GenerateConfig, Output, create_backend

READY_TIMEOUT_S = 60.0
GREEDY = GenerateConfig(temperature=0, max_tokens=8)


@dataclass
class Served:
    base_url: str
    model: str
    log: Path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


@pytest.fixture(scope="module")
def served_llava(tiny_llava_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    cli = Path(sys.executable).parent / "transformers"
    if not cli.exists():
        pytest.skip("the transformers CLI is not installed (pip install 'transformers[serving]')")
    home = tmp_path_factory.mktemp("hf_home")
    (home / "hub").mkdir()  # without it GET /v1/models answers 500
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(home)}
    port = _free_port()
    log = home / "serve.log"
    command = [str(cli), "serve", str(tiny_llava_dir), "--device", "cpu"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_ready(proc, f"http://127.0.0.1:{port}/health", log)
        yield Served(f"http://127.0.0.1:{port}/v1", str(tiny_llava_dir), log)
    finally:
        _stop(proc)


def _client(served: Served) -> Backend:
    return create_backend("openai:" + served.model, {"openai": {"base_url": served.base_url, "max_retries": 0}})


@pytest.mark.slow
def test_image_message_gets_text_and_usage(served_llava: Served, openai_env: pytest.MonkeyPatch) -> None:
    backend = _client(served_llava)

    async def run() -> Output:
        await backend.check()
        try:
            return await backend.generate(ask(picture(1), "Is this image harmful?", system="Be brief."), GREEDY)
        finally:
            await backend.aclose()

    out = asyncio.run(run())
    assert out.text
    assert out.prompt_tokens > 16  # the image alone expands to 16 tokens
    assert 0 < out.completion_tokens <= 8
    assert out.finish_reason in {"stop", "length"}
    assert out.latency_s > 0


@pytest.mark.slow
def test_served_answers_match_the_local_hf_backend(served_llava: Served, openai_env: pytest.MonkeyPatch) -> None:
    conversations = [
        ask(picture(2), "Is this image harmful?"),
        ask(picture(3), picture(4), "Compare them.", system="Be brief."),
        ask("No image here."),
    ]
    remote = _client(served_llava)
    local = create_backend("hf:" + served_llava.model)

    async def run() -> tuple[list[Output], list[Output]]:
        try:
            served = list(await asyncio.gather(*(remote.generate(c, GREEDY) for c in conversations)))
            direct = [await local.generate(c, GREEDY) for c in conversations]
        finally:
            await remote.aclose()
            await local.aclose()
        return served, direct

    served, direct = asyncio.run(run())
    assert [o.text for o in served] == [o.text for o in direct]
    assert [o.prompt_tokens for o in served] == [o.prompt_tokens for o in direct]
    assert [o.completion_tokens for o in served] == [o.completion_tokens for o in direct]
