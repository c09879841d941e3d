"""A full disk during `vhd annotate`: one line, exit 1, and a store that reads and resumes.

SQLite reports a full disk (SQLITE_FULL) when a write would grow the database past
``PRAGMA max_page_count``; the store's connection gets a small limit here, so no root and no
real full disk are needed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.annotate.test_api import make_images
from vhd.cli.main import main
from vhd.store.sqlite import Store

LONG = " ".join(["word"] * 400)  # about 2 kB a turn: a sample's annotation needs a few pages


def _limit_pages(monkeypatch: pytest.MonkeyPatch, extra: int) -> None:
    original = Store.__init__

    def limited(self: Store, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        self.conn.execute(f"PRAGMA max_page_count = {pages + extra}")

    monkeypatch.setattr(Store, "__init__", limited)


def _long_script(folder: Path) -> str:
    script = folder / "script.yaml"
    script.write_text(f'default: "{LONG}"\nrules:\n  - when: {{tag: judge}}\n    reply: "No, plain colours."\n')
    return f"scripted:{script}"


def test_full_disk_is_one_line_exit_1_and_the_store_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 30
    make_images(tmp_path / "m", n)
    db = tmp_path / "full.db"
    argv = ["annotate", str(tmp_path / "m"), "--model", _long_script(tmp_path), "--store", str(db), "--no-progress"]
    with monkeypatch.context() as m:
        _limit_pages(m, extra=25)
        code = main([*argv, "--concurrency", "1"])
    captured = capsys.readouterr()
    assert code == 1
    err = [line for line in captured.err.splitlines() if line.strip()]
    assert len(err) == 1, captured.err
    line = err[0]
    assert line.startswith("vhd: error: ") and "full" in line and "run the same command again" in line
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    with Store(db) as st:
        saved = [a for _, a in st.iter_annotations()]
    assert 0 < len(saved) < n and all(len(a.turns) == 5 for a in saved)
    assert f"{len(saved)} sample(s)" in line  # how much is saved
    # space again: the same command finishes the rest
    assert main(argv) == 0
    assert f"annotated {n - len(saved)} sample(s)" in capsys.readouterr().out
    with Store(db) as st:
        assert sum(1 for _ in st.iter_annotations()) == n
        assert st.conn.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0


def test_full_disk_at_the_first_sample_is_one_line_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_images(tmp_path / "m", 3)
    db = tmp_path / "full.db"
    Store(db).close()  # the schema is there; no new page fits
    argv = ["annotate", str(tmp_path / "m"), "--model", _long_script(tmp_path), "--store", str(db), "--no-progress"]
    with monkeypatch.context() as m:
        _limit_pages(m, extra=0)
        code = main(argv)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 1 and len(err) == 1, err
    assert "full" in err[0] and "0 sample(s)" in err[0] and "run the same command again" in err[0]
    assert main(argv) == 0
    with Store(db) as st:
        assert sum(1 for _ in st.iter_annotations()) == 3


def test_a_store_write_error_in_any_command_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk is not a usage error: every command exits 1 (the same command resumes), in one line."""
    import vhd.cli.show as show
    from vhd.errors import StoreWriteError

    def full(_args: object) -> int:
        raise StoreWriteError("the store run.db could not be written: database or disk is full")

    monkeypatch.setattr(show, "run", full)
    assert main(["show", "run.db", "x"]) == 1
