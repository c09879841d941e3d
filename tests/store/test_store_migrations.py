from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from vhd.errors import ConfigError, VhdError
from vhd.store import Store
from vhd.store import migrations as mig


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_fresh_store_has_schema_and_pragmas(tmp_path: Path) -> None:
    db = tmp_path / "sub" / "new.db"
    with Store(db) as store:
        conn = store.conn
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
        assert mig.applied_migrations(conn) == [name for name, _ in mig.MIGRATIONS]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(mig.MIGRATIONS)
    assert {"runs", "samples", "annotations", "turns", "skips", "migrations"} <= _tables(db)


def test_reopen_is_idempotent_and_keeps_data(tmp_path: Path) -> None:
    db = tmp_path / "vhd.db"
    with Store(db) as store:
        run_id = store.start_run({}, "h", {}, "p")
    with Store(db) as store:
        assert mig.apply_migrations(store.conn) == []
        assert [r.id for r in store.runs()] == [run_id]
        count = store.conn.execute("SELECT COUNT(*) FROM migrations").fetchone()[0]
        assert count == len(mig.MIGRATIONS)


def test_store_from_newer_vhd_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "vhd.db"
    Store(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO migrations (name, applied_at) VALUES ('9999_future', 0)")
    with pytest.raises(VhdError, match="newer vhd"):
        Store(db)


def test_foreign_sqlite_file_and_garbage_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE stuff (x)")
    with pytest.raises(ConfigError, match="not a vhd store"):
        Store(other)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(ConfigError, match="cannot use"):
        Store(garbage)


def test_failed_migration_rolls_back_and_later_run_applies_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "vhd.db"
    Store(db).close()
    bad = ("0002_bad", "CREATE TABLE extra (x INTEGER); INSERT INTO nowhere VALUES (1);")
    monkeypatch.setattr(mig, "MIGRATIONS", [*mig.MIGRATIONS, bad])
    with pytest.raises(ConfigError):
        Store(db)
    assert "extra" not in _tables(db)
    good = ("0002_good", "CREATE TABLE extra (x INTEGER);\nCREATE INDEX extra_x ON extra (x);")
    monkeypatch.setattr(mig, "MIGRATIONS", [*mig.MIGRATIONS[:-1], good])
    with Store(db) as store:
        assert mig.applied_migrations(store.conn)[-1] == "0002_good"
    assert "extra" in _tables(db)


def test_split_statements_keeps_trigger_bodies_whole() -> None:
    sql = """
    CREATE TABLE a (x);
    CREATE TRIGGER t AFTER INSERT ON a BEGIN
        UPDATE a SET x = 1;
        DELETE FROM a WHERE x = 2;
    END;
    -- a comment
    CREATE INDEX ai ON a (x);
    """
    parts = mig.split_statements(sql)
    assert len(parts) == 3
    assert parts[1].startswith("CREATE TRIGGER") and parts[1].rstrip().endswith("END;")


@pytest.mark.parametrize("attempt", range(5))
def test_concurrent_first_opens_apply_each_migration_once(tmp_path: Path, attempt: int) -> None:
    """Eight first opens of one brand-new file at once: none fails with "database is locked"."""
    db = tmp_path / f"race{attempt}.db"
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            barrier.wait()
            with Store(db) as store:
                store.start_run({}, "h", {}, "p")
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Store(db) as store:
        assert mig.applied_migrations(store.conn) == [name for name, _ in mig.MIGRATIONS]
        assert len(store.runs()) == 8
