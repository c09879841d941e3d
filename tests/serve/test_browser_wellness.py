"""Reviewer wellness in a real browser (Playwright driving Debian's chromium).

The app serves the example media plus silhouettes and line art. Every preview the browser shows
in the gallery and on each sample page is measured against its original (edge energy at 128 px,
at most a quarter); the page states the level in force; a revealed video plays, muted; a reveal
for N seconds hides the sample again by itself; the next sample is never revealed.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.optional import need_executable, need_module
from tests.serve.served import serving
from vhd.store.sqlite import Store

pytestmark = pytest.mark.slow
PLAYING = "() => { const v = document.getElementById('clip'); return v.currentTime > 0.3 && !v.paused; }"
PLAYER = "() => { const v=document.querySelector('#clip');return {muted: v.muted, t: v.currentTime, w: v.videoWidth}; }"


@pytest.fixture
def shapes_served(shapes_copy: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with serving(shapes_copy, tmp_path) as served:
        yield served.url, shapes_copy


async def _ratios(ctx: Any, url: str, srcs: list[str], store: Store) -> list[tuple[str, float]]:
    """Each shown preview's edge energy over its original's."""
    from PIL import Image

    from vhd.serve.thumbs import edge_energy, sample_frames

    out = []
    for src in srcs:
        sid = src.split("/thumb/")[1].split("?")[0]
        frame = int(src.split("frame=")[1].split("&")[0]) if "frame=" in src else 0
        sample = store.get_sample(sid)
        assert sample is not None
        original = sample_frames(sample)[frame]
        body = await (await ctx.request.get(url + src)).body()
        ratio = edge_energy(Image.open(io.BytesIO(body))) / edge_energy(original)
        out.append((f"{Path(sample.path).name}#{frame}", ratio))
    return out


async def _scenario(url: str, db: Path) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            ctx = await browser.new_context(viewport={"width": 1280, "height": 900})
            page = await ctx.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            await page.goto(url + "/")
            await page.wait_for_function("() => [...document.images].every(i => i.complete && i.naturalWidth > 0)")
            level = await page.locator("#preview-level").inner_text()
            srcs = await page.locator("#grid img").evaluate_all("els => els.map(e => e.getAttribute('src'))")
            links = await page.locator("#grid a.open").evaluate_all("els => els.map(e => e.getAttribute('href'))")
            with Store(db) as store:
                ratios = await _ratios(ctx, url, srcs, store)
                video = next(s for s in (store.get_sample(h.split("/sample/")[1].split("?")[0]) for h in links)
                             if s is not None and s.kind.value == "video")  # fmt: skip
                for href in links:  # every sample page's previews too
                    await page.goto(url + href)
                    shown = await page.locator(".media img").evaluate_all("els => els.map(e => e.getAttribute('src'))")
                    ratios += await _ratios(ctx, url, shown, store)
            # a video: blurred frames first, then the clip plays muted after the click
            await page.goto(f"{url}/sample/{video.id}")
            before = await page.locator("video").count()
            await page.click("#reveal")
            await page.wait_for_selector("video#clip")
            await page.wait_for_function(PLAYING, timeout=15000)
            playing = await page.evaluate(PLAYER)
            next_href = await page.locator("#next").get_attribute("href") if await page.locator("#next").count() else ""
            # reveal for 3 seconds: the page hides the sample by itself
            await page.goto(url + "/settings")
            await page.select_option("select[name=reveal_s]", "3")
            async with page.expect_navigation():
                await page.click("#settings-form button[type=submit]")
            await page.goto(url + links[0])
            await page.click("#reveal")
            await page.wait_for_selector("img.clear")
            clear_at = time.monotonic()
            await page.wait_for_selector("img.blurred", timeout=10000)
            hidden_after = time.monotonic() - clear_at
            hours = await page.locator("#preview-level").inner_text()
            await ctx.close()
        finally:
            await browser.close()
    return {
        "level": level,
        "ratios": ratios,
        "before": before,
        "playing": playing,
        "next_href": next_href,
        "hidden_after": hidden_after,
        "hours": hours,
        "errors": errors,
    }


def test_wellness_in_a_real_browser(shapes_served: tuple[str, Path]) -> None:
    need_executable("chromium", "apt-get install chromium")
    need_module("playwright", "pip install playwright (never `playwright install`: use Debian's chromium)")
    url, db = shapes_served
    got = asyncio.run(_scenario(url, db))
    assert "preview level 1 of 3, grayscale" in got["level"]
    names = {name.split("#")[0] for name, _ in got["ratios"]}
    assert {"horse.png", "figure_silhouette.png", "hand_silhouette.png", "line_art.png"} <= names
    assert len(got["ratios"]) >= 2 * (11 + 5)  # gallery and sample pages: 11 stills and 5 video frames each
    worst = max(got["ratios"], key=lambda item: item[1])
    assert worst[1] <= 0.25, worst
    assert got["before"] == 0  # no player before the reveal
    assert got["playing"]["muted"] is True and got["playing"]["t"] > 0.3 and got["playing"]["w"] > 0
    assert "reveal" not in (got["next_href"] or "")
    assert 2.5 <= got["hidden_after"] <= 8.0
    assert "2 reveal(s) in the last hour" in got["hours"]
    assert not got["errors"], got["errors"]
