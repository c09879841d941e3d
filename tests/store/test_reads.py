"""The store's public reads and writes that commands share: opening, configuration hashes,
labelled sets and the review queue's verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.store.conftest import Builder
from vhd.errors import ConfigError
from vhd.records import LabelledSample, Sample, Status
from vhd.store import Store, VerdictRow, open_store


def _label(
    sample: Sample, harmful: bool, reason: str | None = None, categories: tuple[str, ...] = ()
) -> LabelledSample:
    return LabelledSample(
        id=sample.id,
        path=Path(sample.path),
        kind=sample.kind,
        harmful=harmful,
        reason=reason,
        categories=list(categories),
    )


def test_open_store_needs_an_existing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no store at .*none\.db: create one with `vhd annotate"):
        open_store(tmp_path / "none.db")
    assert not (tmp_path / "none.db").exists()
    with Store(tmp_path / "a.db", create=True):
        pass
    with open_store(tmp_path / "a.db") as db:
        assert db.path == tmp_path / "a.db"


def test_resolve_config_hash(store: Store, build: Builder, run_id: str) -> None:
    assert store.resolve_config_hash(None) is None
    with pytest.raises(ConfigError, match="has no annotation at all"):
        store.resolve_config_hash(None, latest=True)
    s = build.sample(1)
    store.save_annotation(build.annotation(s, run_id, config_hash="abc111"), s)
    store.save_annotation(build.annotation(s, run_id, config_hash="abc222"), s)
    assert store.resolve_config_hash("abc2") == "abc222"
    assert store.resolve_config_hash("", latest=True) in {"abc111", "abc222"}
    with pytest.raises(ConfigError, match=r"2 configuration\(s\) match 'abc'; known: "):
        store.resolve_config_hash("abc")
    with pytest.raises(ConfigError, match=r"no configuration\(s\) match 'ffff'"):
        store.resolve_config_hash("ffff", latest=True)


def test_labelled_sets_round_trip(store: Store, build: Builder) -> None:
    a, b, c = build.sample(1), build.sample(2), build.sample(3)
    for s in (a, b, c):
        store.upsert_sample(s)
    assert store.labelled_sets() == {}
    with pytest.raises(ConfigError, match=r"no labelled set 'val'.*none yet"):
        store.labelled_set("val")
    labels = [_label(b, True, "knife", ("Violence",)), _label(a, False)]
    assert store.save_labelled_set("val", labels, source="/x.csv") == 2
    assert store.save_labelled_set("other", [_label(c, True)]) == 1
    assert store.save_labelled_set("val", [_label(a, True, "changed")]) == 1  # replaces a's label
    assert store.labelled_sets() == {"other": 1, "val": 2}
    rows = store.labelled_set("val")
    expected = sorted([_label(a, True, "changed"), _label(b, True, "knife", ("Violence",))], key=lambda r: r.id)
    assert rows == expected
    store.remove_sample(a.id)
    assert [r.id for r in store.labelled_set("val")] == [b.id]
    with pytest.raises(ConfigError, match="sets there: other, val"):
        store.labelled_set("nope")


def test_final_verdicts(store: Store, build: Builder, run_id: str) -> None:
    a, b, gone = build.sample("a"), build.sample("b"), build.sample("c")
    store.save_annotation(build.annotation(b, run_id, config_hash="h1", score=0.5), b)
    store.save_annotation(build.annotation(a, run_id, config_hash="h1", harmful=False, reason=""), a)
    store.save_annotation(build.annotation(a, run_id, config_hash="h2", status=Status.UNPARSED, harmful=None), a)
    store.save_annotation(build.annotation(a, run_id, config_hash="h3", status=Status.ERROR, harmful=None), a)
    store.save_annotation(build.annotation(gone, run_id, config_hash="h1"), gone)
    store.remove_sample(gone.id)
    rows = store.final_verdicts()
    assert rows == [
        VerdictRow(a.id, "h1", "ok", False, 0.75, "", str(a.path), "image"),
        VerdictRow(a.id, "h2", "unparsed", None, 0.75, "violence", str(a.path), "image"),
        VerdictRow(b.id, "h1", "ok", True, 0.5, "violence", str(b.path), "image"),
    ]
