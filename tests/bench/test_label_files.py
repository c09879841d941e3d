"""`vhd bench --labels` on files vhd wrote and on foreign files: paths, duplicates, escaped cells."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.conftest import ROWS, make_images
from vhd.bench.data import load_bench_set
from vhd.cli.main import main
from vhd.errors import ConfigError
from vhd.labels.files import LabelOptions
from vhd.store.sqlite import Store


def _annotated_store(tmp_path: Path) -> tuple[Path, Path]:
    from vhd.media.load import load_sample
    from vhd.records import Annotation, Kind, MediaItem, Verdict

    media = tmp_path / "media"
    make_images(media)
    store = tmp_path / "run.db"
    with Store(store) as db:
        run = db.start_run({}, "c", {}, "p")
        for name, _colour, harmful, *_ in ROWS:
            sample = load_sample(MediaItem(path=media / name, kind=Kind.IMAGE)).sample
            reason = f"=cmd|' /C calc'!A0 {name}" if harmful == "yes" else f"-{name} is calm"
            verdict = Verdict(harmful=harmful == "yes", reason=reason)
            db.save_annotation(Annotation(sample_id=sample.id, run_id=run, config_hash="c", verdict=verdict), sample)
    return store, media


def test_export_then_bench_uses_every_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, _media = _annotated_store(tmp_path)
    exported = tmp_path / "exports" / "all.csv"
    assert main(["export", str(store), "-o", str(exported), "--absolute-paths"]) == 0  # a local round trip
    report = tmp_path / "report"
    args = ["bench", "--labels", str(exported), "--store", str(store), "--detector", "red", "--out", str(report)]
    assert main([*args, "--no-plots", "--no-progress", "--bootstrap", "0"]) in (0, 1)  # red fails on green
    assert f"{len(ROWS)} sample(s); 0 row(s) with problems" in capsys.readouterr().out
    bench = load_bench_set(exported, store=store)
    assert len(bench) == len(ROWS) and bench.problems == []
    by_name = {Path(i.path).name: i for i in bench.items}
    assert by_name["red1.png"].reason == "=cmd|' /C calc'!A0 red1.png"  # byte-equal through the CSV escape
    assert by_name["pink.png"].reason == "-pink.png is calm"


def test_without_the_store_the_exported_paths_are_refused_per_row(tmp_path: Path) -> None:
    store, media = _annotated_store(tmp_path)
    exported = tmp_path / "exports" / "all.csv"
    assert main(["export", str(store), "-o", str(exported), "--absolute-paths"]) == 0  # a local round trip
    with pytest.raises(ConfigError, match="--allow-outside-paths"):
        load_bench_set(exported)
    assert len(load_bench_set(exported, media=media)) == len(ROWS)
    assert len(load_bench_set(exported, options=LabelOptions(allow_outside_paths=True))) == len(ROWS)


def test_bench_reads_the_judge_csv_with_remaps_and_duplicates(tmp_path: Path) -> None:
    media = tmp_path / "media"
    make_images(media)
    judge = tmp_path / "judge.csv"
    judge.write_text(
        "imagePath,response,harmfulType\n"
        "C:/Users/author/vhd/red1.png,Yes,violence\n"
        "C:/Users/author/vhd/blue1.png,No,calm\n"
        "C:/Users/author/vhd/red1.png,No,calm\n"
        "C:/Users/author/vhd/gone.png,No,calm\n"
    )
    opts = LabelOptions(path_prefixes=(("C:/Users/author/vhd", str(media)),), duplicates="last")
    bench = load_bench_set(judge, options=opts)
    assert [(Path(i.path).name, i.harmful) for i in bench.items] == [("blue1.png", False), ("red1.png", False)]
    problems = {p.line: p.message for p in bench.problems}
    assert "not found" in problems[5] and "--path-prefix" in problems[5]
    assert "kept row 4 (--duplicates last)" in problems[2]


def test_content_duplicates_follow_the_policy(tmp_path: Path) -> None:
    media = tmp_path / "media"
    make_images(media)
    (media / "copy.png").write_bytes((media / "red1.png").read_bytes())
    labels = tmp_path / "labels.csv"
    labels.write_text("path,harmful\nmedia/red1.png,yes\nmedia/blue1.png,no\nmedia/copy.png,no\n")
    bench = load_bench_set(labels)
    assert [Path(i.path).name for i in bench.items] == ["blue1.png"]
    assert {p.line for p in bench.problems} == {2, 4}
    assert "row 2 (yes), row 4 (no)" in bench.problems[0].message
    first = load_bench_set(labels, options=LabelOptions(duplicates="first"))
    assert [(Path(i.path).name, i.harmful) for i in first.items] == [("red1.png", True), ("blue1.png", False)]
