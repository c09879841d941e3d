"""Reviewing a segmented video in the review app (no browser): playing needs a reveal, segments are
confirmed or corrected, harmful spans are marked and removed, and the harmful ones become the
``segments`` of the sample's label in the labelled set the reviews write."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.optional import need_module
from tests.serve.conftest import csrf_of
from vhd.errors import ConfigError
from vhd.records import Annotation, Segment, Verdict
from vhd.store.gallery import GalleryFilter
from vhd.store.sqlite import Store

need_module("starlette", "pip install 'vhd[serve]'")
need_module("jinja2", "pip install 'vhd[serve]'")

from vhd.serve import ServeSettings  # noqa: E402

CONFIG = "5" * 64
JSON = {"accept": "application/json"}


def segment_video(db: Path) -> tuple[str, str]:
    """Give the store's example video a segmented verdict (0-1 s not harmful, 1-1.5 s harmful, 1.5-2 s none).

    Returns:
        The video's id and an image's id.
    """
    with Store(db) as store:
        rows = store.gallery_page(GalleryFilter(latest=True), limit=50)
        video = next(r.sample_id for r in rows if r.kind == "video")
        image = next(r.sample_id for r in rows if r.kind == "image")
        run = store.start_run({}, CONFIG, {"judge": "segmenting"}, "p")
        segments = [
            Segment(start_s=0.0, end_s=1.0, harmful=False, score=0.1, reason="an empty scene"),
            Segment(start_s=1.0, end_s=1.5, harmful=True, score=0.9, reason="a shape hits another"),
            Segment(start_s=1.5, end_s=2.0, harmful=None, reason="unreadable"),
        ]
        verdict = Verdict(harmful=True, reason="one harmful span", score=0.9, segments=segments)
        store.save_annotation(Annotation(sample_id=video, run_id=run, config_hash=CONFIG, verdict=verdict))
    return video, image


def _client(store: Path, client_for: Any) -> Any:
    return client_for(ServeSettings(store=store, reviewer="alice"))


def _post(client: Any, sample_id: str, path: str, json: bool = True, **fields: str) -> Any:
    csrf = csrf_of(client.get(f"/sample/{sample_id}").text)
    headers = JSON if json else {"accept": "text/html"}
    return client.post(
        f"/sample/{sample_id}{path}", data={"csrf": csrf, **fields}, headers=headers, follow_redirects=False
    )


def _label_spans(db: Path, sample_id: str) -> list[Segment] | None:
    with Store(db) as store:
        return next(item.segments for item in store.labelled_set("review") if item.id == sample_id)


def test_segments_confirmed_and_spans_marked_become_the_labels_segments(store_copy: Path, client_for: Any) -> None:
    video, _ = segment_video(store_copy)
    client = _client(store_copy, client_for)
    page = client.get(f"/sample/{video}").text
    assert page.count('class="seg-form"') == 3 and 'id="human-spans"' in page
    # before a reveal: nothing plays and no clear video is linked
    assert "/clip/" not in page and "seg-play" not in page and 'id="clip"' not in page

    done = _post(client, video, "/segment", json=False, idx="1", harmful="yes")  # confirm the harmful segment
    assert done.status_code == 303 and done.headers["location"] == f"/sample/{video}"
    reply = _post(client, video, "/segment", idx="0", harmful="no")  # confirm "not harmful": no human span
    assert reply.status_code == 200
    reply = _post(client, video, "/span", start_s="0.25", end_s="0.75")  # the model missed this one
    spans = reply.json()["spans"]
    assert [(s["start_s"], s["end_s"], s["harmful"], s["segment_idx"]) for s in spans] == [
        (0.0, 1.0, False, 0),
        (0.25, 0.75, True, None),
        (1.0, 1.5, True, 1),
    ]
    page = client.get(f"/sample/{video}").text
    assert page.count("you: harmful") == 1 and page.count("you: not harmful") == 1
    assert "0.25-0.75 s harmful · marked by alice" in page

    # the sample's label (once it has one) carries the harmful spans; later span edits follow it
    csrf = csrf_of(page)
    assert (
        client.post(f"/sample/{video}/label", data={"csrf": csrf, "harmful": "yes"}, follow_redirects=False).status_code
        == 303
    )
    got = _label_spans(store_copy, video)
    assert got is not None and [(s.start_s, s.end_s, s.harmful, s.decided_by) for s in got] == [
        (0.25, 0.75, True, "human"),
        (1.0, 1.5, True, "human"),
    ]
    marked = next(s["id"] for s in spans if s["segment_idx"] is None)
    reply = _post(client, video, "/span/remove", span_id=str(marked))
    assert reply.status_code == 200 and len(reply.json()["spans"]) == 2
    assert [(s.start_s, s.end_s) for s in _label_spans(store_copy, video) or []] == [(1.0, 1.5)]
    # correcting the confirmed segment replaces alice's decision on it: no harmful span is left
    assert _post(client, video, "/segment", idx="1", harmful="no").status_code == 200
    assert _label_spans(store_copy, video) is None
    with Store(store_copy) as store:
        assert store.human_spans("review", video) == []
        assert [(r.segment_idx, r.harmful) for r in store.review_spans("review", video)] == [(0, False), (1, False)]


def test_bad_spans_are_refused_with_one_line(store_copy: Path, client_for: Any) -> None:
    video, image = segment_video(store_copy)
    client = _client(store_copy, client_for)
    for fields, needle in (
        ({"start_s": "1.5", "end_s": "1.5"}, "is not after its start"),
        ({"start_s": "1.5", "end_s": "0.5"}, "is not after its start"),
        ({"start_s": "-1", "end_s": "0.5"}, "start >= 0"),
        ({"start_s": "soon", "end_s": "0.5"}, "must be a time in seconds"),
    ):
        reply = _post(client, video, "/span", **fields)
        assert reply.status_code == 400 and needle in reply.text and "\n" not in reply.text.strip(), reply.text
    reply = _post(client, image, "/span", start_s="0", end_s="1")
    assert reply.status_code == 400 and "time spans are for videos only" in reply.text
    reply = _post(client, image, "/segment", idx="0", harmful="yes")
    assert reply.status_code == 400 and "no segments" in reply.text
    for idx in ("3", "x", ""):
        assert _post(client, video, "/segment", idx=idx, harmful="yes").status_code == 400
    assert _post(client, video, "/segment", idx="0", harmful="maybe").status_code == 400
    assert _post(client, video, "/span/remove", span_id="99").status_code == 404
    stale = client.post(f"/sample/{video}/span", data={"csrf": "x" * 30, "start_s": "0", "end_s": "1"})
    assert stale.status_code == 403
    with Store(store_copy) as store:
        assert store.review_spans("review", video) == [] and store.review_spans("review", image) == []
        with pytest.raises(ConfigError, match="not after its start"):
            store.add_review_span("review", video, "bob", 2.0, 1.0)
        with pytest.raises(ConfigError, match="videos only"):
            store.add_review_span("review", image, "bob", 0.0, 1.0)


def test_a_revealed_video_is_served_in_ranges_for_seeking(store_copy: Path, client_for: Any) -> None:
    video, _ = segment_video(store_copy)
    client = _client(store_copy, client_for)
    assert client.get(f"/clip/{video}", headers={"range": "bytes=0-99"}).status_code == 403  # no reveal key
    page = client.get(f"/sample/{video}?reveal=1").text
    match = re.search(r'<video id="clip" src="(/clip/[^"]+)"', page)
    assert match and page.count('class="seg-play"') == 3
    url = match.group(1).replace("&amp;", "&")
    part = client.get(url, headers={"range": "bytes=100-199"})
    whole = client.get(url)
    assert part.status_code == 206 and part.headers["content-range"].startswith("bytes 100-199/")
    assert part.content == whole.content[100:200] and part.headers["cache-control"] == "private, no-store"


@pytest.mark.slow
def test_in_a_browser_a_reviewer_plays_confirms_and_marks_a_span(store_copy: Path, tmp_path: Path) -> None:
    from tests.serve.served import chromium_page, serving

    video, _ = segment_video(store_copy)
    with serving(store_copy, tmp_path) as served, chromium_page() as page:
        page.goto(f"{served.url}/sample/{video}")
        assert page.locator("#clip").count() == 0 and page.locator(".seg-play").count() == 0
        page.click("#reveal")
        page.wait_for_selector("#clip")
        page.wait_for_function("() => document.getElementById('clip').readyState >= 1")
        page.locator(".seg-play").nth(1).click()  # the harmful segment, 1.0-1.5 s
        page.wait_for_function("() => document.getElementById('clip').paused && !document.getElementById('clip').loop")
        at = page.evaluate("() => document.getElementById('clip').currentTime")
        assert 1.0 <= at <= 1.5, at
        page.locator("#segment-list li").nth(1).locator(".seg-confirm").click()  # confirm: harmful
        page.wait_for_function("() => document.querySelectorAll('#human-spans li').length === 1")
        page.evaluate("() => { const c = document.getElementById('clip'); c.pause(); c.currentTime = 0.25; }")
        page.wait_for_function("() => Math.abs(document.getElementById('clip').currentTime - 0.25) < 0.01")
        page.keyboard.press("[")
        page.evaluate("() => { document.getElementById('clip').currentTime = 0.75; }")
        page.wait_for_function("() => Math.abs(document.getElementById('clip').currentTime - 0.75) < 0.01")
        page.keyboard.press("]")
        page.wait_for_function("() => document.querySelectorAll('#human-spans li').length === 2")
        assert "you: harmful" in page.locator("#segment-list li").nth(1).inner_text()
        assert page.locator("#span-status").inner_text() == "saved"
        page.screenshot(path=str(tmp_path / "segment-review.png"), full_page=True)
    with Store(store_copy) as store:
        spans = store.human_spans("review", video)
    assert [(s.start_s, s.end_s, s.harmful, s.decided_by) for s in spans] == [
        (0.25, 0.75, True, "human"),
        (1.0, 1.5, True, "human"),
    ]
    assert spans[0].reason == "marked span (alice)" and spans[1].reason == "confirmed segment (alice)"


def test_a_span_change_the_store_cannot_write_is_refused_in_one_line(
    store_copy: Path, client_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adding, confirming and removing spans all answer a failed write with one line, never a server error."""
    from vhd.errors import StoreWriteError

    video, _ = segment_video(store_copy)
    client = _client(store_copy, client_for)
    assert _post(client, video, "/span", start_s="0.2", end_s="0.8").status_code == 200
    with Store(store_copy) as store:
        (span,) = store.review_spans("review", video)

    refusal = "cannot write the store (disk full): free some space and try again"

    def full(*_: object, **__: object) -> Any:
        raise StoreWriteError(refusal)

    monkeypatch.setattr(Store, "add_review_span", full)
    monkeypatch.setattr(Store, "remove_review_span", full)
    for path, fields in (
        ("/span", {"start_s": "1", "end_s": "2"}),
        ("/segment", {"idx": "1", "harmful": "yes"}),
        ("/span/remove", {"span_id": str(span.id)}),
    ):
        reply = _post(client, video, path, **fields)
        assert reply.status_code == 400 and reply.text == refusal, path
