"""`vhd.export.to_pandas` / `store_table`: a store's verdicts as a DataFrame with the export's columns, no file."""

from __future__ import annotations

from pathlib import Path

import pytest

import vhd
from tests.annotate.test_api import make_images
from tests.optional import need_module
from vhd.export.schema import RECORD_COLUMNS


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_module("pyarrow", "pip install 'vhd[parquet]'")
    root = tmp_path_factory.mktemp("frame")
    make_images(root / "m", 3)
    path = root / "s.db"
    vhd.annotate([root / "m"], model="scripted:demo", store=path, progress=False)
    return path


def test_to_pandas_has_the_parquet_exports_columns_and_rows(db: Path, tmp_path: Path) -> None:
    import pandas as pd

    from vhd.export import export, to_pandas

    before = sorted(p.name for p in db.parent.iterdir())
    df = to_pandas(db, include_unparsed=False, absolute_paths=False)
    assert sorted(p.name for p in db.parent.iterdir()) == before  # nothing written beside the store
    export(db, "parquet", tmp_path / "a.parquet")
    want = pd.read_parquet(tmp_path / "a.parquet")
    assert list(df.columns) == [c.name for c in RECORD_COLUMNS] and len(df) == 3
    pd.testing.assert_frame_equal(df.drop(columns="turns"), want.drop(columns="turns"))
    assert [len(t) for t in df["turns"]] == [len(t) for t in want["turns"]]


def test_to_pandas_defaults_show_every_verdict_with_paths_as_stored(db: Path) -> None:
    from vhd.export import store_table, to_pandas
    from vhd.store import Store

    df = to_pandas(db)
    assert all(Path(p).is_absolute() for p in df["path"]) and set(df["status"]) == {"ok"}
    with Store(db) as store:  # an open store works too
        config_hash = store.runs()[0].config_hash
        assert store_table(store, config_hash, kind="image").num_rows == 3
    assert to_pandas(db, "no-such-hash").empty and list(to_pandas(db, "no-such-hash").columns) == list(df.columns)


def test_to_pandas_of_a_missing_store_fails_in_one_line(tmp_path: Path) -> None:
    from vhd.errors import ConfigError
    from vhd.export import to_pandas

    with pytest.raises(ConfigError, match="no store at"):
        to_pandas(tmp_path / "typo.db")
    assert not (tmp_path / "typo.db").exists()
