"""The store at scale: keyset pages, streaming exports equal to the in-memory ones, typed columns
that agree across JSON Lines and Parquet, and hot queries that use indexes (EXPLAIN QUERY PLAN)."""

from __future__ import annotations

import csv
import importlib
import io
import json
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from vhd.export import export
from vhd.records import Annotation, Kind, Role, Sample, Status
from vhd.store import Store
from vhd.store.curation import excluded_samples
from vhd.store.leases import LeaseOwner

if TYPE_CHECKING:
    from tests.store.conftest import Builder

export_mod = importlib.import_module("vhd.export")
columns_mod = importlib.import_module("vhd.export.schema")

BIG_TABLES = ("samples", "annotations", "turns", "stat_index", "leases", "skips", "s", "a", "a2", "t")


@pytest.fixture
def varied(store: Store, build: Builder, run_id: str) -> Store:
    """Images with 1, 2 and 3 debate rounds, an undecided one, a video, and two samples sharing a path."""
    other = store.start_run({}, "cfgB", {}, "p", "")
    for i, rounds in enumerate([2, 3, 1, 2, 2, 3]):
        s = build.sample(f"i{i}", path=f"/data/img/{i % 4}.png")  # paths repeat: keys must still be unique
        store.save_annotation(build.annotation(s, run_id, turns=build.turns(rounds), harmful=i % 2 == 0), s)
        if i % 3 == 0:  # a second configuration, in another run
            store.save_annotation(build.annotation(s, other, config_hash="cfgB", turns=build.turns(1)), s)
    u = build.sample("u", path="/data/img/u.png", meta={"k": [1, 2], "z": "ü"})
    store.save_annotation(build.annotation(u, run_id, status=Status.UNPARSED, harmful=None, reason=""), u)
    v = build.sample("v", kind=Kind.VIDEO, path="/data/vid/v.mp4", frames=[0, 4])
    store.save_annotation(build.annotation(v, run_id, turns=build.turns(2)), v)
    return store


def _pairs(store: Store, **kw: object) -> list[tuple[str, int]]:
    return [(s.id, a.config_hash.__hash__()) for s, a in store.iter_annotations(**kw)]  # type: ignore[arg-type]


@pytest.mark.parametrize("filters", [{}, {"config_hash": "cfgA"}, {"config_hash": "cfgB"}, {"run_id": None}])
def test_every_page_size_yields_the_same_rows(varied: Store, run_id: str, filters: dict[str, object]) -> None:
    if "run_id" in filters:
        filters = {"run_id": run_id}
    whole = _pairs(varied, page=10_000, **filters)
    assert whole and len(set(whole)) == len(whole)
    for page in (1, 2, 3):
        assert _pairs(varied, page=page, **filters) == whole


def test_rows_read_by_position_equal_rows_read_by_name(varied: Store, build: Builder, run_id: str) -> None:
    """`iter_annotations` reads rows by position; `get_sample` / `get_annotation` by column name."""
    full = build.sample(
        "full", source="synthetic", keyword="kw", generator="gen", split="test", harmful=False, meta={"seed": 7}
    )
    varied.save_annotation(build.annotation(full, run_id, categories=["C1"], error="e", score=0.25), full)
    pairs = list(varied.iter_annotations(config_hash="cfgA")) + list(varied.iter_annotations(config_hash="cfgB"))
    assert len(pairs) == 11 and any(s.meta for s, _ in pairs) and any(s.frames for s, _ in pairs)
    for sample, ann in pairs:
        assert sample == varied.get_sample(sample.id)
        assert ann == varied.get_annotation(sample.id, ann.config_hash)
        assert all(isinstance(t.role, Role) for t in ann.turns) and isinstance(ann.verdict.status, Status)


def _reference_csv(rows: list[tuple[Sample, Annotation]], kind: Kind) -> str:
    """The VHD11K CSV as the in-memory writer made it: rounds = max over the rows, padded with None."""
    rounds = max([1, *(max((t.round for t in a.turns), default=0) for _, a in rows)])

    def arg(a: Annotation, role: Role, r: int) -> str:
        return next((t.text for t in a.turns if t.role is role and t.round == r and t.text.strip()), "None")

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(export_mod.vhd11k_columns(kind, rounds))
    for s, a in rows:
        w.writerow(
            [
                s.path,
                export_mod.vhd11k_decision(a),
                a.verdict.reason,
                *(arg(a, Role.AFFIRMATIVE, r + 1) for r in range(rounds)),
                *(arg(a, Role.NEGATIVE, r + 1) for r in range(rounds)),
                ";".join(a.verdict.categories),
            ]
        )
    return buf.getvalue()


def test_streamed_csv_equals_the_in_memory_reference(varied: Store, tmp_path: Path) -> None:
    res = export(varied, "vhd11k-csv", tmp_path / "out.csv", config_hash="cfgA", absolute_paths=True)
    decided = [(s, a) for s, a in varied.iter_annotations(config_hash="cfgA") if export_mod.vhd11k_decision(a)]
    for kind, name in ((Kind.IMAGE, "out_images.csv"), (Kind.VIDEO, "out_videos.csv")):
        rows = [(s, a) for s, a in decided if s.kind is kind]
        got = (tmp_path / name).read_bytes().decode("utf-8")
        assert got == _reference_csv(rows, kind)
    assert res.written == len(decided) == 7 and res.left_out_counts == {"status unparsed": 1}
    assert "affirmativeDebater_argument_2" in (tmp_path / "out_images.csv").read_text()  # 3 rounds: padded


def test_jsonl_and_parquet_agree_on_values_and_types(varied: Store, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    export(varied, "jsonl", tmp_path / "a.jsonl", include_unparsed=True, absolute_paths=True)
    export(varied, "parquet", tmp_path / "a.parquet", include_unparsed=True, absolute_paths=True)
    lines = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()]
    table = pq.read_table(tmp_path / "a.parquet")
    assert table.schema.field("started_at").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("meta").type == pa.string()
    rows = table.to_pylist()
    assert len(rows) == len(lines) == 8 and [list(r) for r in rows] == [list(x) for x in lines]
    for line, row in zip(lines, rows, strict=True):
        for key in ("started_at", "finished_at"):
            assert line[key].endswith("+00:00") and datetime.fromisoformat(line[key]) == row[key]
            line[key] = row[key] = None
        assert line == row  # meta is the same JSON string in both, every other value equal
    meta = next(x["meta"] for x in lines if x["path"] == "/data/img/u.png")
    assert json.loads(meta) == {"k": [1, 2], "z": "ü"}


def test_a_column_added_once_reaches_both_formats(
    varied: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.parquet as pq

    monkeypatch.setattr(columns_mod, "RECORD_COLUMNS", list(columns_mod.RECORD_COLUMNS))
    columns_mod.add_column(columns_mod.Column("n_turns", lambda pa: pa.int32(), lambda s, a: len(a.turns)))
    with pytest.raises(Exception, match="exists already"):
        columns_mod.add_column(columns_mod.Column("n_turns", lambda pa: pa.int32(), lambda s, a: 0))
    export(varied, "jsonl", tmp_path / "a.jsonl")
    export(varied, "parquet", tmp_path / "a.parquet")
    from_jsonl = [json.loads(x)["n_turns"] for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert from_jsonl == pq.read_table(tmp_path / "a.parquet").column("n_turns").to_pylist()
    assert set(from_jsonl) == {3, 5, 7}


def _scans(store: Store, sql: str) -> list[str]:
    plan = [str(r[3]) for r in store.conn.execute("EXPLAIN QUERY PLAN " + sql)]
    return [p for p in plan if re.match(rf"SCAN ({'|'.join(BIG_TABLES)})\b", p)]


def test_hot_queries_search_indexes_never_scan(varied: Store, run_id: str, tmp_path: Path) -> None:
    """Every query an export page, a resume (stat index, claim) and a count makes uses an index."""
    from vhd.fileio import file_stat

    f = tmp_path / "x.png"
    f.write_bytes(b"x")
    statements: list[str] = []
    varied.conn.set_trace_callback(statements.append)
    for kw in ({}, {"config_hash": "cfgA"}, {"run_id": run_id}):
        export(varied, "jsonl", tmp_path / "e.jsonl", **kw)  # type: ignore[arg-type]
    varied.known_hashes([file_stat(f)])
    varied.known_files([file_stat(f)], "cfgA")  # a resume's one lookup a batch
    varied.paths_with_hash("0" * 64)
    excluded_samples(varied)  # removed samples: by the partial index, not a scan of the samples
    ids = [s.id for s, _ in varied.iter_annotations()]
    varied.claim(LeaseOwner.here(run_id), "cfgA", ids, ttl=60)
    varied.final_ids("cfgA")
    varied.counts("cfgA")
    varied.get_annotation(ids[0], "cfgA")
    varied.get_annotation(ids[0])
    assert [x.id for x in varied.find_samples(ids[0][:8])] == [ids[0]]  # `vhd show STORE PREFIX`
    varied.find_samples("/data/img/1.png")
    varied.conn.set_trace_callback(None)
    selects = {s for s in statements if s.lstrip().upper().startswith("SELECT")}
    assert len(selects) >= 8
    full = {s[:90]: _scans(varied, s) for s in selects if _scans(varied, s)}
    assert full == {}
    (claim,) = [s for s in selects if "+status" in s]  # a resume's claim: by sample id, however many are done
    assert any(
        "(sample_id=? AND config_hash=?)" in str(r[3]) for r in varied.conn.execute("EXPLAIN QUERY PLAN " + claim)
    )
    pages = [s for s in selects if "CROSS JOIN annotations a" in s and "LIMIT 1" not in s]
    assert len(pages) == 3
    ends = [s for s in selects if "CROSS JOIN annotations a" in s and "LIMIT 1" in s]  # the paths' common folder
    assert len(ends) == 6
    for sql in ends:  # the first and the last path, each found walking the path index from one end
        plan = [str(r[3]) for r in varied.conn.execute("EXPLAIN QUERY PLAN " + sql)]
        assert any(p.startswith("SEARCH s USING INDEX samples_path") for p in plan), plan
    for sql in pages:  # each page walks samples by key and finds a sample's annotations by its id
        plan = [str(r[3]) for r in varied.conn.execute("EXPLAIN QUERY PLAN " + sql)]
        assert any(p.startswith("SEARCH s USING INDEX samples_path_id") for p in plan), plan
        assert all("(sample_id=" in p for p in plan if re.match(r"SEARCH a2? ", p)), plan
