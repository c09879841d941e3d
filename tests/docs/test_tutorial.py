"""Every shell example of the tutorial (docs/tutorial.md) runs as written, in order, offline.

Each ```bash block runs with ``bash -euo pipefail`` in one empty folder, with ``vhd`` and
``python3`` meaning this interpreter. A comment line just before a block changes how it runs:

- ``<!-- docs-test: not-run (REASON) -->``: skipped; the reason must be given.
- ``<!-- docs-test: background URL -->``: a server; started in the background, the test waits until
  URL answers, and stops it at the end.

Loopback ports named in the page are replaced by free ones, so parallel runs cannot collide.
"""

from __future__ import annotations

import csv
import json
import os
import re
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

from tests.servers import popen_server

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
DIRECTIVE = re.compile(r"<!-- docs-test: (not-run|background) (.+?) -->")


@dataclass(frozen=True)
class Step:
    """One shell block of the page: its commands, how to run it, and the line it starts on."""

    script: str
    mode: str  # "run", "not-run" or "background"
    argument: str  # the reason (not-run) or the URL to wait for (background)
    line: int


def steps(text: str) -> list[Step]:
    """The page's bash blocks in order, each with the directive on the line before it."""
    found = []
    for match in re.finditer(r"^```bash\n(.*?)^```$", text, flags=re.S | re.M):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        directive = DIRECTIVE.fullmatch(before.strip())
        mode, argument = (directive.group(1), directive.group(2)) if directive else ("run", "")
        found.append(Step(match.group(1), mode, argument, text[: match.start()].count("\n") + 2))
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _shims(folder: Path) -> Path:
    """`vhd`, `python3` and `python` as this interpreter (the test environment)."""
    folder.mkdir()
    for name, target in {"vhd": f'"{sys.executable}" -m vhd', "python3": f'"{sys.executable}"'}.items():
        path = folder / name
        path.write_text(f'#!/bin/sh\nexec {target} "$@"\n', encoding="utf-8")
        path.chmod(0o755)
    (folder / "python").symlink_to(folder / "python3")
    return folder


def _wait_for(url: str, server: subprocess.Popen[bytes], log: Path, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"server exited ({server.returncode}) before {url} answered:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:  # a loopback URL of the page
                if reply.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    pytest.fail(f"{url} did not answer within {seconds:.0f} s:\n{log.read_text()}")


@pytest.fixture
def servers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for server in started:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


def test_directives_are_read() -> None:
    page = (
        "x\n<!-- docs-test: not-run (needs a GPU) -->\n```bash\nvhd generate\n```\n"
        "<!-- docs-test: background http://127.0.0.1:1/ -->\n```bash\nvhd serve s.db\n```\n```bash\nvhd show\n```\n"
    )
    assert [(s.mode, s.argument, s.script) for s in steps(page)] == [
        ("not-run", "(needs a GPU)", "vhd generate\n"),
        ("background", "http://127.0.0.1:1/", "vhd serve s.db\n"),
        ("run", "", "vhd show\n"),
    ]


@pytest.mark.slow
def test_every_tutorial_example_runs(tmp_path: Path, servers: list[subprocess.Popen[bytes]]) -> None:
    text = TUTORIAL.read_text(encoding="utf-8")
    for port in sorted(set(re.findall(r"127\.0\.0\.1:(\d{4,5})", text))):
        text = re.sub(rf"\b{port}\b", str(_free_port()), text)
    page_steps = steps(text)
    assert sum(s.mode == "run" for s in page_steps) >= 10, "the tutorial's examples were found"
    work = tmp_path / "work"
    work.mkdir()
    env = {
        **os.environ,
        "PATH": f"{_shims(tmp_path / 'bin')}{os.pathsep}{os.environ.get('PATH', '')}",
        "VHD_NO_USER_CONFIG": "1",
        "NO_COLOR": "1",
        "HF_HUB_OFFLINE": "1",
    }
    for step in page_steps:
        where = f"docs/tutorial.md line {step.line}"
        if step.mode == "not-run":
            assert re.fullmatch(r"\(\S.*\)", step.argument), f"{where}: a block not run says why"
            continue
        command = ["bash", "-euo", "pipefail", "-c", step.script]
        if step.mode == "background":
            log = tmp_path / f"server-{step.line}.log"
            with log.open("wb") as out:
                server = popen_server(command, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
            servers.append(server)
            _wait_for(step.argument, server, log)
            continue
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, f"{where} exited {done.returncode}:\n{step.script}\n{done.stdout}\n{done.stderr}"

    # what the page says happened did happen
    with (work / "clusters.csv").open(encoding="utf-8", newline="") as f:
        near = [row["path"] for row in csv.DictReader(f) if row["match"] == "near"]
    assert [Path(p).suffix for p in near] == [".png"], near  # the half-size coffee, fetched from the server
    assert "| vlm |" in (work / "report" / "table1.md").read_text(encoding="utf-8")
    assert (work / "annotations_images.csv").is_file() and (work / "annotations_videos.csv").is_file()
    assert (work / "dataset" / "README.md").is_file()
    rows = [json.loads(line) for line in (work / "annotations.jsonl").read_text(encoding="utf-8").splitlines()]
    paths = {Path(r["path"]).name for r in rows}
    assert "moon.png" not in paths and "coffee.jpg" in paths  # taken down; the kept one of its cluster
    assert len(rows) == 6  # 7 examples + the duplicate, less the duplicate, less the takedown
