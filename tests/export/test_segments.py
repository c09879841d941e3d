"""The ``segments`` column: one schema in JSON Lines, Parquet and the Hugging Face dataset; not in the VHD11K CSV."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.store.conftest import Builder
from vhd.export import export
from vhd.export.read import read_table
from vhd.records import Kind, Segment
from vhd.store import Store

SEGMENTS = [
    Segment(0.0, 4.0, False, 0.1, "a street", [], None, "screen"),
    Segment(4.0, 7.5, True, 0.9, "violence", ["violence"], "high", "debate"),
]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    build = Builder(tmp_path)
    db = Store(tmp_path / "vhd.db")
    run = db.start_run({}, "cfgA", {}, "p")
    video, image = build.sample("v", Kind.VIDEO), build.sample("i")
    ann = build.annotation(video, run)
    ann.verdict.segments = list(SEGMENTS)
    db.save_annotation(ann, video)
    db.save_annotation(build.annotation(image, run), image)
    return db


def _by_kind(records: list[dict]) -> dict[str, list]:
    return {r["kind"]: r["segments"] for r in records}


def test_segments_in_jsonl_and_parquet(store: Store, tmp_path: Path) -> None:
    export(store, "jsonl", tmp_path / "a.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    want = {"video": [s.to_dict() for s in SEGMENTS], "image": []}
    assert _by_kind(lines) == want
    pytest.importorskip("pyarrow")
    export(store, "parquet", tmp_path / "a.parquet")
    for path in (tmp_path / "a.parquet", tmp_path / "a.jsonl"):
        assert _by_kind(read_table(path).to_pylist()) == want  # one schema, both formats


def test_segments_in_the_hf_dataset(store: Store, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    export(store, "hf", tmp_path / "ds")
    ds = datasets.load_from_disk(str(tmp_path / "ds"))
    rows = [r for split in ds.values() for r in split]
    got = {r["kind"]: r["segments"] for r in rows}
    assert got["image"] == [] and [s["start_s"] for s in got["video"]] == [0.0, 4.0]
    assert got["video"][1]["harmful"] is True and got["video"][1]["decided_by"] == "debate"


def test_the_vhd11k_csv_keeps_its_release_columns(store: Store, tmp_path: Path) -> None:
    export(store, "vhd11k-csv", tmp_path / "a.csv", kind="video")
    with (tmp_path / "a.csv").open() as fh:
        header = next(csv.reader(fh))
    assert "segments" not in header
