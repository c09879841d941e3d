"""Running `vhd serve` for a browser test, and a store of drawn, benign pictures big enough to label 100 of.

`serving` starts the app as a subprocess (``python -m vhd serve``) on a free loopback port and
stops it after; `draw_pictures` paints simple shapes (discs, squares, stripes) in plain colours,
some only 48 px wide, so nothing shown in a test or a screenshot is anything but geometry.
"""

from __future__ import annotations

import csv
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
from typing import Any

import pytest

from tests.optional import need_module
from tests.servers import free_port, popen_server

SRC = Path(__file__).resolve().parents[2] / "src"
COLOURS = [(214, 69, 65), (52, 120, 198), (64, 160, 90), (240, 180, 40), (130, 80, 170), (30, 30, 30)]
SHAPES = ("disc", "square", "stripes", "ring")


@dataclass
class Served:
    url: str
    store: Path
    log: Path


@contextmanager
def serving(store: Path, tmp_path: Path, *args: str) -> Iterator[Served]:
    """`vhd serve STORE` on a free port as reviewer alice (``args`` are more flags), until the block ends."""
    need_module("starlette", "pip install 'vhd[serve]'")
    need_module("uvicorn", "pip install 'vhd[serve]'")
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "vhd", "serve", str(store), "--port", str(port), "--reviewer", "alice", *args]
    with log.open("wb") as sink:
        proc = popen_server(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vhd serve exited with {proc.returncode}:\n{log.read_text()}")
            try:
                with urllib.request.urlopen(url + "/static/app.css", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vhd serve not ready after 30 s:\n{log.read_text()}")
            time.sleep(0.1)
        yield Served(url, store, log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def draw_pictures(folder: Path, n: int, small_every: int = 10) -> Path:
    """``n`` PNGs of plain shapes and a manifest (``path,kind,source,keyword``); every ``small_every``-th is 48 px.

    Returns:
        The manifest's path.
    """
    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        side = 48 if i % small_every == 0 else 160
        colour, shape = COLOURS[i % len(COLOURS)], SHAPES[(i // len(COLOURS)) % len(SHAPES)]
        paper = (250 - i % 16, 248 - (i // 16) % 16, 240)  # a shade of its own: no two pictures are equal
        image = Image.new("RGB", (side, side), paper)
        draw = ImageDraw.Draw(image)
        m = side // 6 + (i % 5)
        if shape == "disc":
            draw.ellipse((m, m, side - m, side - m), fill=colour)
        elif shape == "square":
            draw.rectangle((m, m, side - m, side - m), fill=colour)
        elif shape == "stripes":
            for x in range(0, side, max(4, side // 8)):
                draw.rectangle((x, 0, x + max(2, side // 16), side), fill=colour)
        else:
            draw.ellipse((m, m, side - m, side - m), outline=colour, width=max(3, side // 12))
        name = f"{i:03d}-{shape}.png"
        image.save(folder / name)
        rows.append({"path": name, "kind": "image", "source": "real", "keyword": f"{shape} {i}"})
    manifest = folder / "manifest.csv"
    with manifest.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["path", "kind", "source", "keyword"])
        writer.writeheader()
        writer.writerows(rows)
    return manifest


@contextmanager
def chromium_page() -> Iterator[Any]:
    """A chromium page (1280x900, Debian's chromium) that fails the test on any script error or CSP refusal.

    Skips (or, under ``VHD_REQUIRE_ALL``, fails) when chromium or playwright is missing.
    """
    from tests.optional import need_executable

    need_executable("chromium", "apt-get install chromium")
    need_module("playwright", "pip install playwright (never `playwright install`: use Debian's chromium)")
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)  # a CSP refusal too
        try:
            yield page
        finally:
            browser.close()
    assert not errors, errors
