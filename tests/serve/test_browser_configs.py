"""The review app over a store annotated under three configurations, in a real browser (Playwright
driving Debian's chromium): the default view's cards show each sample's newest verdict, and every
filter, order and histogram reads exactly those verdicts; the page says which verdicts they are."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.optional import need_executable, need_module
from tests.serve.served import Served, chromium_page, draw_pictures, serving
from vhd.cli.main import main
from vhd.records import Annotation, Verdict
from vhd.store.sqlite import Store

pytestmark = pytest.mark.slow
PICTURES = 24


def _three_configurations(root: Path) -> Path:
    """24 drawn pictures: all annotated by the scripted demo, then a third of them by each of two later
    configurations, which decide otherwise on some (their verdicts are the newest of those samples)."""
    manifest = draw_pictures(root / "media", PICTURES)
    db = root / "three.db"
    assert main(["annotate", str(manifest), "--model", "scripted:demo", "--store", str(db), "--no-progress"]) == 0
    with Store(db) as store:
        ids = [r.sample_id for r in store.gallery_page(_latest(), limit=PICTURES)]
        for k, config in enumerate(("1" * 64, "2" * 64), start=1):
            run = store.start_run({}, config, {"judge": f"later-{k}"}, "p")
            for i, sid in enumerate(ids):
                if i % 3 == k:
                    harmful = (i // 3) % 2 == 0
                    verdict = Verdict(harmful=harmful, reason="r", score=(0.55 + i / 100) if harmful else i / 100)
                    store.save_annotation(Annotation(sample_id=sid, run_id=run, config_hash=config, verdict=verdict))
        assert len(store.gallery_configs()) == 3
    return db


def _latest() -> Any:
    from vhd.store.gallery import GalleryFilter

    return GalleryFilter(latest=True)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    need_executable("chromium", "apt-get install chromium")
    need_module("playwright", "pip install playwright (never `playwright install`: use Debian's chromium)")
    db = _three_configurations(tmp_path)
    with serving(db, tmp_path) as app:
        yield app


CARDS = """() => [...document.querySelectorAll('#grid .card')].map(c => [
  c.dataset.id,
  c.querySelector('.decision').className.replace(/.*d-/, ''),
  c.querySelector('.score') ? parseFloat(c.querySelector('.score').textContent.slice(2)) : null,
])"""


def test_filters_orders_and_histograms_read_what_the_cards_show(served: Served, tmp_path: Path) -> None:
    with chromium_page() as page:
        page.goto(served.url + "/")
        cards = page.evaluate(CARDS)
        assert len(cards) == PICTURES
        said = page.locator("#verdicts-shown").inner_text()
        assert "each sample's newest verdict (of 3 configurations)" in said
        picker = page.locator("#config-pick option:checked").inner_text()
        assert picker == "each sample's newest verdict"
        harmful = [c[0] for c in cards if c[1] == "yes"]
        not_harmful = [c[0] for c in cards if c[1] == "no"]
        assert harmful and not_harmful
        for value, want in (("harmful", harmful), ("not_harmful", not_harmful)):
            page.goto(served.url + "/")
            page.select_option("select[name=decision]", value)
            with page.expect_navigation():
                page.click("#apply")
            assert f"decision={value}" in page.url
            assert [c[0] for c in page.evaluate(CARDS)] == want, value
            assert page.locator("#config-pick option:checked").inner_text() == "each sample's newest verdict"
        page.screenshot(path=str(tmp_path / "not-harmful.png"), full_page=True)
        page.goto(served.url + "/")
        page.select_option("select[name=sort]", "score")
        with page.expect_navigation():
            page.click("#apply")
        by_score = page.evaluate(CARDS)
        scores = {c[0]: c[2] for c in cards}
        assert sorted(c[0] for c in by_score) == sorted(s for s, v in scores.items() if v is not None)
        shown = [scores[c[0]] for c in by_score]  # the cards' own scores (two decimals), highest first
        assert shown == sorted(shown, reverse=True) and [c[2] for c in by_score] == shown
        assert "no sample of this view has a score" not in page.content()
        with page.expect_navigation():
            page.click("#histograms-link")
        assert "each sample's newest verdict" in page.locator("#histograms-of").inner_text()
        counts = [int(n) for n in re.findall(r'<span class="count">(\d+)</span>', page.content())]
        assert sum(counts[:10]) == len([s for s in scores.values() if s is not None])
        top = page.locator("#histograms a").nth(9)  # the 0.9-1.0 bar opens the gallery on those cards
        with page.expect_navigation():
            top.click()
        assert [c[0] for c in page.evaluate(CARDS)] == [s for s, v in scores.items() if v is not None and v >= 0.9]
        assert counts[9] == len([v for v in scores.values() if v is not None and v >= 0.9])


def _segmented_video(root: Path) -> tuple[Path, str]:
    """The example media annotated by the demo, then the video again under a configuration that segments it."""
    from vhd.demo import write_examples
    from vhd.records import Segment

    media = root / "media"
    write_examples(media)
    db = root / "video.db"
    assert main(["annotate", str(media / "manifest.csv"), "--model", "scripted:demo", "--store", str(db), "-q"]) == 0
    with Store(db) as store:
        video = next(r.sample_id for r in store.gallery_page(_latest(), limit=20) if r.kind == "video")
        run = store.start_run({}, "5" * 64, {"judge": "segmenting"}, "p")
        segments = [
            Segment(start_s=0.0, end_s=1.0, harmful=False, score=0.1, reason="an empty scene"),
            Segment(start_s=1.0, end_s=1.5, harmful=True, score=0.9, reason="a shape hits another"),
            Segment(start_s=1.5, end_s=2.0, harmful=None, reason="unreadable"),
        ]
        verdict = Verdict(harmful=True, reason="one harmful span", score=0.9, segments=segments)
        store.save_annotation(Annotation(sample_id=video, run_id=run, config_hash="5" * 64, verdict=verdict))
    return db, video


def test_a_videos_segments_show_as_a_strip_coloured_by_verdict(tmp_path: Path) -> None:
    need_executable("chromium", "apt-get install chromium")
    need_module("playwright", "pip install playwright (never `playwright install`: use Debian's chromium)")
    db, video = _segmented_video(tmp_path)
    with serving(db, tmp_path) as served, chromium_page() as page:
        page.goto(f"{served.url}/sample/{video}")
        rects = page.evaluate(
            """() => [...document.querySelectorAll('#segments rect')].map(r => [
              r.getAttribute('class'), +r.getAttribute('x'), +r.getAttribute('width'),
              r.querySelector('title').textContent, getComputedStyle(r).fill])"""
        )
        assert [r[0] for r in rects] == ["seg seg-no", "seg seg-yes", "seg seg-none"]
        assert [(r[1], r[2]) for r in rects] == [(0, 500), (500, 250), (750, 250)]  # on a 0-2 s time line
        assert rects[1][3] == "0:01.0-0:01.5 harmful, p=0.90: a shape hits another"
        assert len({r[4] for r in rects}) == 3  # three colours, from the stylesheet
        page.wait_for_function(
            "() => [...document.querySelectorAll('#segments img')].every(i => i.complete && i.naturalWidth > 0)"
        )
        srcs = page.locator("#segments img").evaluate_all("els => els.map(e => e.getAttribute('src'))")
        assert len(srcs) == 5 and all(s.startswith(f"/thumb/{video}") and "clear" not in s for s in srcs)
        listed = page.locator("#segment-list li .seg-label").all_inner_texts()
        assert listed[0] == "0:00.0-0:01.0 not harmful, p=0.10: an empty scene"
        page.screenshot(path=str(tmp_path / "segments.png"), full_page=True)
        page.goto(f"{served.url}/sample/{video}?reveal=1")  # revealed: the strip's frames stay blurred
        srcs = page.locator("#segments img").evaluate_all("els => els.map(e => e.getAttribute('src'))")
        assert srcs and not [s for s in srcs if "clear" in s]
