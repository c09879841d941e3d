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
    with Store(db, create=True) as store:
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
    Store(db, create=True).close()
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
    Store(db, create=True).close()
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


def open_at_once(db: Path, n: int) -> list[BaseException]:
    """Open the store from ``n`` threads released together, each starting a run; the errors raised."""
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            barrier.wait()
            with Store(db) as store:
                store.start_run({}, "h", {}, "p")
        except BaseException as exc:  # collected and returned
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.mark.parametrize("attempt", range(5))
def test_concurrent_first_opens_apply_each_migration_once(tmp_path: Path, attempt: int) -> None:
    """Eight first opens of one brand-new file at once: none fails with "database is locked"."""
    db = tmp_path / f"race{attempt}.db"
    assert open_at_once(db, 8) == []
    with Store(db) as store:
        assert mig.applied_migrations(store.conn) == [name for name, _ in mig.MIGRATIONS]
        assert len(store.runs()) == 8


NEW = ("9000_test_extra", "CREATE TABLE test_extra (x INTEGER);")


def _old_store_with_a_run(db: Path) -> str:
    """A store at the (possibly patched) schema with one run, written with the columns every schema has."""
    with Store(db, create=True):
        pass
    import uuid

    run_id = uuid.uuid4().hex
    conn = sqlite3.connect(db)
    conn.execute(
        "INSERT INTO runs (id, config_json, config_hash, models_json, prompt_hash, vhd_version, started_at) "
        "VALUES (?, '{\"k\": \"v\"}', 'h', '{}', 'p', '0', 1.0)",
        (run_id,),
    )
    conn.commit()
    conn.close()
    return run_id


def test_migrating_an_existing_store_backs_it_up_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "vhd.db"
    run_id = _old_store_with_a_run(db)
    version = len(mig.MIGRATIONS)
    monkeypatch.setattr(mig, "MIGRATIONS", [*mig.MIGRATIONS, NEW])
    with Store(db) as store:
        assert mig.applied_migrations(store.conn)[-1] == NEW[0]
    backup = tmp_path / f"vhd.db.bak-{version}"
    assert backup.is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["vhd.db", backup.name]
    with sqlite3.connect(backup) as conn:  # a consistent copy of the store as it was
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY id")] == [
            n for n, _ in mig.MIGRATIONS[:-1]
        ]
        assert conn.execute("SELECT id FROM runs").fetchall() == [(run_id,)]
        assert "test_extra" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    # opening again migrates nothing and writes no second backup
    with Store(db):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vhd.db", backup.name]


def test_new_and_current_stores_are_not_backed_up(tmp_path: Path) -> None:
    db = tmp_path / "vhd.db"
    _old_store_with_a_run(db)
    _old_store_with_a_run(db)
    assert [p.name for p in tmp_path.iterdir()] == ["vhd.db"]


def test_failed_migration_keeps_the_store_and_its_backup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "vhd.db"
    run_id = _old_store_with_a_run(db)
    version = len(mig.MIGRATIONS)
    monkeypatch.setattr(mig, "MIGRATIONS", [*mig.MIGRATIONS, NEW, ("9001_bad", "INSERT INTO nowhere VALUES (1);")])
    with pytest.raises(ConfigError):
        Store(db)
    assert "test_extra" not in _tables(db)  # all pending migrations or none
    with sqlite3.connect(tmp_path / f"vhd.db.bak-{version}") as conn:
        assert conn.execute("SELECT id FROM runs").fetchall() == [(run_id,)]


def test_concurrent_opens_of_an_old_store_migrate_and_back_up_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "vhd.db"
    _old_store_with_a_run(db)
    monkeypatch.setattr(mig, "MIGRATIONS", [*mig.MIGRATIONS, NEW])
    assert open_at_once(db, 6) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vhd.db", f"vhd.db.bak-{len(mig.MIGRATIONS) - 1}"]
    with Store(db) as store:
        assert mig.applied_migrations(store.conn).count(NEW[0]) == 1 and len(store.runs()) == 7


@pytest.mark.parametrize(
    "argv",
    [
        ["annotate", "MEDIA", "--model", "scripted:demo", "--store", "DB", "--no-progress"],
        ["annotate", "MEDIA", "--model", "scripted:demo", "--store", "DB", "--dry-run"],
        ["export", "DB", "--format", "jsonl", "-o", "OUT"],
        ["show", "DB", "MEDIA"],
    ],
)
def test_cli_on_a_store_from_a_newer_vhd_exits_2_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    from PIL import Image

    from vhd.cli.main import main

    db = tmp_path / "vhd.db"
    Store(db, create=True).close()
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO migrations (name, applied_at) VALUES ('9999_future', 0)")
    before = db.read_bytes()
    media = tmp_path / "m"
    media.mkdir()
    Image.new("RGB", (32, 32), (9, 9, 9)).save(media / "a.png")
    subst = {"MEDIA": str(media), "DB": str(db), "OUT": str(tmp_path / "o.jsonl")}
    assert main([subst.get(a, a) for a in argv]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("vhd: error: ") and "newer vhd" in err[0]
    assert "pip install -U vhd" in err[0]
    assert db.read_bytes() == before and not list(tmp_path.glob("vhd.db.bak-*"))


def test_backup_that_cannot_be_written_leaves_the_store_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "vhd.db"
    _old_store_with_a_run(db)
    version = len(mig.MIGRATIONS)
    (tmp_path / f"vhd.db.bak-{version}.tmp").mkdir()  # stands in for a full disk: the copy cannot be made
    monkeypatch.setattr(mig, "MIGRATIONS", [*mig.MIGRATIONS, NEW])
    with pytest.raises(ConfigError, match=rf"cannot back up .*vhd\.db\.bak-{version}.*the store is unchanged"):
        Store(db)
    assert "test_extra" not in _tables(db) and not (tmp_path / f"vhd.db.bak-{version}").exists()


def test_truncated_migration_keeps_old_turns_and_admits_the_new_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vhd.records import Annotation, Kind, Role, Sample, Status, Turn, Verdict

    db = tmp_path / "vhd.db"
    with monkeypatch.context() as m:  # a store as the vhd before 0013 left it
        m.setattr(mig, "MIGRATIONS", [x for x in mig.MIGRATIONS if x[0] != "0014_truncated"])
        run_id = _old_store_with_a_run(db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("INSERT INTO samples (id, path, kind) VALUES ('a', '/a.png', 'image')")
    conn.execute(
        "INSERT INTO annotations (id, sample_id, run_id, config_hash, status) VALUES (1, 'a', ?, 'h', 'ok')", (run_id,)
    )
    conn.execute("INSERT INTO turns (annotation_id, idx, role, round, text) VALUES (1, 0, 'judge', 1, 'No.')")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO annotations (sample_id, run_id, config_hash, status) VALUES ('a', ?, 'g', 'truncated')",
            (run_id,),
        )
    other = sqlite3.connect(db, isolation_level=None)  # open before the upgrade: must see the new schema after it
    other.execute("SELECT count(*) FROM annotations").fetchone()
    with Store(db) as store:
        (_, old), *_ = list(store.iter_annotations())
        assert old.turns[0].finish_reason is None and old.turns[0].reasoning_tokens is None
        turn = Turn(Role.JUDGE, 1, "", 0, 100, finish_reason="length", reasoning_tokens=100)
        verdict = Verdict(None, "truncated: the judge hit the token limit", status=Status.TRUNCATED)
        sample = Sample(id="b", path="/b.png", kind=Kind.IMAGE)
        store.save_annotation(Annotation("b", run_id, "h", verdict, [turn]), sample)
        got = store.get_annotation("b", "h")
        assert got is not None and got.verdict.status is Status.TRUNCATED
        assert (got.turns[0].finish_reason, got.turns[0].reasoning_tokens) == ("length", 100)
        assert store.conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    insert = "INSERT INTO annotations (sample_id, run_id, config_hash, status) VALUES ('a', ?, ?, ?)"
    other.execute(insert, (run_id, "g", "truncated"))
    with pytest.raises(sqlite3.IntegrityError):  # still checked
        other.execute(insert, (run_id, "f", "maybe"))
    other.close()
    conn.close()


def test_credentials_migration_gives_back_the_sources_forged_claims_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Samples an older vhd relabelled from an untrusted C2PA claim get their declared source back."""
    import json

    from vhd.records import Source

    db = tmp_path / "vhd.db"
    with monkeypatch.context() as m:  # a store as the vhd before 0015 left it
        m.setattr(mig, "MIGRATIONS", [x for x in mig.MIGRATIONS if x[0] != "0015_credentials_are_claims"])
        _old_store_with_a_run(db)
    old = {"ai_generated": True, "claimed_generator": "OpenAI DALL-E 3", "signer": "Adobe Content Authenticity Signer"}
    rows = {  # id: (source, generator, content_credentials), as the older vhd stored them
        "forged": ("synthetic", "claimed:OpenAI DALL-E 3", {**old, "state": "Valid", "overrode_source": "real"}),
        "open": ("synthetic", "claimed:OpenAI DALL-E 3", {**old, "state": "Valid"}),
        "trusted": ("synthetic", "claimed:sdxl", {**old, "state": "Trusted"}),
        "broken": ("real", None, {**old, "state": "Invalid"}),
        "plain": ("real", "mine", None),
    }
    conn = sqlite3.connect(db, isolation_level=None)
    for ident, (source, generator, record) in rows.items():
        meta = json.dumps({"keyword": "cat", **({"content_credentials": record} if record else {})})
        conn.execute(
            "INSERT INTO samples (id, path, kind, source, generator, meta_json) VALUES (?, ?, 'image', ?, ?, ?)",
            (ident, f"/{ident}.png", source, generator, meta),
        )
    conn.close()
    with Store(db) as store:
        got = {ident: store.get_sample(ident) for ident in rows}
    forged, open_, trusted, broken, plain = (got[k] for k in rows)
    assert forged is not None and forged.source is Source.REAL and forged.generator is None
    assert forged.meta["content_credentials"]["trust"] == "untrusted"
    assert forged.meta["content_credentials"]["restored_source"] == "real"
    assert "overrode_source" not in forged.meta["content_credentials"] and forged.meta["keyword"] == "cat"
    assert open_ is not None and open_.source is Source.SYNTHETIC and open_.generator is None  # cannot tell
    assert trusted is not None and trusted.generator == "claimed:sdxl"
    assert trusted.meta["content_credentials"]["trust"] == "trusted"
    assert broken is not None and broken.meta["content_credentials"]["trust"] == "invalid"
    assert plain is not None and plain.generator == "mine" and plain.meta == {"keyword": "cat"}


def test_policies_migration_keeps_old_annotations_and_stores_policies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vhd.records import Annotation, Kind, Sample, Verdict

    db = tmp_path / "vhd.db"
    with monkeypatch.context() as m:  # a store as the vhd before policies left it
        m.setattr(mig, "MIGRATIONS", [x for x in mig.MIGRATIONS if x[0] != "0018_policies_and_severity"])
        run_id = _old_store_with_a_run(db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("INSERT INTO samples (id, path, kind) VALUES ('a', '/a.png', 'image')")
    conn.execute(
        "INSERT INTO annotations (id, sample_id, run_id, config_hash, status, harmful) "
        "VALUES (1, 'a', ?, 'h', 'ok', 1)",
        (run_id,),
    )
    conn.close()
    with Store(db) as store:
        old = store.get_annotation("a", "h")
        assert old is not None and old.verdict.severity is None and old.policy is None  # before policies: unknown
        assert store.run_policy(run_id) is None and store.policies() == []
        store.save_policy("f" * 64, "acme", "2", "name: acme\n")
        new_run = store.start_run({}, "h2", {}, "p", policy_hash="f" * 64)
        verdict = Verdict(True, "gore", severity="high")
        store.save_annotation(Annotation("b", new_run, "h2", verdict), Sample(id="b", path="/b.png", kind=Kind.IMAGE))
        got = store.get_annotation("b", "h2")
        assert got is not None and got.verdict.severity == "high" and got.policy == "acme@2"
        assert store.get_policy("fff") == store.run_policy(new_run) and store.policies()[0].key == "acme@2"
        store.save_policy("f" * 64, "acme", "2", "another text")  # kept once: the first text stays
        assert [p.text for p in store.policies()] == ["name: acme\n"]
        # a severity without a harmful verdict is not kept
        store.save_annotation(Annotation("c", new_run, "h2", Verdict(False, "fine", severity="high")),
                              Sample(id="c", path="/c.png", kind=Kind.IMAGE))  # fmt: skip
        assert store.get_annotation("c", "h2").verdict.severity is None  # type: ignore[union-attr]
