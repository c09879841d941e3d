"""Side caches (`vhd.store.cache`): keyed JSON values in SQLite files of their own."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from vhd.errors import ConfigError
from vhd.store.cache import CacheTable, JsonCache

PAIRS = CacheTable("pairs", (("a", "TEXT"), ("b", "INTEGER")), "value_json", stamp="at", required=True)
SINGLE = CacheTable("single", (("k", "TEXT"),), "v", sort_keys=True)


def test_get_put_select_count(tmp_path: Path) -> None:
    with JsonCache(tmp_path / "sub" / "c.sqlite", [PAIRS, SINGLE], what="test cache") as cache:
        assert cache.get("pairs", ("x", 1)) is None
        cache.put("pairs", ("x", 1), {"n": 1})
        assert cache.put_many("pairs", [(("x", 2), [2]), (("y", 1), "three")]) == 2
        assert cache.put_many("pairs", []) == 0
        cache.put("pairs", ("x", 1), {"n": 10})  # replaced
        assert cache.get("pairs", ("x", 1)) == {"n": 10}
        assert sorted(cache.select("pairs", ("x",))) == [((1,), {"n": 10}), ((2,), [2])]
        assert len(cache.select("pairs")) == 3
        assert cache.count("pairs") == 3 and cache.count("pairs", ("x",)) == 2 and cache.count("pairs", ("z",)) == 0
        cache.put("single", ("k1",), {"b": 1, "a": 2})
        assert cache.select("single") == [(("k1",), {"b": 1, "a": 2})]
        with pytest.raises(ValueError, match="key column"):
            cache.get("pairs", ("x",))
        with pytest.raises(ValueError, match="no cache table"):
            cache.count("nope")
    with sqlite3.connect(tmp_path / "sub" / "c.sqlite") as conn:
        assert conn.execute("SELECT v FROM single").fetchone()[0] == '{"a": 2, "b": 1}'
        at = conn.execute("SELECT at FROM pairs").fetchall()
        assert all(isinstance(r[0], float) for r in at)


def test_schema_statements() -> None:
    assert PAIRS.create_sql() == (
        "CREATE TABLE IF NOT EXISTS pairs (a TEXT NOT NULL, b INTEGER NOT NULL, value_json TEXT NOT NULL, "
        "at REAL NOT NULL, PRIMARY KEY (a, b))"
    )
    assert SINGLE.create_sql() == "CREATE TABLE IF NOT EXISTS single (k TEXT PRIMARY KEY, v TEXT)"
    with pytest.raises(ValueError):
        CacheTable("bad name", (("a", "TEXT"),), "v")
    with pytest.raises(ValueError):
        CacheTable("t", (("a", "BLOB"),), "v")


def test_existing_file_is_used_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE single (k TEXT PRIMARY KEY, v TEXT NOT NULL, extra TEXT)")
        conn.execute("""INSERT INTO single (k, v) VALUES ('a', '{"x": 1}')""")
    with JsonCache(path, [SINGLE], what="test cache") as cache:
        assert cache.get("single", ("a",)) == {"x": 1}


def test_unusable_file_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database, not at all" * 100)
    with pytest.raises(ConfigError, match=r"cannot open the test cache .*bad\.sqlite.*choose another --out"):
        JsonCache(bad, [SINGLE], what="the test cache")


def test_wal_and_threads(tmp_path: Path) -> None:
    with JsonCache(tmp_path / "w.sqlite", [PAIRS], what="test cache", wal=True) as cache:

        def write(n: int) -> None:
            cache.put_many("pairs", [((f"t{n}", i), i) for i in range(50)])

        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert cache.count("pairs") == 200
    with sqlite3.connect(tmp_path / "w.sqlite") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
