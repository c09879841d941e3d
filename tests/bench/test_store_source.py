from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.conftest import make_images
from vhd.bench.data import UNHARMFUL
from vhd.bench.pipeline import benchmark, build_detectors
from vhd.bench.store_source import is_store_file, load_bench_set_from_store
from vhd.cli.main import main
from vhd.errors import ConfigError
from vhd.media.hashing import sha256_file
from vhd.records import Annotation, Kind, Sample, Status, Verdict
from vhd.store import Store


def _annotate(store: Store, run: str, path: Path, harmful: bool | None, cats: list[str], status: Status) -> None:
    sample = Sample(id=sha256_file(path), kind=Kind.IMAGE, path=str(path), source="real", split="test")
    verdict = Verdict(harmful=harmful, reason="r", categories=cats, status=status)
    store.save_annotation(Annotation(sample.id, run, "cfg", verdict), sample)


@pytest.fixture
def annotated(tmp_path: Path) -> Path:
    media = tmp_path / "media"
    make_images(media)
    db = tmp_path / "run.db"
    with Store(db) as store:
        run = store.start_run({}, "cfg", {}, "p")
        _annotate(store, run, media / "red1.png", True, ["Violence and Threats", "F"], Status.OK)
        _annotate(store, run, media / "red2.png", True, ["Made-up Harm"], Status.OK)
        _annotate(store, run, media / "blue1.png", False, [], Status.OK)
        _annotate(store, run, media / "gray.png", None, [], Status.UNPARSED)
        _annotate(store, run, media / "pink.png", None, [], Status.ERROR)
        _annotate(store, run, media / "white.png", True, ["B"], Status.OK)
        # a later annotation of the same sample under another configuration wins
        later = Sample(id=sha256_file(media / "white.png"), kind=Kind.IMAGE, path=str(media / "white.png"))
        store.save_annotation(Annotation(later.id, run, "cfg2", Verdict(False, "fine")), later)
    (media / "blue1.png").write_bytes((media / "blue1.png").read_bytes() + b"changed")
    return db


def test_store_labels_from_latest_annotation(annotated: Path) -> None:
    assert is_store_file(annotated)
    bench = load_bench_set_from_store(annotated)
    by_name = {Path(i.path).name: i for i in bench.items}
    assert sorted(by_name) == ["red1.png", "red2.png", "white.png"]
    assert by_name["red1.png"].harmful and by_name["red1.png"].categories == ["A", "F"]
    assert by_name["red2.png"].harmful and by_name["red2.png"].categories == []
    assert not by_name["white.png"].harmful and by_name["white.png"].categories == []
    assert by_name["red1.png"].source == "real" and by_name["red1.png"].split == "test"
    messages = [str(p) for p in bench.problems]
    assert any("gray.png" in m and "unparsed" in m for m in messages)
    assert any("pink.png" in m and "error" in m for m in messages)
    assert any("blue1.png" in m and "changed" in m for m in messages)
    assert any("Made-up Harm" in m and "(row kept)" in m for m in messages)


def test_store_as_labels_file_and_store_flag(tmp_path: Path, annotated: Path) -> None:
    report = benchmark(annotated, build_detectors(["red"]), tmp_path / "r1", resamples=0, plots=False)
    assert len(report.run.bench.items) == 3
    truth = {i.id: i.harmful for i in report.run.bench.items}
    assert sum(truth.values()) == 2 and UNHARMFUL == "unharmful"
    with pytest.raises(ConfigError, match="drop --media"):
        benchmark(annotated, build_detectors(["red"]), tmp_path / "r2", media=tmp_path, plots=False)
    args = ["bench", "--detector", "red", "--no-plots", "--bootstrap", "0", "--no-progress"]
    assert main([*args, "--store", str(annotated), "--out", str(tmp_path / "r3")]) == 0
    assert (tmp_path / "r3" / "results.json").is_file()


def test_store_without_usable_samples(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no store at"):
        load_bench_set_from_store(tmp_path / "nothing.db")
    with Store(tmp_path / "empty.db", create=True):
        pass
    with pytest.raises(ConfigError, match="no usable sample"):
        load_bench_set_from_store(tmp_path / "empty.db")
    assert not is_store_file(tmp_path / "nothing.db")
