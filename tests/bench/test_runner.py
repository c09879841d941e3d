from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PIL import Image

from tests.bench.conftest import ROWS, write_labels
from tests.bench.fake_detector import RedDetector
from vhd.bench.cache import CACHE_FILE, PredictionCache
from vhd.bench.data import load_bench_set
from vhd.bench.runner import run_bench
from vhd.detectors.registry import create_detector
from vhd.errors import ConfigError


def test_bench_set_reports_bad_rows(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    _, media = labelled
    shutil.copy(media / "red1.png", media / "copy.png")
    frames = media / "clip"
    frames.mkdir()
    for k in range(3):
        Image.new("RGB", (20, 20), (200, 10 * k, 0)).save(frames / f"clip_{k:04d}.png")
    rows = [
        *ROWS[:3],
        ("missing.png", (0, 0, 0), "yes", "A", "real", "test"),
        ("copy.png", (0, 0, 0), "yes", "A", "real", "test"),
        ("blue1.png", (0, 0, 0), "yes", "Flying Saucers;F", "real", "test"),
        ("clip", (0, 0, 0), "yes", "A", "synthetic", "test"),
    ]
    bench = load_bench_set(write_labels(tmp_path / "l.csv", rows), media=media)
    by_line = {p.line: p for p in bench.problems}
    assert "not found" in by_line[5].message and not by_line[5].used
    assert "duplicate of row 2 (same content, same answer)" in by_line[6].message
    assert "Flying Saucers" in by_line[7].message and by_line[7].used
    assert [Path(i.path).name for i in bench.items] == ["red1.png", "red2.png", "red3.png", "blue1.png", "clip"]
    assert bench.items[3].categories == ["F"]
    assert bench.items[4].kind.value == "video"
    assert bench.items[1].categories == ["A", "F"]


def test_no_usable_row_is_an_error(tmp_path: Path) -> None:
    labels = tmp_path / "l.csv"
    labels.write_text("path,harmful\nnothing.png,yes\n")
    with pytest.raises(ConfigError, match="no usable row"):
        load_bench_set(labels)


def test_cache_reruns_only_new_detectors(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    labels, media = labelled
    bench = load_bench_set(labels, media=media)
    with PredictionCache(tmp_path / CACHE_FILE) as cache:
        first = run_bench(bench, [create_detector("red")], cache=cache, concurrency=3)
    red = first.detectors[0]
    assert (red.computed, red.cached, red.failed) == (10, 0, 1)  # green.png fails
    assert "green confuses me" in (red.predictions[bench.items[7].id].error or "")
    assert red.samples_per_s is not None and red.samples_per_s > 0
    calls = RedDetector.calls
    with PredictionCache(tmp_path / CACHE_FILE) as cache:
        second = run_bench(
            bench, [create_detector("red"), create_detector("strict=red", {"threshold": 0.9})], cache=cache
        )
    red2, strict = second.detectors
    assert (red2.cached, red2.computed) == (9, 1)  # only the failed sample is retried
    assert (strict.cached, strict.computed) == (0, 10)
    assert RedDetector.calls == calls + 11
    assert red2.predictions[bench.items[0].id].harmful is True
    assert strict.predictions[bench.items[2].id].harmful is False  # 140/255 < 0.9


def test_concurrency_is_shared_across_detectors(labelled: tuple[Path, Path]) -> None:
    labels, media = labelled
    bench = load_bench_set(labels, media=media)
    dets = [create_detector(f"r{k}=red", {"delay": 0.02}) for k in range(3)]
    run_bench(bench, dets, concurrency=2)
    assert RedDetector.peak == 2
    RedDetector.peak = 0
    run_bench(bench, [create_detector("red", {"delay": 0.02})], concurrency=1)
    assert RedDetector.peak == 1


def test_corrupt_media_is_a_per_sample_error(tmp_path: Path, labelled: tuple[Path, Path]) -> None:
    labels, media = labelled
    (media / "red3.png").write_bytes(b"not a png at all")
    bench = load_bench_set(labels, media=media)
    run = run_bench(bench, [create_detector("red")])
    errors = [p.error for p in run.detectors[0].predictions.values() if p.error]
    assert any(e.startswith("media:") for e in errors)
    assert sum(p.harmful is not None for p in run.detectors[0].predictions.values()) == 8


def test_duplicate_labels_refused(labelled: tuple[Path, Path]) -> None:
    labels, media = labelled
    bench = load_bench_set(labels, media=media)
    with pytest.raises(ConfigError, match="given twice"):
        run_bench(bench, [create_detector("red"), create_detector("red")])
