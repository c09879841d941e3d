"""`vhd serve` end to end in a real browser: Playwright driving Debian's chromium.

The app runs as a subprocess (``python -m vhd serve``) on a free loopback port over a store made
from the example media. One browser context walks the issue's scenario (gallery, blurred previews,
reveal, three labels by keyboard, filter, undo) while a second context, another reviewer, labels
at the same time. Screenshots go to the test's temp folder (``--basetemp`` to keep them).
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.optional import need_executable, need_module
from tests.serve.served import Served, serving
from vhd.store.sqlite import Store

pytestmark = pytest.mark.slow


@pytest.fixture
def served(store_copy: Path, tmp_path: Path) -> Iterator[Served]:
    with serving(store_copy, tmp_path) as app:
        yield app


def _variance_of_edges(data: bytes) -> float:
    from PIL import Image

    from vhd.serve.thumbs import edge_energy

    return edge_energy(Image.open(io.BytesIO(data)))


async def _alice(browser: Any, served: Served, shots: Path) -> dict[str, Any]:
    """The issue's scenario, step by step; returns what the checks need."""
    from PIL import Image

    from vhd.serve.thumbs import edge_energy

    ctx = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await ctx.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    await page.goto(served.url + "/")
    await page.wait_for_selector("#grid .card")
    await page.wait_for_function("() => [...document.images].every(i => i.complete && i.naturalWidth > 0)")
    await page.screenshot(path=str(shots / "1-gallery.png"), full_page=True)
    cards = await page.locator("#grid .card").count()
    # previews are blurred: each served thumbnail against its original
    srcs = await page.locator("#grid img").evaluate_all("els => els.map(e => e.getAttribute('src'))")
    with Store(served.store) as store:
        blurred = []
        for src in srcs:
            sid = src.split("/thumb/")[1].split("?")[0]
            frame = int(src.split("frame=")[1]) if "frame=" in src else 0
            sample = store.get_sample(sid)
            from vhd.serve.thumbs import sample_frames

            original = sample_frames(sample)[frame]  # type: ignore[arg-type]
            body = await (await ctx.request.get(served.url + src)).body()
            served_img = Image.open(io.BytesIO(body))
            blurred.append((edge_energy(served_img), edge_energy(original), served_img.size))
    # keyboard: j moves the focus, Enter opens the sample
    await page.keyboard.press("j")
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#label-form")
    first_url = page.url
    # reveal one sample: a click, then the clear image
    await page.click("#reveal")
    await page.wait_for_selector("img.clear")
    await page.wait_for_function("() => [...document.querySelectorAll('img.clear')].every(i => i.complete)")
    await page.screenshot(path=str(shots / "2-revealed.png"), full_page=True)
    clear_src = await page.locator("img.clear").first.get_attribute("src")
    # label three samples with the keyboard: y, n, y (each goes on to the next sample)
    labelled: list[tuple[str, bool]] = []
    for key in ("y", "n", "y"):
        await page.wait_for_selector("#label-form")
        sid = page.url.split("/sample/")[1].split("?")[0]
        async with page.expect_navigation():
            await page.keyboard.press(key)
        labelled.append((sid, key == "y"))
    await page.screenshot(path=str(shots / "3-after-labels.png"), full_page=True)
    progress_after_labels = await page.locator("#progress").inner_text()
    # filter: the labelled ones
    await page.goto(served.url + "/")
    await page.select_option("select[name=review]", "mine")
    async with page.expect_navigation():
        await page.click("#apply")
    mine = await page.locator("#grid .card").count()
    await page.screenshot(path=str(shots / "4-filter-mine.png"), full_page=True)
    # undo one (the newest) with the keyboard: back on the undone sample, in the same view
    async with page.expect_navigation():
        await page.keyboard.press("u")
    undone_url = page.url
    await page.goto(served.url + "/?review=mine")
    after_undo = await page.locator("#grid .card").count()
    await page.screenshot(path=str(shots / "5-after-undo.png"), full_page=True)
    await ctx.close()
    return {
        "cards": cards,
        "blurred": blurred,
        "first_url": first_url,
        "clear_src": clear_src,
        "labelled": labelled,
        "progress": progress_after_labels,
        "mine": mine,
        "after_undo": after_undo,
        "undone_url": undone_url,
        "errors": errors,
    }


async def _bob(browser: Any, served: Served, shots: Path) -> list[tuple[str, bool]]:
    """A second reviewer in another context, labelling from the end of the gallery at the same time."""
    ctx = await browser.new_context()
    page = await ctx.new_page()
    await page.goto(served.url + "/settings")
    await page.fill("input[name=reviewer]", "bob")
    async with page.expect_navigation():
        await page.click("#settings-form button[type=submit]")
    await page.goto(served.url + "/")
    links = await page.locator("#grid a.open").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    done: list[tuple[str, bool]] = []
    for href in links[-2:]:  # alice starts at the second card and labels three: no overlap
        await page.goto(served.url + href)
        sid = href.split("/sample/")[1].split("?")[0]
        async with page.expect_navigation():
            await page.keyboard.press("n")
        done.append((sid, False))
        await asyncio.sleep(0.05)
    await page.screenshot(path=str(shots / "bob.png"), full_page=True)
    await ctx.close()
    return done


async def _scenario(served: Served, shots: Path) -> tuple[dict[str, Any], list[tuple[str, bool]]]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            alice, bob = await asyncio.gather(_alice(browser, served, shots), _bob(browser, served, shots))
        finally:
            await browser.close()
    return alice, bob


def test_review_in_a_real_browser(served: Served, tmp_path: Path) -> None:
    need_executable("chromium", "apt-get install chromium")
    need_module("playwright", "pip install playwright (never `playwright install`: use Debian's chromium)")
    alice, bob = asyncio.run(_scenario(served, tmp_path))
    assert alice["cards"] == 7
    assert len(alice["blurred"]) == 6 + 5  # six photos, one video as its five frames
    for served_energy, original_energy, size in alice["blurred"]:
        assert served_energy <= 0.5 * original_energy
        assert max(size) <= 256
    assert "clear=" in alice["clear_src"]
    assert alice["labelled"][0][0] in alice["first_url"]
    assert len({sid for sid, _ in alice["labelled"]}) == 3
    assert alice["mine"] == 3 and alice["after_undo"] == 2
    assert f"/sample/{alice['labelled'][2][0]}?review=mine" in alice["undone_url"]
    assert not alice["errors"], alice["errors"]  # no CSP violation or script error in the console
    with Store(served.store) as store:
        labels = {item.id: item.harmful for item in store.labelled_set("review")}
        who = store.labelled_set_reviewers("review")
    kept = dict(alice["labelled"][:2])  # the third was undone
    expected = {**kept, **dict(bob)}
    assert labels == expected
    assert {who[sid] for sid in kept} == {"alice"} and {who[sid] for sid, _ in bob} == {"bob"}
