from __future__ import annotations

import csv
from pathlib import Path

import pytest
from PIL import Image

from tests.bench.fake_detector import LabelDetector, RedDetector
from vhd.detectors import registry

# (file, colour, harmful, categories, source, split)
ROWS = [
    ("red1.png", (250, 10, 10), "yes", "A", "real", "cal"),
    ("red2.png", (200, 30, 30), "yes", "A;F", "synthetic", "test"),
    ("red3.png", (140, 60, 60), "yes", "B", "real", "test"),
    ("pink.png", (180, 120, 120), "no", "", "synthetic", "cal"),
    ("blue1.png", (10, 10, 250), "no", "", "real", "test"),
    ("blue2.png", (30, 30, 200), "yes", "F", "synthetic", "cal"),
    ("gray.png", (100, 100, 100), "no", "", "real", "test"),
    ("green.png", (10, 250, 10), "no", "", "real", "test"),
    ("dark.png", (90, 5, 5), "yes", "C", "real", "cal"),
    ("white.png", (240, 240, 240), "no", "", "synthetic", "test"),
]


def make_images(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, colour, *_ in ROWS:
        Image.new("RGB", (40, 30), colour).save(folder / name)


def write_labels(path: Path, rows: list[tuple[str, ...]] | None = None) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["path", "harmful", "categories", "source", "split"])
        for name, _colour, harmful, cats, source, split in rows or ROWS:
            w.writerow([name, harmful, cats, source, split])
    return path


@pytest.fixture
def labelled(tmp_path: Path) -> tuple[Path, Path]:
    media = tmp_path / "media"
    make_images(media)
    return write_labels(tmp_path / "labels.csv"), media


@pytest.fixture(autouse=True)
def fake_detectors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BUILTIN, "red", "tests.bench.fake_detector:RedDetector")
    monkeypatch.setitem(registry.BUILTIN, "hive", "tests.bench.fake_detector:LabelDetector")
    RedDetector.calls = RedDetector.active = RedDetector.peak = 0
    _ = LabelDetector
