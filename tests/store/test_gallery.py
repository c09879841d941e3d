"""The gallery's index (migration ``0011_gallery_index``): every filter answered from an index, the same rows
as a plain reading of the store, and the index kept in step with every write."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vhd.records import Annotation, Kind, LabelledSample, Sample, Status, Verdict
from vhd.store import gallery
from vhd.store import migrations as mig
from vhd.store.categories import Assignment, Categorization, save_categorization
from vhd.store.gallery import DECISIONS, DISAGREEMENTS, REVIEW_STATES, STATUSES, GalleryFilter, QueueEntry
from vhd.store.sqlite import Store

N = 600
CATS = ["Violence and Threats", "Substance Misuse", "Explicit and Sexual Content"]
A, B, C = "a" * 64, "b" * 64, "e" * 64
LATEST = "newest"
"""In the parametrised configurations: no configuration, each sample's newest verdict (``latest=True``)."""


def sid(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


def _sample(i: int) -> Sample:
    synthetic = i % 10 == 0
    return Sample(
        id=sid(i),
        kind=Kind.IMAGE,
        path=f"/data/{(i * 7) % N:04d}.jpg",  # path order is not ingest order
        source="synthetic" if synthetic else "real",  # type: ignore[arg-type]
        keyword=f"kw{i % 13}",
        generator=("sdxl" if i % 20 == 0 else "animatediff") if synthetic else None,
        split=("train", "val", "test")[i % 3],
        harmful=True if i % 97 == 0 else None,
    )


def _annotation(i: int, run: str, config: str, flip: bool = False) -> Annotation:
    status = Status.UNPARSED if i % 31 == 1 else Status.ERROR if i % 37 == 2 else Status.OK
    status = Status.REFUSED if i % 41 == 3 else status
    score = ((i * 7919) % 1000) / 1000
    harmful = None if status in (Status.UNPARSED, Status.ERROR) else (score > 0.8) != flip
    cats = [CATS[i % 3]] if harmful else []
    stage = None if config != A else "rare" if i % 100 == 5 else "debate" if i % 10 >= 7 else "cheap"
    verdict = Verdict(harmful=harmful, reason="r", categories=cats, score=score, status=status)
    return Annotation(sample_id=sid(i), run_id=run, config_hash=config, verdict=verdict, decided_by=stage)


def build(store: Store) -> None:
    """600 samples: most annotated under A (some not), 5% under B too, some removed, reviews and labels.

    A third configuration C, run later, gives a verdict on every 7th sample, and A annotates every 21st
    sample again after it: each sample's newest verdict comes from A, B or C.
    """
    run_a = store.start_run({}, A, {"judge": "scripted:demo"}, "p")
    run_b = store.start_run({}, B, {"judge": "scripted:demo"}, "p")
    for i in range(N):
        store.upsert_sample(_sample(i))
        if i % 50 != 49 and i < 560:
            store.save_annotation(_annotation(i, run_a, A))
        if i % 20 == 3:
            store.save_annotation(_annotation(i, run_b, B, flip=i % 40 == 3))
    run_c = store.start_run({}, C, {"judge": "scripted:demo"}, "p")
    for i in range(0, 580, 7):
        store.save_annotation(_annotation(i, run_c, C, flip=i % 3 == 0))
    for i in range(0, 560, 21):
        if i % 50 != 49:
            store.save_annotation(_annotation(i, run_a, A, flip=i % 2 == 0))
    for i in range(0, N, 123):
        store.remove_sample(sid(i + 7))
    for k, i in enumerate(range(1, N, 11)):
        store.add_review("review", sid(i), "alice" if k % 2 else "bob", harmful=k % 3 == 0)
        if k % 4 == 0:
            store.add_review("review", sid(i), "carol", harmful=k % 3 != 0, reviews_per_sample=2)
    labels = [
        LabelledSample(id=sid(i), path=Path(f"/x/{i}"), kind=Kind.IMAGE, harmful=i % 2 == 0) for i in range(5, N, 29)
    ]
    store.save_labelled_set("review", labels, source="labels.csv")
    store.save_labelled_set("other", labels[:3], source="labels.csv")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("gallery-index") / "g.db"
    with Store(db) as store:
        build(store)
    return db


@pytest.fixture
def store(built: Path, tmp_path: Path) -> Iterator[Store]:
    db = tmp_path / "g.db"
    mig.backup_store(built, db)
    with Store(db) as s:
        yield s


# -- a plain reading of the store: what each filter means, row by row ------------------------------------


def _expected(store: Store, f: GalleryFilter, sort: str, queue: dict[str, tuple[int, bool]] | None = None) -> list[str]:
    q = store.conn.execute
    samples = q("SELECT rowid, id, path, source, keyword, generator, split, label, removed_at FROM samples").fetchall()
    ann = {
        r[0]: r[1:]
        for r in q(
            "SELECT sample_id, id, status, harmful, score, categories_json, decided_by, config_hash FROM annotations "
            "WHERE config_hash = ? OR (? AND id IN (SELECT MAX(id) FROM annotations GROUP BY sample_id))",
            (f.config_hash, f.latest and f.config_hash is None),
        )
    }
    others: dict[str, list[tuple[str, int | None]]] = {}
    for s_id, config, harmful in q("SELECT sample_id, config_hash, harmful FROM annotations"):
        others.setdefault(s_id, []).append((config, harmful))
    labelled = dict(q("SELECT sample_id, harmful FROM labelled_sets WHERE name = ?", (f.set_name,)).fetchall())
    any_label: dict[str, list[int]] = {}
    for s_id, harmful in q("SELECT sample_id, harmful FROM labelled_sets"):
        any_label.setdefault(s_id, []).append(harmful)
    state = {r[0]: r[1:] for r in q("SELECT sample_id, reviews, harmful_votes, adjudicated FROM review_state")}
    mine = {
        r[0]
        for r in q(
            "SELECT sample_id FROM reviews WHERE set_name = ? AND reviewer = ? AND undone_at IS NULL "
            "AND adjudication = 0",
            (f.set_name, f.reviewer),
        )
    }
    out = []
    for rowid, s_id, path, source, keyword, generator, split, label, removed in samples:
        a = ann.get(s_id)
        status, harmful, score, cats, stage, shown = a[1:] if a else (None, None, None, "[]", None, None)
        reviews, votes, adjudicated = state.get(s_id, (0, 0, 0))
        split_votes = 0 < votes < reviews
        checks = [
            removed is None,
            all(
                getattr(f, c) in (None, v)
                for c, v in zip(
                    ("source", "keyword", "generator", "split"), (source, keyword, generator, split), strict=True
                )
            ),
            f.decision is None
            or {"harmful": harmful == 1, "not_harmful": harmful == 0, "none": harmful is None}[f.decision],
            f.status is None or (a is None if f.status == "missing" else status == f.status),
            f.decided_by is None or stage == f.decided_by,
            f.category is None or f.category in json.loads(cats),
            f.score_min is None or (score is not None and score >= f.score_min),
            f.score_max is None or (score is not None and score <= f.score_max),
            f.disagreement != "configs"
            or any(
                c != shown and h is not None and h != harmful and harmful is not None for c, h in others.get(s_id, [])
            ),
            f.disagreement != "human"
            or (
                harmful is not None
                and ((label is not None and label != harmful) or any(h != harmful for h in any_label.get(s_id, [])))
            ),
            f.disagreement != "detector" or (queue is not None and s_id in queue and queue[s_id][1]),
            f.disagreement != "reviewers" or split_votes,
            f.review != "unreviewed" or (s_id not in state and s_id not in labelled),
            f.review != "mine" or s_id in mine,
            f.review != "not_mine" or (s_id not in mine and s_id not in labelled),
            f.review != "labelled" or s_id in labelled,
            f.review != "unlabelled" or s_id not in labelled,
            f.review != "disputed" or (split_votes and not adjudicated),
            f.review != "needs_more" or (reviews < f.reviews_per_sample and s_id not in labelled),
            not (f.queue_only or sort == "queue") or (queue is not None and s_id in queue),
        ]
        if all(checks):
            key = (queue[s_id][0],) if sort == "queue" and queue else (path, rowid) if sort == "path" else (rowid,)
            out.append((key, s_id))
    return [s for _, s in sorted(out)]


def _pages(store: Store, f: GalleryFilter, sort: str, size: int = 7) -> list[str]:
    got: list[str] = []
    after = None
    while True:
        rows = store.gallery_page(f, sort=sort, after=after, limit=size)
        got += [r.sample_id for r in rows]
        if len(rows) < size:
            return got
        after = rows[-1].sample_id


SINGLE: list[dict[str, Any]] = [
    {},
    {"source": "synthetic"},
    {"generator": "sdxl"},
    {"keyword": "kw3"},
    {"keyword": "nobody"},
    {"split": "test"},
    *({"decision": d} for d in DECISIONS),
    *({"status": s} for s in STATUSES),
    *({"category": c} for c in [*CATS, "a category no sample has"]),
    {"decided_by": "cheap"},
    {"decided_by": "rare"},
    {"decided_by": "nobody"},
    {"score_min": 0.45, "score_max": 0.55},
    {"score_min": 0.9},
    {"score_max": 0.01},
    {"score_min": 2.0},
    *({"disagreement": d} for d in DISAGREEMENTS),
    *({"review": r} for r in REVIEW_STATES),
    {"queue_only": True},
]
COMBOS: list[dict[str, Any]] = [
    {"source": "real", "generator": "sdxl"},  # empty intersection of two sample columns
    {"source": "synthetic", "decision": "harmful", "split": "val"},
    {"status": "missing", "split": "train"},
    {"status": "error", "decision": "harmful"},  # empty: an error has no decision
    {"decision": "none", "source": "real"},
    {"decided_by": "debate", "category": CATS[1], "score_min": 0.85},
    {"review": "unreviewed", "decision": "harmful", "keyword": "kw5"},
    {"review": "labelled", "disagreement": "human"},
    {"review": "mine", "status": "ok"},
    {"review": "not_mine", "decided_by": "cheap"},
    {"disagreement": "configs", "category": CATS[0]},
    {"disagreement": "reviewers", "review": "disputed"},
    {"review": "needs_more", "status": "missing"},
]


def _filter(config: str | None, **extra: Any) -> GalleryFilter:
    """A filter under one configuration, or (`LATEST`) on each sample's newest verdict."""
    if config == LATEST:
        return GalleryFilter(latest=True, **extra)
    return GalleryFilter(config_hash=config, **extra)


@pytest.mark.parametrize("rare", [gallery.RARE, 40, 0])
def test_every_filter_and_order_lists_what_a_plain_reading_finds(
    store: Store, rare: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whichever way a page is found (a listed index, a walk along one, ranges of blocks, a scan)."""
    monkeypatch.setattr(gallery, "RARE", rare)
    queue = {sid(i): (N - i, i % 3 == 0) for i in range(0, N, 4)}
    store.load_queue([QueueEntry(s, rank, dissent) for s, (rank, dissent) in queue.items()])
    for config in (A, B, C, None, "c" * 64, LATEST):
        for extra in SINGLE + COMBOS if config in (A, LATEST) else SINGLE:
            for sort in ("ingest", "path", "queue"):
                flt = _filter(config, reviewer="alice", reviews_per_sample=2, **extra)
                want = _expected(store, flt, sort, queue)
                assert _pages(store, flt, sort) == want, (config, extra, sort)
    assert len(_expected(store, GalleryFilter(config_hash=A, status="missing"), "ingest")) > 20


# -- every page query found through an index -----------------------------------------------------------

SCANS = re.compile(r"SCAN (s|s2|s3|samples|a|annotations|l|labelled_sets|rs|review_state|r|reviews|f|g|gallery_\w+)\b")


def _plans(store: Store, run: Any) -> dict[str, list[str]]:
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)
    try:
        run()
    finally:
        store.conn.set_trace_callback(None)
    return {
        s: [str(r[3]) for r in store.conn.execute("EXPLAIN QUERY PLAN " + s)]
        for s in statements
        if s.lstrip().upper().startswith("SELECT")
    }


def test_every_filter_is_answered_from_an_index(store: Store) -> None:
    """EXPLAIN QUERY PLAN of every query a filtered first page makes: no table is scanned, nothing sorted."""
    store.load_queue([QueueEntry(sid(i), N - i, i % 3 == 0) for i in range(0, N, 4)])
    seen = 0
    for config, extra in [(c, e) for c in (A, LATEST) for e in SINGLE[1:] + COMBOS]:
        flt = _filter(config, reviewer="alice", **extra)
        for statement, plan in _plans(store, lambda flt=flt: store.gallery_page(flt)).items():
            seen += 1
            assert not [p for p in plan if SCANS.match(p)], (config, extra, statement, plan)
            assert not [p for p in plan if "TEMP B-TREE FOR ORDER BY" in p], (config, extra, plan)
    assert seen > 4 * len(SINGLE)


def test_common_values_walk_their_index_in_page_order(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Too many matches to list: the rarest filter's index is walked in ingest order (no sort, no scan)."""
    monkeypatch.setattr(gallery, "RARE", 0)
    walks = {
        "decided_by": ("cheap", "SEARCH g USING PRIMARY KEY (config=? AND facet=?"),
        "category": (CATS[0], "SEARCH g USING PRIMARY KEY (config=? AND facet=?"),
        "split": ("test", "SEARCH s USING INDEX samples_split (split=?"),
        "status": ("missing", "SEARCH s USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"),
        "review": ("unlabelled", "SEARCH s USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"),
    }
    for name, (value, driver) in walks.items():
        alone = name in ("status", "review")  # an absence is counted by its blocks: an upper bound
        flt = GalleryFilter(config_hash=A, **{name: value, **({} if alone else {"source": "real"})})
        pages = [p for s, p in _plans(store, lambda flt=flt: store.gallery_page(flt)).items() if "frames_json" in s]
        assert pages and all(p[0].startswith(driver) for p in pages), (name, pages)
        assert not [p for plan in pages for p in plan if SCANS.match(p) or "TEMP B-TREE" in p], (name, pages)


# -- the index follows every write -------------------------------------------------------------------------


def _index(conn: sqlite3.Connection) -> tuple[set[tuple[Any, ...]], ...]:
    facets = set(
        conn.execute(
            "SELECT c.config_hash, f.facet, f.sample FROM gallery_facets f JOIN gallery_configs c ON c.id = f.config"
        )
    )
    scores = set(
        conn.execute(
            "SELECT c.config_hash, f.score, f.sample FROM gallery_scores f JOIN gallery_configs c ON c.id = f.config"
        )
    )
    blocks = set(conn.execute("SELECT kind, key, block, n FROM gallery_blocks WHERE n > 0"))
    return facets, scores, blocks


def _recount(conn: sqlite3.Connection) -> tuple[set[tuple[Any, ...]], ...]:
    """The index as it should be, computed in Python from the tables themselves."""
    rowid = dict(conn.execute("SELECT id, rowid FROM samples"))
    facets, scores = set(), set()
    blocks: dict[tuple[str, str, int], int] = {}
    for r in rowid.values():
        blocks[("s", "", r >> 8)] = blocks.get(("s", "", r >> 8), 0) + 1
    columns = "sample_id, config_hash, status, harmful, score, categories_json, decided_by"
    every = conn.execute(f"SELECT {columns} FROM annotations").fetchall()
    newest = conn.execute(  # the pseudo-configuration '' of each sample's newest verdict
        "SELECT sample_id, '', status, harmful, score, categories_json, decided_by FROM annotations "
        "WHERE id IN (SELECT MAX(id) FROM annotations GROUP BY sample_id)"
    ).fetchall()
    for s_id, config, status, harmful, score, cats, stage in every + newest:
        r = rowid[s_id]
        decision = {1: "harmful", 0: "not_harmful", None: "none"}[harmful]
        facets |= {(config, f"s:{status}", r), (config, f"d:{decision}", r)}
        facets |= {(config, f"c:{c}", r) for c in json.loads(cats)}
        if stage is not None:
            facets.add((config, f"b:{stage}", r))
        if score is not None:
            scores.add((config, score, r))
        blocks[("a", config, r >> 8)] = blocks.get(("a", config, r >> 8), 0) + 1
    for name, s_id in conn.execute("SELECT name, sample_id FROM labelled_sets"):
        key = ("l", name, rowid[s_id] >> 8)
        blocks[key] = blocks.get(key, 0) + 1
    return facets, scores, {(*k, n) for k, n in blocks.items()}


def test_every_write_path_keeps_the_index_in_step(store: Store) -> None:
    assert _index(store.conn) == _recount(store.conn)
    run = store.runs()[0].id
    # a new sample, annotated; a sample annotated again (replaced) with another decision and stage
    store.upsert_sample(_sample(N + 1))
    store.save_annotation(_annotation(N + 1, run, A))
    again = _annotation(4, run, A, flip=True)
    again.decided_by = "late"
    store.save_annotation(again)
    rows = store.gallery_page(GalleryFilter(config_hash=A, decided_by="late"))
    assert [r.sample_id for r in rows] == [sid(4)]
    # `vhd categorize` assigns categories to a verdict (and `apply_to_verdicts` rewrites them)
    ann_id = store.conn.execute(
        "SELECT id FROM annotations WHERE sample_id = ? AND config_hash = ?", (sid(6), A)
    ).fetchone()[0]
    save_categorization(
        store,
        Categorization(
            annotation_id=ann_id,
            method="llm",
            taxonomy="vhd",
            taxonomy_version="1",
            taxonomy_digest="d",
            model="m",
            status="ok",
            assignments=[Assignment("X1", "A brand new category")],  # type: ignore[arg-type]
        ),
    )
    assert [r.sample_id for r in store.gallery_page(GalleryFilter(config_hash=A, category="A brand new category"))] == [
        sid(6)
    ]
    # reviews settle into the labelled set, an undo takes the label back; labels imported over them
    store.add_review("review", sid(2), "alice", harmful=True)
    store.add_review("review", sid(8), "alice", harmful=True)
    store.undo_review("review", "alice")
    store.save_labelled_set("review", [LabelledSample(id=sid(2), path=Path("/x"), kind=Kind.IMAGE, harmful=False)])
    store.save_labelled_set("fresh", [LabelledSample(id=sid(9), path=Path("/x"), kind=Kind.IMAGE, harmful=False)])
    store.remove_sample(sid(10))
    assert _index(store.conn) == _recount(store.conn)
    unlabelled = GalleryFilter(config_hash=A, set_name="fresh", review="labelled")
    assert [r.sample_id for r in store.gallery_page(unlabelled)] == [sid(9)]
    # the newest verdict deleted: the one before it is shown again; a verdict moved to another sample
    with store.conn:
        store.conn.execute("DELETE FROM annotations WHERE sample_id = ? AND config_hash = ?", (sid(14), C))
        store.conn.execute(
            "UPDATE annotations SET sample_id = ? WHERE sample_id = ? AND config_hash = ?", (sid(50), sid(21), C)
        )
    assert _index(store.conn) == _recount(store.conn)
    # a plain delete (no vhd command does this today) leaves nothing behind either
    with store.conn:
        store.conn.execute("DELETE FROM annotations WHERE sample_id = ?", (sid(11),))
        store.conn.execute("DELETE FROM labelled_sets WHERE name = 'fresh'")
    assert _index(store.conn) == _recount(store.conn)


def test_an_older_store_is_indexed_when_it_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "old.db"
    # every migration but this one: later ones change tables the store's writes need
    later = ("0011_gallery_index", "0019_gallery_newest")  # the second needs the first's tables
    monkeypatch.setattr(mig, "MIGRATIONS", [m for m in mig.MIGRATIONS if m[0] not in later])
    with Store(db) as old:
        build(old)
        assert not old.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'gallery_facets'").fetchone()
    monkeypatch.undo()
    with Store(db) as store:
        assert set(later) <= set(mig.applied_migrations(store.conn))
        facets, scores, blocks = _index(store.conn)
        assert (facets, scores, blocks) == _recount(store.conn) and len(facets) > N
        for flt in (GalleryFilter(config_hash=A, status="missing"), GalleryFilter(latest=True, decision="harmful")):
            assert _pages(store, flt, "ingest") == _expected(store, flt, "ingest")


# -- score order, each sample's newest verdict, histograms -------------------------------------------------


def _scores(store: Store, config: str) -> dict[str, tuple[float, int]]:
    rows = store.conn.execute(
        "SELECT s.id, a.score, s.rowid FROM annotations a JOIN samples s ON s.id = a.sample_id "
        "WHERE (a.config_hash = ?1 OR (?1 = ? AND a.id IN (SELECT MAX(id) FROM annotations GROUP BY sample_id))) "
        "AND a.score IS NOT NULL",
        (config, LATEST),
    )
    return {str(r[0]): (float(r[1]), int(r[2])) for r in rows}


@pytest.mark.parametrize("rare", [gallery.PATH_RARE, 0])
def test_score_order_lists_the_highest_first_under_every_filter(
    store: Store, rare: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Walked down the score index, or the few samples of a rare filter sorted: the same pages."""
    monkeypatch.setattr(gallery, "PATH_RARE", rare)
    for config in (A, LATEST):
        scores = _scores(store, config)
        for extra in SINGLE + COMBOS:
            flt = _filter(config, reviewer="alice", reviews_per_sample=2, **extra)
            want = [s for s in _expected(store, flt, "ingest") if s in scores]
            want.sort(key=lambda s: (-scores[s][0], -scores[s][1]))
            assert _pages(store, flt, "score") == want, (config, extra)
    assert store.gallery_page(GalleryFilter(), sort="score") == []  # no configuration, no scores


@pytest.mark.parametrize("config", [A, LATEST])
def test_score_order_walks_the_score_index(store: Store, config: str) -> None:
    first = store.gallery_page(_filter(config), sort="score", limit=5)
    plans = _plans(store, lambda: store.gallery_page(_filter(config), sort="score", after=first[-1].sample_id))
    pages = [p for s, p in plans.items() if "frames_json" in s]
    assert pages and all(p[0].startswith("SEARCH g USING PRIMARY KEY (config=?") for p in pages), pages
    assert not [p for plan in pages for p in plan if SCANS.match(p) or "TEMP B-TREE" in p], pages


def test_without_a_configuration_each_sample_shows_its_newest_verdict(store: Store) -> None:
    newest = {
        str(r[0]): (str(r[1]), r[2])
        for r in store.conn.execute(
            "SELECT sample_id, status, score FROM annotations "
            "WHERE id IN (SELECT MAX(id) FROM annotations GROUP BY sample_id)"
        )
    }
    rows = store.gallery_page(GalleryFilter(latest=True), limit=N)
    assert len(rows) == len(_expected(store, GalleryFilter(), "ingest"))
    assert {r.sample_id: (r.status, r.score) for r in rows if r.status} == {
        s: v for s, v in newest.items() if s in {r.sample_id for r in rows}
    }
    assert any(
        newest[r.sample_id] != (r.status, r.score)
        for r in store.gallery_page(GalleryFilter(config_hash=A), limit=N)
        if r.sample_id in newest
    )  # B is newer on some
    assert all(r.status is None for r in store.gallery_page(GalleryFilter(), limit=N))  # not asked: no verdict
    plans = _plans(store, lambda: store.gallery_page(GalleryFilter(latest=True, source="real")))
    assert not [p for plan in plans.values() for p in plan if SCANS.match(p) or "TEMP B-TREE" in p], plans


def test_the_newest_verdicts_filter_order_and_count_as_the_cards_show_them(store: Store) -> None:
    """Three configurations: every filter on the verdict of ``latest=True`` reads the verdict its card shows."""
    shown = {r.sample_id: r for r in store.gallery_page(GalleryFilter(latest=True), limit=N)}
    configs = {
        str(r[0])
        for r in store.conn.execute(
            "SELECT config_hash FROM annotations WHERE id IN (SELECT MAX(id) FROM annotations GROUP BY sample_id)"
        )
    }
    assert configs == {A, B, C}  # the newest verdicts come from all three
    harmful = [s for s, r in shown.items() if r.harmful is True]
    not_harmful = [s for s, r in shown.items() if r.harmful is False]
    assert _pages(store, GalleryFilter(latest=True, decision="harmful"), "ingest") == harmful
    assert _pages(store, GalleryFilter(latest=True, decision="not_harmful"), "ingest") == not_harmful
    for status in STATUSES:
        want = [s for s, r in shown.items() if (r.status or "missing") == status]
        assert _pages(store, GalleryFilter(latest=True, status=status), "ingest") == want, status
    by_score = _pages(store, GalleryFilter(latest=True), "score")
    assert by_score == sorted((s for s, r in shown.items() if r.score is not None), key=lambda s: -shown[s].score)  # type: ignore[operator]
    scores, categories = store.gallery_histograms(gallery.NEWEST)
    assert sum(scores) == len(
        [r for r in store.gallery_page(GalleryFilter(latest=True), limit=N) if r.score is not None]
    ) + len(
        [
            1
            for r in store.conn.execute(
                "SELECT removed_at FROM samples s WHERE removed_at IS NOT NULL AND EXISTS "
                "(SELECT 1 FROM annotations a WHERE a.sample_id = s.id AND a.score IS NOT NULL)"
            )
        ]
    )  # taken-down samples' verdicts are counted, as under a configuration
    want_cats: dict[str, int] = {}
    for (cats,) in store.conn.execute(
        "SELECT categories_json FROM annotations WHERE id IN (SELECT MAX(id) FROM annotations GROUP BY sample_id)"
    ):
        for c in json.loads(cats):
            want_cats[c] = want_cats.get(c, 0) + 1
    assert categories == want_cats
    assert store.gallery_stages(gallery.NEWEST) == ["cheap", "debate", "rare"]
    # the newest of several configurations disagreeing: listed first in the disagreement order
    split = _expected(store, GalleryFilter(latest=True, disagreement="configs"), "ingest")
    assert split and _pages(store, GalleryFilter(latest=True), "disagreement")[: len(split)] == split


def test_histograms_count_each_bin_and_category(store: Store) -> None:
    got_scores, got_categories = store.gallery_histograms(A)
    want = [0] * 10
    categories: dict[str, int] = {}
    for score, cats in store.conn.execute("SELECT score, categories_json FROM annotations WHERE config_hash = ?", (A,)):
        if score is not None:
            want[min(int(score * 10), 9)] += 1
        for c in json.loads(cats):
            categories[c] = categories.get(c, 0) + 1
    assert got_scores == want and sum(want) > 500
    assert got_categories == categories and len(categories) == 3
    assert store.gallery_histograms("c" * 64) == ([], {})


def test_disagreement_order_lists_disagreeing_samples_first(store: Store) -> None:
    for config in (A, B):
        for extra in SINGLE + COMBOS if config == A else SINGLE:
            if "disagreement" in extra:
                continue
            flt = GalleryFilter(config_hash=config, reviewer="alice", reviews_per_sample=2, **extra)
            split = _expected(store, GalleryFilter(**{**flt.__dict__, "disagreement": "configs"}), "ingest")
            rest = [s for s in _expected(store, flt, "ingest") if s not in split]
            assert _pages(store, flt, "disagreement") == split + rest, (config, extra)
    assert len(_expected(store, GalleryFilter(config_hash=A, disagreement="configs"), "ingest")) > 3
    first = store.gallery_page(GalleryFilter(config_hash=A), sort="disagreement", limit=3)
    assert all(r.harmful is not None for r in first)
