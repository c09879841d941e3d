from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.curate.conftest import annotate, photo, save
from vhd.cli.main import main
from vhd.curate.ingest import ingest
from vhd.curate.remove import remove_samples
from vhd.export import export
from vhd.store import Store
from vhd.store.curation import removals


@pytest.fixture
def db(tmp_path: Path) -> Path:
    folder = tmp_path / "m"
    for name in ("astronaut", "coffee", "rocket"):
        save(photo(name, (120, 90)), folder / f"{name}.jpg")
    path = tmp_path / "run.db"
    with Store(path) as store:
        ingest([folder], store)
        run = store.start_run({}, "cfg", {}, "p")
        for row in store.conn.execute("SELECT id FROM samples").fetchall():
            sample = store.get_sample(row[0])
            assert sample is not None
            annotate(store, sample, True, run)
    return path


def test_remove_hides_everywhere_and_logs(tmp_path: Path, db: Path) -> None:
    target = tmp_path / "m" / "coffee.jpg"
    with Store(db) as store:
        result = remove_samples(store, [str(target)], reason="takedown #7", requested_by="legal")
        (done,) = result.removed
        assert not done.already and target.exists()
        assert len(list(store.iter_annotations())) == 2
        out = export(store, "jsonl", tmp_path / "a.jsonl")
        assert out.written == 2 and "coffee" not in (tmp_path / "a.jsonl").read_text()
        (log,) = removals(store)
        assert (log.reason, log.requested_by, log.deleted) == ("takedown #7", "legal", [])
        assert log.path == str(target)


def test_delete_files_and_idempotent_rerun(tmp_path: Path, db: Path) -> None:
    target = tmp_path / "m" / "rocket.jpg"
    with Store(db) as store:
        sid = store.find_samples(str(target))[0].id
        first = remove_samples(store, [sid[:10]], reason="r")
        assert target.exists() and first.removed[0].deleted == []
        again = remove_samples(store, [sid], reason="r", delete_files=True)
        assert again.removed[0].already and again.removed[0].deleted == [str(target)]
        assert not target.exists()
        (log,) = removals(store)  # still one removal, now listing the deleted file
        assert log.deleted == [str(target)]
        third = remove_samples(store, [sid], delete_files=True)
        assert third.removed[0].already and third.removed[0].deleted == []
        assert len(removals(store)) == 1


def test_unknown_and_ambiguous_refs(db: Path) -> None:
    with Store(db) as store:
        result = remove_samples(store, ["0" * 64, "nope.jpg"])
        assert [ref for ref, _ in result.not_found] == ["0" * 64, "nope.jpg"]
        assert not result.removed


def test_cli(tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "m" / "astronaut.jpg"
    assert main(["remove", str(target), "--store", str(db), "--delete-files", "--reason", "asked", "--by", "me"]) == 0
    assert "removed" in capsys.readouterr().out and not target.exists()
    assert main(["remove", "missing.jpg", "--store", str(db), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["not_found"][0]["ref"] == "missing.jpg"
    assert main(["remove", "x", "--store", str(tmp_path / "none.db")]) == 2
