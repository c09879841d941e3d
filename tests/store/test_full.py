"""A full disk under the store and its side caches: one-line `StoreWriteError`, nothing lost.

``PRAGMA max_page_count`` makes SQLite report SQLITE_FULL without a real full disk.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.store.conftest import Builder
from vhd.errors import StoreWriteError, VhdError
from vhd.store import Store
from vhd.store.cache import CacheTable, JsonCache


def _limit(conn: sqlite3.Connection, extra: int) -> None:
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + extra}")


def test_store_full_raises_one_line_and_keeps_what_was_committed(store: Store, build: Builder) -> None:
    run = store.start_run({}, "cfgA", {}, "p")
    store.save_annotation(build.annotation(build.sample(0), run), build.sample(0))
    _limit(store.conn, 1)
    big = build.turns()
    for t in big:
        t.text = "x" * 50_000
    with pytest.raises(StoreWriteError, match=r"disk holding store .* is full") as info:
        store.save_annotation(build.annotation(build.sample(1), run, turns=big), build.sample(1))
    assert info.value.full and isinstance(info.value, VhdError) and "\n" not in str(info.value)
    assert not store.conn.in_transaction
    assert [s.id for s, _ in store.iter_annotations()] == [build.sample(0).id]
    store.save_annotation(build.annotation(build.sample(2), run), build.sample(2))  # small writes still fit


def test_cache_full_raises_one_line(tmp_path: Path) -> None:
    table = CacheTable("t", (("k", "TEXT"),), "v")
    with JsonCache(tmp_path / "c.sqlite", [table], what="test cache") as cache:
        cache.put("t", ["a"], 1)
        _limit(cache._conn, 1)
        with pytest.raises(StoreWriteError, match=r"test cache .* is full"):
            cache.put_many("t", [([f"k{i}"], "y" * 5000) for i in range(50)])
        assert cache.get("t", ["a"]) == 1 and cache.count("t") == 1
