from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from tests.curate.conftest import annotate, fake_sample
from vhd.cli.main import main
from vhd.curate.split import split_store
from vhd.errors import ConfigError
from vhd.store import Store
from vhd.store.curation import DuplicateMark, mark_duplicates


def build(path: Path, root: Path, n: int = 200) -> list[str]:
    """n samples over 4 strata (harmful x source, uneven sizes), every 10th in a 3-sample cluster."""
    ids: list[str] = []
    with Store(path) as store:
        run = store.start_run({}, "cfg", {}, "p")
        for i in range(n):
            source = "real" if i % 3 else "synthetic"
            sample = fake_sample(i, root, source=source)
            annotate(store, sample, harmful=i % 4 == 0, run_id=run)
            ids.append(sample.id)
        marks = []
        for start in range(0, n - 2, 10):
            group = ids[start : start + 3]
            marks += [DuplicateMark(s, group[0], s == group[0], "near", 4) for s in group]
        mark_duplicates(store, marks, ids, threshold=10, policy="largest")
    return ids


def test_balanced_per_stratum_and_clusters_together(tmp_path: Path) -> None:
    ids = build(tmp_path / "s.db", tmp_path)
    with Store(tmp_path / "s.db") as store:
        result = split_store(store, test=0.2, seed=5)
        assert result.written and set(result.assignments) == set(ids)
        for name, c in result.strata.items():
            total = c["train"] + c["test"]
            assert abs(c["test"] - 0.2 * total) <= 3, name  # clusters of 3 make exact counts impossible
        for start in range(0, 198, 10):
            assert len({result.assignments[s] for s in ids[start : start + 3]}) == 1
        stored = Counter(r[0] for r in store.conn.execute("SELECT split FROM samples"))
        assert stored["test"] == sum(c["test"] for c in result.strata.values())
        assert set(result.strata) == {"harmful/real", "harmful/synthetic", "unharmful/real", "unharmful/synthetic"}
        assert result.labels_from == {"annotation": 200}


def test_deterministic_for_a_seed(tmp_path: Path) -> None:
    build(tmp_path / "a.db", tmp_path)
    build(tmp_path / "b.db", tmp_path)
    with Store(tmp_path / "a.db") as a, Store(tmp_path / "b.db") as b:
        first = split_store(a, seed=1).assignments
        assert split_store(b, seed=1).assignments == first
        assert split_store(a, seed=1).assignments == first
        assert split_store(a, seed=2).assignments != first


def test_labels_csv_takes_precedence_and_dry_run(tmp_path: Path) -> None:
    ids = build(tmp_path / "s.db", tmp_path, n=20)
    labels = tmp_path / "labels.csv"
    labels.write_text("id,path,harmful\n" + "".join(f"{i},,yes\n" for i in ids[:10]) + f",{tmp_path / '15.png'},no\n")
    with Store(tmp_path / "s.db") as store:
        result = split_store(store, labels=labels, dry_run=True)
        assert result.labels_from == {"labels-csv": 11, "annotation": 9}
        assert not result.written
        assert {r[0] for r in store.conn.execute("SELECT split FROM samples")} == {None}
        with pytest.raises(ConfigError, match="between 0 and 1"):
            split_store(store, test=1.0)


def test_empty_store_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Store(tmp_path / "empty.db").close()
    assert main(["split", "--store", str(tmp_path / "empty.db")]) == 2
    build(tmp_path / "s.db", tmp_path, n=40)
    out = tmp_path / "splits.csv"
    assert main(["split", "--store", str(tmp_path / "s.db"), "--seed", "3", "--out", str(out)]) == 0
    assert "harmful/real" in capsys.readouterr().out
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 40 and {r["split"] for r in rows} == {"train", "test"}


def test_dedup_after_split_finds_no_leak(tmp_path: Path) -> None:
    from tests.curate.conftest import photo, save

    folder = tmp_path / "m"
    a = photo("astronaut", (200, 200))
    save(a, folder / "a.png")
    save(a.resize((150, 150)), folder / "a_small.jpg")
    for i, name in enumerate(("coffee", "chelsea", "rocket", "camera", "moon")):
        save(photo(name, (120 + i, 90)), folder / f"{name}.jpg")
    db = tmp_path / "run.db"
    assert main(["ingest", str(folder), "--store", str(db), "--no-progress"]) == 0
    assert main(["dedup", str(db), "--apply", "--jobs", "1", "--no-progress"]) == 0
    for seed in range(6):
        assert main(["split", "--store", str(db), "--seed", str(seed), "--test", "0.5"]) == 0
        assert main(["dedup", str(db), "--jobs", "1", "--no-progress"]) == 0  # no cluster spans two splits


def test_labels_rows_left_out_are_listed_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = build(tmp_path / "s.db", tmp_path, n=20)
    labels = tmp_path / "labels.csv"
    labels.write_text(f"id,harmful\n{ids[0]},yes\nnot-a-hash,no\n{ids[1]},yes\n{ids[1]},no\n")
    assert main(["split", "--store", str(tmp_path / "s.db"), "--labels", str(labels)]) == 1
    out = capsys.readouterr().out
    assert "row 3: id 'not-a-hash' is not a sha256" in out
    assert "row 4 (yes), row 5 (no)" in out and "3 row(s) of" in out
    assert main(["split", "--store", str(tmp_path / "s.db"), "--labels", str(labels), "--json"]) == 1
    with Store(tmp_path / "s.db") as store:
        result = split_store(store, labels=labels, dry_run=True)
    assert result.labels_from == {"labels-csv": 1, "annotation": 19} and result.rows_left_out == 3
