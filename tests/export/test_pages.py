"""The built-in exports read raw pages (`ExportFormat.write_pages`); their bytes must equal the record path's."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.store.conftest import Builder
from vhd.export import export
from vhd.export import schema as columns_mod
from vhd.records import Kind, Role, Source, Status, Turn
from vhd.store import Store
from vhd.store.reads import ROW_ID, ROW_PATH, ROW_REASON, ROW_SAMPLE_ID

export_mod = importlib.import_module("vhd.export")
reads_mod = importlib.import_module("vhd.store.reads")


class Vhd11kRecords(export_mod.Vhd11kCsvFormat):
    """The built-in format as a plugin that only implements `write` (the record path)."""

    write_pages = export_mod.ExportFormat.write_pages


class JsonlRecords(export_mod.JsonlFormat):
    write_pages = export_mod.ExportFormat.write_pages


class ParquetRecords(export_mod.ParquetFormat):
    write_pages = export_mod.ExportFormat.write_pages


RECORDS = {"vhd11k-csv": "Vhd11kRecords", "jsonl": "JsonlRecords", "parquet": "ParquetRecords"}

ODD = [
    "plain",
    'commas, "quotes" and\nnewlines\r\nand a tab\t',
    "=SUM(A1:A9)",
    "'=already quoted",
    "-1 dash",
    "@at",
    "\tstarts with a tab",
    "ünïcödé ✓ 你好 🙂",
    "",
    "   ",
]


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """Images and videos, every status, synthetic provenance, odd text, NULLs, rounds 0-3, a removed sample."""
    root = tmp_path_factory.mktemp("varied")
    with Store(root / "vhd.db") as store:
        _fill(store, Builder(root))
        yield store


def _fill(store: Store, build: Builder) -> None:
    run_id = store.start_run({"rounds": 2}, "cfgA", {"judge": "scripted:j"}, "p1", "vhd annotate x")
    statuses = [Status.OK, Status.OK, Status.REFUSED, Status.UNPARSED, Status.ERROR, Status.OK]
    for i in range(2300):  # more than one page (256) and one Parquet row group (2048)
        status = statuses[i % len(statuses)]
        text = ODD[i % len(ODD)]
        rounds = i % 4
        turns: list[Turn] = []
        for r in range(1, rounds + 1):
            if i % 5 != 1 or r != rounds:  # some debates miss their last affirmative argument
                turns.append(Turn(Role.AFFIRMATIVE, r, f"{text} aff {r}" if i % 7 else text, 10, 5, 0.1, False, "m:a"))
            turns.append(Turn(Role.NEGATIVE, r, text if i % 3 else f"neg {r}", 0, 0, 0.0, i % 11 == 0, "m:n"))
        if rounds:
            turns.append(Turn(Role.JUDGE, rounds, "Yes." if i % 2 else text, 30, 3, 0.3, False, "m:j"))
        kind = Kind.VIDEO if i % 9 == 0 else Kind.IMAGE
        fields: dict[str, Any] = {"path": f"/data/{'vid' if kind is Kind.VIDEO else 'img'}/{i % 13}/{text[:5]}{i}.x"}
        if kind is Kind.VIDEO:
            fields["frames"] = [0, i % 30, 31]
        if i % 4 == 0:
            fields.update(
                source=Source.SYNTHETIC,
                generator="sdxl-turbo",
                keyword=text or None,
                meta={"prompt": text, "seed": i * 7919, "nested": {"b": [1, 2], "a": "ü"}},
            )
        elif i % 4 == 1:
            fields.update(source=Source.REAL, split="test", harmful=i % 8 == 1, meta={"seed": True, "prompt": None})
        s = build.sample(i, kind=kind, **fields)
        harmful = None if status in (Status.UNPARSED, Status.ERROR) or i % 17 == 0 else i % 2 == 0
        cats = [] if i % 3 else ["Violence and Threats", text] if text else ["Substance Misuse"]
        ann = build.annotation(
            s,
            run_id,
            status=status,
            harmful=harmful,
            reason=text,
            categories=cats,
            turns=turns,
            error='boom, "x"' if status is Status.ERROR else None,
            score=None if i % 5 == 0 else i / 2300,
        )
        if i % 6 == 0:
            ann.decided_by = "debate"
        if i % 10 == 0:
            ann.started_at = 0.0  # unknown: an empty timestamp
        else:
            ann.started_at = 1.7e9 + i + 0.123456
            ann.finished_at = 1.7e9 + i * 1.5
        store.save_annotation(ann, s)
        if i % 50 == 0:  # an older annotation under another configuration, and a newer one
            store.save_annotation(build.annotation(s, run_id, config_hash="cfgB", reason="other config"))
    with store._tx() as conn:  # NULL times (not 0), which the writer above never stores
        conn.execute("UPDATE annotations SET started_at = NULL, finished_at = NULL WHERE id % 37 = 0")
    store.remove_sample(build.sample(3).id)


def _export_both(
    store: Store, fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> tuple[list[Path], list[Path]]:
    monkeypatch.setitem(export_mod.EXPORT_FORMATS.builtin, "records", f"{__name__}:{RECORDS[fmt]}")
    suffix = ".csv" if fmt == "vhd11k-csv" else f".{fmt}"
    fast = export(store, fmt, tmp_path / "fast" / f"out{suffix}", **options)
    slow = export(store, "records", tmp_path / "records" / f"out{suffix}", **options)
    assert fast.written == slow.written and fast.left_out == slow.left_out
    assert fast.left_out_total == slow.left_out_total
    assert [p.name for p in fast.files] == [p.name for p in slow.files]
    return fast.files, slow.files


OPTIONS: list[dict[str, Any]] = [
    {},
    {"include_unparsed": True},
    {"kind": "video", "include_unparsed": True},
    {"kind": "image", "config_hash": "cfgA"},
    {"config_hash": "cfgB"},
    {"relative_to": "/data/img"},
]


@pytest.mark.parametrize("fmt", ["vhd11k-csv", "jsonl", "parquet"])
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_fast_path_writes_the_same_bytes(
    varied: Store, fmt: str, options: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    fast, slow = _export_both(varied, fmt, tmp_path, monkeypatch, **options)
    assert fast
    for a, b in zip(fast, slow, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    if fmt == "jsonl" and not options:
        lines = fast[0].read_text(encoding="utf-8").splitlines()
        assert len(lines) > 1000 and any(json.loads(line)["seed"] for line in lines)


def test_a_column_without_a_page_reader_falls_back_to_records(
    varied: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyarrow")
    monkeypatch.setattr(columns_mod, "RECORD_COLUMNS", list(columns_mod.RECORD_COLUMNS))
    columns_mod.add_column(
        columns_mod.Column("shout", lambda pa: pa.string(), lambda s, a: f"{s.path.upper()} {a.verdict.status}")
    )
    built = 0
    real_pairs = reads_mod.AnnotationPage.pairs

    def counting(page: Any) -> Any:
        nonlocal built
        built += 1
        return real_pairs(page)

    monkeypatch.setattr(reads_mod.AnnotationPage, "pairs", counting)
    for fmt in ("jsonl", "parquet"):
        fast, slow = _export_both(varied, fmt, tmp_path / fmt, monkeypatch)
        assert fast[0].read_bytes() == slow[0].read_bytes()
    first = json.loads(fast_line(tmp_path / "jsonl" / "fast" / "out.jsonl"))
    assert first["shout"] == f"{first['path'].upper()} {first['status']}"
    assert built > 0  # the records of each page were built for the plugin's column


def fast_line(path: Path) -> str:
    return path.read_text(encoding="utf-8").splitlines()[0]


def test_fast_path_builds_no_records(varied: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(page: Any) -> Any:
        raise AssertionError("the built-in formats read the raw rows")

    monkeypatch.setattr(reads_mod.AnnotationPage, "pairs", refuse)
    for fmt in ("vhd11k-csv", "jsonl"):
        assert export(varied, fmt, tmp_path / f"out.{fmt}").written > 1000


def test_pages_read_only_the_cells_asked(varied: Store) -> None:
    full = next(varied.iter_annotation_pages())
    page = next(varied.iter_annotation_pages(cells={ROW_REASON}, turn_cells={3}))
    assert [r[ROW_ID] for r in page.rows] == [r[ROW_ID] for r in full.rows]
    for slim, whole in zip(page.rows, full.rows, strict=True):
        kept = (ROW_ID, ROW_SAMPLE_ID, ROW_PATH, ROW_REASON)  # id, sample id and path: the page's key
        assert [slim[i] for i in kept] == [whole[i] for i in kept]
        assert all(slim[i] is None for i in range(len(slim)) if i not in kept)
    turns = [t for ts in page.turns.values() for t in ts]
    assert turns and [t[:1] + t[3:4] for t in turns] == [t[:1] + t[3:4] for ts in full.turns.values() for t in ts]
    assert {t[1] for t in turns} == {None}


class LoudJsonl(export_mod.JsonlFormat):
    """A plugin deriving from a built-in format to change its `write`."""

    def write(self, out: Path, rows: Any, kind: Kind | None) -> list[Path]:
        out.write_text("".join(f"{sample.path.upper()}\n" for sample, _ in rows), encoding="utf-8")
        return [out]


def test_a_subclass_that_replaces_write_gets_records(
    varied: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(export_mod.EXPORT_FORMATS.builtin, "loud", f"{__name__}:LoudJsonl")
    res = export(varied, "loud", tmp_path / "loud.txt", kind="video")
    lines = (tmp_path / "loud.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == res.written > 0 and res.root == Path("/data/vid")
    assert all(not line.startswith("/") and line.endswith(".X") for line in lines)  # plugins get relative paths too
    absolute = export(varied, "loud", tmp_path / "loud.txt", kind="video", absolute_paths=True)
    lines = (tmp_path / "loud.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == absolute.written and all(line.startswith("/DATA/VID/") for line in lines)
