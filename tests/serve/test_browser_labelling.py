"""Labelling in a real browser (Playwright driving Debian's chromium): every hotkey, bulk label and
its undo, zoom on a revealed image, 100 labels by keyboard alone, and accessibility (axe-core, and a
walk with Tab over every control).

The store holds 110 drawn pictures of plain shapes (some 48 px wide) annotated by the scripted
demo model. Screenshots are kept as test artifacts in the test's temp folder (``--basetemp DIR`` to
keep them; never committed). ``VHD_UPDATE_SCREENSHOTS=1`` also writes the README's two screenshots
to ``docs/img/``.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.optional import need_module
from tests.serve.served import Served, chromium_page, draw_pictures, serving
from vhd.cli.main import main
from vhd.store.gallery import GalleryFilter
from vhd.store.migrations import backup_store
from vhd.store.sqlite import Store
from vhd.taxonomy.taxonomy import default_taxonomy

pytestmark = pytest.mark.slow
PICTURES = 110
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
CONTROLS = """() => {
  const which = 'a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]';
  const all = [...document.querySelectorAll(which)].filter(e => e.checkVisibility() && e.tabIndex >= 0);
  all.forEach((e, k) => { e.dataset.control = k; });
  return all.length;
}"""
"""Numbers every visible control that Tab should reach; returns how many."""


@pytest.fixture(scope="session")
def drawn_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("drawn")
    manifest = draw_pictures(root / "media", PICTURES)
    db = root / "drawn.db"
    assert main(["annotate", str(manifest), "--model", "scripted:demo", "--store", str(db), "--no-progress"]) == 0
    with Store(db) as store:
        assert store.review_total() == PICTURES
    return db


@pytest.fixture
def served(drawn_store: Path, tmp_path: Path) -> Iterator[Served]:
    db = tmp_path / "run.db"
    backup_store(drawn_store, db)
    with serving(db, tmp_path) as app:
        yield app


@pytest.fixture
def page(served: Served) -> Iterator[Any]:
    """A chromium page (1280x900) that fails the test on any script error or CSP violation."""
    with chromium_page() as tab:
        yield tab


def _sid(url: str) -> str:
    match = re.search(r"/sample/([0-9a-f]{64})", url)
    assert match, url
    return match.group(1)


def _press(page: Any, key: str) -> None:
    with page.expect_navigation():
        page.keyboard.press(key)


def _labels(db: Path) -> dict[str, tuple[bool, list[str]]]:
    with Store(db) as store:
        if "review" not in store.labelled_sets():
            return {}
        return {i.id: (i.harmful, i.categories) for i in store.labelled_set("review")}


def test_each_hotkey(served: Served, page: Any, tmp_path: Path) -> None:
    names = [c.name for c in default_taxonomy()]
    page.goto(served.url + "/")
    cards = page.locator("#grid a.open")
    first, second = cards.nth(0).get_attribute("href"), cards.nth(1).get_attribute("href")
    # gallery: j / k move the focus, Enter opens
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.getAttribute('href')") == second
    page.keyboard.press("k")
    assert page.evaluate("document.activeElement.getAttribute('href')") == first
    _press(page, "Enter")
    opened = _sid(page.url)
    # i opens the instructions, Escape closes them
    assert page.locator("#guide").is_hidden()
    page.keyboard.press("i")
    assert page.locator("#guide").is_visible() and names[0] in page.locator("#guide").inner_text()
    page.keyboard.press("Escape")
    assert page.locator("#guide").is_hidden()
    # 1-0 tick each category, a second press unticks it
    boxes = page.locator("#categories input[name=categories]")
    for k, key in enumerate("1234567890"):
        page.keyboard.press(key)
        assert boxes.nth(k).is_checked(), key
    for key in "234567890":
        page.keyboard.press(key)
    assert [boxes.nth(k).is_checked() for k in range(10)] == [True] + [False] * 9
    page.keyboard.press("3")
    # y labels harmful with the ticked categories and goes on to the next sample
    _press(page, "y")
    assert _labels(served.store)[opened] == (True, sorted([names[0], names[2]]))
    after_y = _sid(page.url)
    assert after_y != opened
    # n labels not harmful
    _press(page, "n")
    assert _labels(served.store)[after_y] == (False, [])
    # u undoes it and goes back to the undone sample
    _press(page, "u")
    assert _sid(page.url) == after_y and after_y not in _labels(served.store)
    # ArrowRight goes to the next sample, g to the gallery
    _press(page, "ArrowRight")
    assert _sid(page.url) != after_y
    _press(page, "g")
    assert page.locator("#grid").count() == 1
    page.screenshot(path=str(tmp_path / "hotkeys-gallery.png"))


def test_zoom_and_pan_on_a_revealed_small_image(served: Served, page: Any, tmp_path: Path) -> None:
    with Store(served.store) as store:
        small = store.gallery_page(GalleryFilter(keyword="disc 0"))[0].sample_id  # a 48 px picture
    page.goto(f"{served.url}/sample/{small}")
    _press(page, "r")  # reveal with its key
    page.wait_for_function("() => [...document.querySelectorAll('.media img.clear')].every(i => i.complete)")
    box = page.locator(".media .zoom").first
    img = box.locator("img")
    assert img.evaluate("i => i.naturalWidth") == 48
    assert img.bounding_box()["width"] >= 6 * 48  # scaled up to the frame
    assert "small" in (box.get_attribute("class") or "")  # drawn with sharp pixels
    page.keyboard.press("+")
    page.keyboard.press("+")
    assert box.get_attribute("data-scale") == "2.25"
    page.screenshot(path=str(tmp_path / "zoomed.png"))
    box.focus()
    before = img.evaluate("i => i.style.transform")
    page.keyboard.press("ArrowLeft")  # pans the focused image, does not leave the page
    assert img.evaluate("i => i.style.transform") != before and _sid(page.url) == small
    page.keyboard.press("-")
    assert box.get_attribute("data-scale") == "1.50"
    page.keyboard.press("z")
    assert box.get_attribute("data-scale") == "1.00"
    centre = box.bounding_box()
    page.mouse.move(centre["x"] + 20, centre["y"] + 20)
    page.mouse.wheel(0, -100)
    assert box.get_attribute("data-scale") == "1.25"
    page.mouse.down()
    page.mouse.move(centre["x"] + 60, centre["y"] + 60)
    page.mouse.up()
    assert _sid(page.url) == small


def test_bulk_label_and_undo(served: Served, page: Any, tmp_path: Path) -> None:
    page.goto(served.url + "/")
    ids = [_sid(h) for h in page.locator("#grid a.open").evaluate_all("els => els.map(e => e.href)")]
    cards = page.locator("#grid a.open")
    cards.nth(1).click(modifiers=["Control"])  # ctrl-click selects instead of opening
    cards.nth(4).click(modifiers=["Shift"])  # shift-click selects the range
    assert page.url.rstrip("/") == served.url
    assert page.locator("#picked").inner_text() == "4 selected"
    page.keyboard.press("j")  # focus moves to a card, x toggles it
    focused = page.evaluate("document.activeElement.closest('.card').dataset.id")
    page.keyboard.press("x")
    picked = set(page.locator("#grid input.pick:checked").evaluate_all("els => els.map(e => e.value)"))
    assert picked == set(ids[1:5]) ^ {focused}
    page.select_option("#bulk-category", default_taxonomy().categories[4].name)
    page.screenshot(path=str(tmp_path / "bulk-selected.png"))
    cards.nth(0).focus()  # keys again (a focused list box keeps its keys)
    _press(page, "y")  # y labels the selection
    labels = _labels(served.store)
    assert set(labels) == picked and all(v == (True, [default_taxonomy().categories[4].name]) for v in labels.values())
    assert f"undo harmful on {len(picked)} samples" in page.locator("#undo").inner_text()
    _press(page, "u")
    assert _labels(served.store) == {} and "/sample/" not in page.url  # the whole batch; still the gallery


def test_100_labels_by_keyboard_alone(served: Served, page: Any, tmp_path: Path) -> None:
    shots = tmp_path / "shots"
    shots.mkdir()
    page.goto(served.url + "/?review=unreviewed")
    page.keyboard.press("j")
    page.keyboard.press("k")
    _press(page, "Enter")
    expected: dict[str, tuple[bool, list[str]]] = {}
    names = [c.name for c in default_taxonomy()]
    start = time.perf_counter()
    shooting = 0.0
    for k in range(100):
        sid = _sid(page.url)
        cats = [names[k % 10]] if k % 4 == 0 else []
        if cats:
            page.keyboard.press("1234567890"[k % 10])
        harmful = k % 3 == 0
        _press(page, "y" if harmful else "n")
        expected[sid] = (harmful, cats)
        if k in (0, 49, 99):
            t = time.perf_counter()
            page.screenshot(path=str(shots / f"label-{k + 1:03d}.png"))
            shooting += time.perf_counter() - t
    wall = time.perf_counter() - start
    print(
        f"\n100 labels by keyboard: {wall:.2f} s wall ({wall - shooting:.2f} s without screenshots), shots in {shots}"
    )
    assert _labels(served.store) == expected
    assert "reviewed 100 / 110" in page.locator("#progress").inner_text()
    (tmp_path / "timing.txt").write_text(f"{wall:.3f} {wall - shooting:.3f}\n")


def test_every_control_is_reachable_by_keyboard_and_named(served: Served, page: Any, tmp_path: Path) -> None:
    need_module("axe_playwright_python", "pip install axe-playwright-python")
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    page.goto(served.url + "/")
    sample = page.locator("#grid a.open").first.get_attribute("href")
    pages = {
        "gallery": "/",
        "sample": sample,
        "revealed": sample + ("&" if "?" in sample else "?") + "reveal=1",
        "instructions": "/instructions",
        "histograms": "/histograms",
        "settings": "/settings",
        "agreement": "/agreement",
    }
    found: dict[str, Any] = {}
    for name, path in pages.items():
        page.goto(served.url + path)
        page.wait_for_load_state("load")
        results = axe.run(page)
        found[name] = [(v["id"], v["impact"], len(v["nodes"])) for v in results.response["violations"]]
        # Tab reaches every visible control on the page (axe above checks each has a name)
        controls = page.evaluate(CONTROLS)
        page.evaluate("document.activeElement && document.activeElement.blur()")
        reached: set[int] = set()
        for _ in range(2 * controls + 5):  # from wherever the focus starts, round the page once
            page.keyboard.press("Tab")
            reached.add(page.evaluate("Number(document.activeElement.dataset.control ?? -1)"))
        assert reached >= set(range(controls)), (name, sorted(set(range(controls)) - reached))
        if name == "sample":
            page.screenshot(path=str(tmp_path / "a11y-sample.png"), full_page=True)
    assert found == {name: [] for name in pages}, found


def test_readme_screenshots(served: Served, page: Any, tmp_path: Path) -> None:
    """The README's two pictures: the gallery, and a sample being labelled (drawn shapes only)."""
    page.set_viewport_size({"width": 1100, "height": 860})
    page.goto(served.url + "/")
    page.wait_for_function("() => [...document.images].every(i => i.complete && i.naturalWidth > 0)")
    page.locator("#grid input.pick").nth(1).check()
    page.locator("#grid input.pick").nth(2).check()
    gallery = tmp_path / "review-gallery.png"
    page.screenshot(path=str(gallery))
    page.goto(served.url + "/?keyword=disc+25")
    _press(page, "Enter")
    _press(page, "r")
    page.wait_for_function("() => [...document.querySelectorAll('.media img.clear')].every(i => i.complete)")
    page.keyboard.press("1")
    sample = tmp_path / "review-sample.png"
    page.screenshot(path=str(sample))
    for shot in (gallery, sample):
        assert shot.stat().st_size > 10_000
    if os.environ.get("VHD_UPDATE_SCREENSHOTS") == "1":
        from PIL import Image

        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for shot in (gallery, sample):
            Image.open(shot).convert("RGB").quantize(colors=128).save(DOCS_IMG / shot.name, optimize=True)
