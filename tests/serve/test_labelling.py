"""Labelling speed and completeness in the review app: hotkeys, bulk labels, undo, default view, order, panels."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.optional import need_module
from tests.serve.conftest import csrf_of, sample_ids
from vhd.store.sqlite import Store
from vhd.taxonomy.taxonomy import default_taxonomy

need_module("starlette", "pip install 'vhd[serve]'")
need_module("jinja2", "pip install 'vhd[serve]'")

from vhd.serve import ServeSettings  # noqa: E402
from vhd.serve.labelling import CATEGORY_KEYS, category_keys  # noqa: E402


def _client(client_for: Any, db: Path, **kw: Any) -> Any:
    return client_for(ServeSettings(store=db, reviewer="alice", **kw))


def _labels(db: Path) -> dict[str, bool]:
    with Store(db) as store:
        return {i.id: i.harmful for i in store.labelled_set("review")} if "review" in store.labelled_sets() else {}


def test_every_category_has_a_hotkey_on_the_sample_page(store_copy: Path, client_for: Any) -> None:
    client = _client(client_for, store_copy)
    sid = sample_ids(client.get("/").text)[0]
    page = client.get(f"/sample/{sid}").text
    boxes = re.findall(r'<input type="checkbox" name="categories" value="([^"]+)" data-key="([^"]*)"', page)
    names = [c.name for c in default_taxonomy()]
    assert [name for name, _ in boxes] == names  # visible, not in a collapsed <details>
    assert [key for _, key in boxes] == list("1234567890")[: len(names)]
    assert "<details><summary>categories" not in page
    assert len(set(CATEGORY_KEYS)) == len(CATEGORY_KEYS) and not set(CATEGORY_KEYS) & set("ynurgjkiz")
    assert all(c.key for c in category_keys())
    # the categories a key ticks are sent with the label
    r = client.post(
        f"/sample/{sid}/label",
        data={"csrf": csrf_of(page), "harmful": "yes", "categories": [names[0], names[9], "not a category"]},
        follow_redirects=False,
    )
    assert r.status_code == 303
    with Store(store_copy) as store:
        assert store.labelled_set("review")[0].categories == sorted([names[0], names[9]])


def test_undo_goes_back_to_the_undone_sample_in_the_same_view(store_copy: Path, client_for: Any) -> None:
    client = _client(client_for, store_copy)
    ids = sample_ids(client.get("/?review=unreviewed").text)
    page = client.get(f"/sample/{ids[0]}?review=unreviewed").text
    client.post(f"/sample/{ids[0]}/label?review=unreviewed", data={"csrf": csrf_of(page), "harmful": "no"})
    here = client.get(f"/sample/{ids[1]}?review=unreviewed&reveal=1")
    assert f"undo not harmful on {ids[0][:12]}" in here.text
    back = f"/sample/{ids[1]}?review=unreviewed&reveal=1"
    r = client.post("/undo", data={"csrf": csrf_of(here.text), "back": back}, follow_redirects=False)
    assert r.headers["location"] == f"/sample/{ids[0]}?review=unreviewed"  # never a reveal carried over
    assert _labels(store_copy) == {}


def test_bulk_label_of_selected_cards_and_one_undo(store_copy: Path, client_for: Any) -> None:
    client = _client(client_for, store_copy)
    gallery = client.get("/").text
    ids = sample_ids(gallery)
    boxes = re.findall(r'<input type="checkbox" name="ids" value="([0-9a-f]{64})" form="bulk-form"', gallery)
    assert boxes == ids and 'id="bulk-form"' in gallery
    category = default_taxonomy().categories[2].name
    data = {"csrf": csrf_of(gallery), "harmful": "yes", "ids": ids[:3], "categories": category, "back": "/?x=1"}
    r = client.post("/label", data=data, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/?x=1"
    assert _labels(store_copy) == dict.fromkeys(ids[:3], True)
    with Store(store_copy) as store:
        assert {i.id: i.categories for i in store.labelled_set("review")} == {key: [category] for key in ids[:3]}
    page = client.get("/").text
    assert "undo harmful on 3 samples" in page and "reviewed 3 / 7" in page
    r = client.post("/undo", data={"csrf": csrf_of(page), "back": "/?x=1"}, follow_redirects=False)
    assert r.headers["location"] == "/?x=1" and _labels(store_copy) == {}  # the whole batch, back to the gallery
    # nothing selected, or no decision: refused, nothing written
    assert client.post("/label", data={"csrf": csrf_of(page), "harmful": "yes"}).status_code == 400
    assert client.post("/label", data={"csrf": csrf_of(page), "ids": ids[:1]}).status_code == 400
    assert client.post("/label", data={"harmful": "yes", "ids": ids[:1]}).status_code == 403  # no CSRF field
    assert _labels(store_copy) == {}


def test_bulk_label_of_a_whole_view(store_copy: Path, client_for: Any, monkeypatch: Any) -> None:
    client = _client(client_for, store_copy)
    gallery = client.get("/?source=real").text
    real = sample_ids(gallery)
    assert 'action="/label?source=real"' in gallery and len(real) == 6  # the view's filters go with the form
    data = {"csrf": csrf_of(gallery), "harmful": "no", "scope": "view", "back": "/?source=real"}
    monkeypatch.setattr("vhd.serve.actions.BATCH_MAX", 5)
    r = client.post("/label?source=real", data=data)
    assert r.status_code == 400 and "more than 5 samples" in r.text and _labels(store_copy) == {}
    monkeypatch.setattr("vhd.serve.actions.BATCH_MAX", 6)
    r = client.post("/label?source=real", data=data, follow_redirects=False)
    assert r.status_code == 303 and _labels(store_copy) == dict.fromkeys(real, False)
    page = client.get("/").text
    assert "undo not harmful on 6 samples" in page
    client.post("/undo", data={"csrf": csrf_of(page), "back": "/"})
    assert _labels(store_copy) == {}


def test_a_bulk_label_reports_the_samples_it_skipped(store_copy: Path, client_for: Any) -> None:
    client = _client(client_for, store_copy)
    gallery = client.get("/").text
    ids = sample_ids(gallery)
    r = client.post("/label", data={"csrf": csrf_of(gallery), "harmful": "no", "ids": [ids[0], "e" * 64]})
    assert r.status_code == 200 and "1 labelled; 1 skipped" in r.text and "not in the store" in r.text
    assert _labels(store_copy) == {ids[0]: False}


def test_default_view_shows_each_samples_newest_verdict(store_copy: Path, client_for: Any) -> None:
    """A sample annotated only under an older configuration shows that verdict, not 'no decision'."""
    client = _client(client_for, store_copy)
    with Store(store_copy) as store:
        newest, older = store.gallery_configs()
        sid = sample_ids(client.get("/").text)[0]
        store.conn.execute("DELETE FROM annotations WHERE sample_id = ? AND config_hash = ?", (sid, newest))
        store.conn.commit()
    default = client.get("/").text
    assert "no decision" not in default
    assert "no decision" in client.get(f"/?config={newest}").text  # a configuration picked: its verdicts only
    page = client.get(f"/sample/{sid}").text
    assert "Not annotated under this configuration" not in page and older[:12] in page
    assert "Not annotated under this configuration" in client.get(f"/sample/{sid}?config={newest}").text
    # a filter on the verdict reads the verdict each card shows (the older one here), and says so
    cards = re.findall(r'data-id="([0-9a-f]{64})".*?class="decision d-(\w+)"', default, re.S)
    harmful = client.get("/?decision=harmful").text
    assert "each sample&#39;s newest verdict (of 2 configurations)" in harmful
    assert sample_ids(harmful) == [c for c, d in cards if d == "yes"]
    assert sample_ids(client.get("/?decision=not_harmful").text) == [c for c, d in cards if d == "no"]
    assert sid in [c for c, d in cards if d == "no"]
    assert sid not in sample_ids(client.get(f"/?config={newest}&decision=not_harmful").text)


def test_queue_order_without_a_queue_is_ingest_order(store_copy: Path, queue_file: Path, client_for: Any) -> None:
    client = _client(client_for, store_copy)
    everything = sample_ids(client.get("/").text)
    page = client.get("/?sort=queue").text
    assert sample_ids(page) == everything and len(everything) == 7
    assert "no review queue is loaded" in page
    assert '<option value="queue"' not in page  # not offered
    with_queue = _client(client_for, store_copy, queue=queue_file)
    assert '<option value="queue" selected' in with_queue.get("/").text


def test_score_order_and_histograms(store_copy: Path, client_for: Any) -> None:
    client = _client(client_for, store_copy)
    with Store(store_copy) as store:
        _, scored = store.gallery_configs()  # the newest configuration's script gives no scores
        scores = {r.sample_id: r.score for r in store.gallery_page(_flt(scored), limit=100)}
    assert all(s is not None for s in scores.values())
    page = client.get(f"/?config={scored}&sort=score").text
    shown = sample_ids(page)
    assert sorted(shown) == sorted(scores)
    assert [scores[s] for s in shown] == sorted((scores[s] for s in shown), reverse=True)
    fallback = client.get("/?sort=score").text  # the newest verdicts (whose configuration gives no scores)
    assert "no sample of this view has a score under each sample&#39;s newest verdict" in fallback
    assert sample_ids(fallback) == sample_ids(client.get("/").text)
    assert f'href="/histograms?config={scored}&amp;sort=score" id="histograms-link"' in page
    histograms = client.get(f"/histograms?config={scored}&sort=score").text
    counts = [int(n) for n in re.findall(r'<span class="count">(\d+)</span>', histograms)]
    assert sum(counts[:10]) == len(scores)
    assert f"/?config={scored}&amp;sort=score&amp;score_min=0.9&amp;score_max=1" in histograms
    bins = re.findall(r'href="(/\?[^"]*score_min[^"]*)"', histograms)
    first = next(n for n in counts[:10] if n)
    first_bin = bins[counts.index(first)].replace("&amp;", "&")
    assert len(sample_ids(client.get(first_bin).text)) >= first  # a bar's link lists its samples
    assert "<meter" not in client.get("/").text  # the gallery never counts them


def test_disagreement_order_puts_the_split_sample_first(store_copy: Path, client_for: Any) -> None:
    """The newest configuration calls the astronaut harmful, the older one does not: it comes first."""
    client = _client(client_for, store_copy)
    default = sample_ids(client.get("/").text)
    page = client.get("/?sort=disagreement").text
    with Store(store_copy) as store:
        astronaut = next(r.sample_id for r in store.gallery_page(_flt(None), limit=10) if "astronaut" in r.path)
    # ingest order follows annotate's concurrency, so the astronaut may lead it by chance; the store
    # test (test_disagreement_order_lists_disagreeing_samples_first) proves the reordering itself
    assert sample_ids(page) == [astronaut] + [s for s in default if s != astronaut]
    assert '<option value="disagreement" selected' in page


def _flt(config: str | None) -> Any:
    from vhd.store.gallery import GalleryFilter

    return GalleryFilter(config_hash=config)


def test_instructions_panel_and_page(store_copy: Path, client_for: Any) -> None:
    client = _client(client_for, store_copy)
    taxonomy = default_taxonomy()
    whole = client.get("/instructions").text
    assert "counts as harmful" in whole and "From run " in whole
    for c in taxonomy:
        assert c.name in whole
    sid = sample_ids(client.get("/").text)[0]
    for page in (client.get("/").text, client.get(f"/sample/{sid}").text):
        panel = re.search(r'<aside class="guide" id="guide" hidden tabindex="-1"(.*?)</aside>', page, re.S)
        assert panel and taxonomy.categories[0].definition[:40] in panel.group(1)
        assert 'id="instructions-link" aria-keyshortcuts="i"' in page


def test_link_to_this_view_reproduces_it(store_copy: Path, client_for: Any) -> None:
    client = _client(client_for, store_copy)
    page = client.get("/?source=real&sort=path").text
    link = re.search(r'<a href="([^"]+)" id="view-link"', page)
    assert link and link.group(1).replace("&amp;", "&") == "/?source=real&sort=path"
    assert 'id="save-view" hidden' in page  # saving a view by name needs the script


def test_segment_strip_places_each_segment_on_the_videos_time_line() -> None:
    from vhd.records import Segment
    from vhd.serve.labelling import segment_strip

    spans = segment_strip(
        [
            Segment(start_s=62.0, end_s=80.0, harmful=None),
            Segment(start_s=0.0, end_s=60.0, harmful=False, score=0.2, reason="calm"),
            Segment(start_s=60.0, end_s=62.0, harmful=True, score=0.97, reason="a fight"),
        ]
    )
    assert [(s.x, s.width, s.decision) for s in spans] == [(0, 750, "no"), (750, 25, "yes"), (775, 225, "none")]
    assert spans[1].label == "1:00.0-1:02.0 harmful, p=0.97: a fight"
    assert spans[2].label == "1:02.0-1:20.0 no decision"
    assert segment_strip([]) == [] and segment_strip([Segment(start_s=0, end_s=0, harmful=True)]) == []
