"""One schema in every format: JSON Lines, Parquet and the Hugging Face dataset read with the same types.

Each format is loaded the way a user would (pandas, ``datasets``) and compared column by column.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import vhd
from tests.annotate.test_api import make_images
from tests.optional import need_module
from vhd.export import read_table
from vhd.export.schema import RECORD_COLUMNS, arrow_schema, hf_features, json_schema

NAMES = [c.name for c in RECORD_COLUMNS]


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three images and a video annotated by the scripted backend, exported in every format.

    Real samples only: ``prompt``, ``seed``, ``decided_by``, ``error`` and ``label`` are null in
    every row and ``categories`` empty in every row, the cases inferring readers get wrong.
    """
    from tests.media.conftest import make_video

    need_module("datasets", "pip install 'vhd[hf]'")
    need_module("pyarrow", "pip install 'vhd[parquet]'")
    root = tmp_path_factory.mktemp("schema")
    make_images(root / "m", 3)
    make_video(root / "m" / "clip.mp4", 12)
    db = root / "s.db"
    vhd.annotate([root / "m"], model="scripted:demo", store=db)
    out = {"jsonl": root / "a.jsonl", "parquet": root / "a.parquet", "hf": root / "hf"}
    for fmt in ("jsonl", "parquet"):
        vhd.export.export(db, fmt, out[fmt])
    vhd.export.export_hf(db, out["hf"])
    return out


def _hf_sets(exports: dict[str, Path], cache: Path) -> dict[str, Any]:
    import datasets

    hf = datasets.load_from_disk(str(exports["hf"]))
    return {
        "jsonl": datasets.load_dataset(
            "json", data_files=str(exports["jsonl"]), features=hf_features(), split="train", cache_dir=str(cache)
        ),
        "parquet": datasets.load_dataset(
            "parquet", data_files=str(exports["parquet"]), features=hf_features(), split="train", cache_dir=str(cache)
        ),
        "hf": datasets.concatenate_datasets(list(hf.values())),
    }


def test_the_export_has_one_flat_column_list_and_no_sample_column(exports: dict[str, Path]) -> None:
    df = read_table(exports["parquet"]).to_pandas()
    assert list(df.columns) == NAMES and "sample" not in NAMES
    assert len(df.sample(2, random_state=0)) == 2  # DataFrame.sample is not hidden by a column


def test_datasets_reads_every_format_with_the_same_features(exports: dict[str, Path], tmp_path: Path) -> None:
    import datasets

    sets = _hf_sets(exports, tmp_path / "cache")
    want = hf_features()
    hf_own = {k: v for k, v in sets["hf"].features.items() if k not in ("image", "video_frames")}
    assert set(sets["hf"].features) - set(NAMES) == {"image", "video_frames"}
    for name, ds in sets.items():
        assert len(ds) == 4, name
        assert list(ds.features) == list(sets["hf"].features if name == "hf" else NAMES), name
        for column in NAMES:
            assert ds.features[column] == want[column] == hf_own[column], (name, column, ds.features[column])
    assert datasets.Features({k: sets["jsonl"].features[k] for k in NAMES}) == datasets.Features(hf_own)
    assert datasets.Features({k: sets["parquet"].features[k] for k in NAMES}) == datasets.Features(hf_own)
    assert want["harmful"] == datasets.ClassLabel(names=["not_harmful", "harmful"])  # one type: the HF export's
    assert want["started_at"] == datasets.Value("timestamp[us, tz=UTC]")
    assert want["prompt"] == datasets.Value("string") and want["categories"].feature == datasets.Value("string")
    picked = ["path", "harmful", "meta", "frames"]
    rows = {name: sorted(ds.select_columns(picked).to_list(), key=str) for name, ds in sets.items()}
    assert rows["jsonl"] == rows["parquet"] == rows["hf"]  # the same values, not only the same types


def test_pandas_reads_every_format_with_the_same_dtypes(exports: dict[str, Path], tmp_path: Path) -> None:
    import pandas as pd

    frames = {
        "parquet (pandas.read_parquet)": pd.read_parquet(exports["parquet"]),
        "parquet (read_table)": read_table(exports["parquet"]).to_pandas(),
        "jsonl (read_table)": read_table(exports["jsonl"]).to_pandas(),
        **{f"{k} (datasets)": ds.to_pandas() for k, ds in _hf_sets(exports, tmp_path / "cache").items()},
    }
    reference = frames["parquet (pandas.read_parquet)"].dtypes
    for name, df in frames.items():
        for column in NAMES:
            if name.endswith("(datasets)") and column == "harmful":
                assert str(df[column].dtype) == "int64", (name, column)  # the ClassLabel's index
                continue
            assert df[column].dtype == reference[column], (name, column, df[column].dtype, reference[column])
    assert str(reference["started_at"]) == "datetime64[us, UTC]"
    assert reference["prompt"] != "float64" and reference["decided_by"] != "float64"  # typed although all null


def test_every_jsonl_line_matches_the_json_schema(exports: dict[str, Path]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    lines = exports["jsonl"].read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4
    for line in lines:
        validator.validate(json.loads(line))
    assert list(schema["properties"]) == NAMES == arrow_schema().names
    assert schema["properties"]["started_at"]["format"] == "date-time"
    bad = {**json.loads(lines[0]), "harmful": "yes"}
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)


def test_read_table_refuses_other_files_in_one_line(tmp_path: Path) -> None:
    from vhd.errors import ConfigError

    (tmp_path / "a.csv").write_text("x\n")
    with pytest.raises(ConfigError, match=r"\.jsonl and \.parquet"):
        read_table(tmp_path / "a.csv")
    (tmp_path / "b.jsonl").write_text('{"unknown": 1}\n')
    with pytest.raises(ConfigError, match="not a vhd export"):
        read_table(tmp_path / "b.jsonl")
    (tmp_path / "e.jsonl").write_text("")
    assert read_table(tmp_path / "e.jsonl").schema == arrow_schema()
