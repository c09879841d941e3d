"""Where `vhd tune`'s training data comes from: a store's verdicts (by split) and labelled sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tune.conftest import draw_set
from vhd.errors import ConfigError
from vhd.media.hashing import sha256_file
from vhd.records import Annotation, Kind, Sample, Status, Verdict
from vhd.store import Store
from vhd.tune.data import load_items, modality


def test_from_annotations_uses_verdicts_by_split_and_leaves_out_unparsed(tmp_path: Path) -> None:
    items = draw_set(tmp_path / "media", 6, seed=5)
    db = tmp_path / "run.db"
    with Store(db) as store:
        run = store.start_run({}, "cfg", {}, "p")
        for k, item in enumerate(items):
            split = "train" if k < 4 else "test"
            sample = Sample(id=sha256_file(item.path), kind=Kind.IMAGE, path=str(item.path), source="real", split=split)
            status = Status.UNPARSED if k == 3 else Status.OK
            verdict = Verdict(harmful=None if k == 3 else item.harmful, reason="r", status=status)
            store.save_annotation(Annotation(sample.id, run, "cfg", verdict), sample)
    problems: list[str] = []
    got = load_items(None, store=db, from_annotations=True, split="train", on_problem=problems.append)
    assert sorted(Path(i.path).name for i in got) == sorted(Path(i.path).name for i in items[:3])
    assert [i.harmful for i in sorted(got, key=lambda i: Path(i.path).name)] == [
        i.harmful for i in sorted(items[:3], key=lambda i: Path(i.path).name)
    ]
    assert any("unparsed" in p for p in problems)
    assert modality(got) == "image"
    with pytest.raises(ConfigError, match="split 'nope'"):
        load_items(None, store=db, from_annotations=True, split="nope")
    with pytest.raises(ConfigError, match="--store"):
        load_items(None, from_annotations=True)


def test_a_labelled_set_by_name_and_unknown_names(tmp_path: Path) -> None:
    items = draw_set(tmp_path / "media", 4, seed=6)
    db = tmp_path / "run.db"
    with Store(db) as store:
        for item in items:
            sample = Sample(id=item.id, kind=Kind.IMAGE, path=str(item.path), source="synthetic", split="train")
            store.save_annotation(
                Annotation(sample.id, store.start_run({}, "c", {}, "p"), "c", Verdict(True, "r")), sample
            )
        store.save_labelled_set("smid", items)
    got = load_items("smid", store=db)
    assert sorted(i.id for i in got) == sorted(i.id for i in items)
    assert {i.split for i in got} == {"train"} and {str(i.source) for i in got} == {"synthetic"}
    with pytest.raises(ConfigError, match="no labelled set"):
        load_items("other", store=db)
    with pytest.raises(ConfigError, match="needs --store"):
        load_items("smid")
    with pytest.raises(ConfigError, match="not found"):
        load_items("missing.csv", store=db)
