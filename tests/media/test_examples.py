from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from vhd.demo import write_examples
from vhd.errors import MissingDependencyError
from vhd.media.discover import discover
from vhd.media.load import load_sample
from vhd.media.video import read_frames


@pytest.mark.slow
def test_write_examples(tmp_path: Path) -> None:
    paths = write_examples(tmp_path / "ex")
    names = [p.name for p in paths]
    assert names[-1] == "manifest.csv"
    assert {".jpg", ".png", ".mp4"} <= {p.suffix for p in paths}
    assert len(paths) == 8
    with open(paths[-1], newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["path"] for r in rows] == names[:-1]
    assert {r["source"] for r in rows} == {"real", "synthetic"}
    assert all(r["keyword"] for r in rows)

    video = read_frames(tmp_path / "ex" / "bouncing_shapes.mp4")
    assert video.total_frames == 48
    assert video.images[0].size == (160, 120)

    found = discover([paths[-1]])
    assert not found.skipped
    loaded = [load_sample(item) for item in found.items]
    assert [s.sample.kind.value for s in loaded].count("video") == 1
    assert all(s.sample.keyword for s in loaded)

    again = write_examples(tmp_path / "again")
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in paths]


def test_examples_need_their_extras(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "skimage", None)
    with pytest.raises(MissingDependencyError, match=r"vhd\[examples\]"):
        write_examples(tmp_path)
    monkeypatch.delitem(sys.modules, "skimage")
    monkeypatch.setitem(sys.modules, "av", None)
    with pytest.raises(MissingDependencyError, match=r"vhd\[video\]"):
        write_examples(tmp_path)
    assert not any(tmp_path.iterdir())


def test_write_shape_examples_are_high_contrast_drawings(tmp_path: Path) -> None:
    from vhd.demo import write_shape_examples
    from vhd.media.image import open_image

    paths = write_shape_examples(tmp_path / "shapes")
    assert {p.name for p in paths} == {
        "horse.png",
        "figure_silhouette.png",
        "hand_silhouette.png",
        "line_art.png",
        "checkers.png",
    }
    for path in paths:
        colours = open_image(path).convert("L").getcolors(256) or []
        dark = sum(n for n, v in colours if v < 64)
        light = sum(n for n, v in colours if v > 192)
        assert dark > 0 and light > 0 and dark + light > 0.95 * sum(n for n, _ in colours), path.name
    horse = open_image(tmp_path / "shapes" / "horse.png").convert("L")
    assert horse.getpixel((0, 0)) > 192  # a dark horse on white, as skimage draws it
