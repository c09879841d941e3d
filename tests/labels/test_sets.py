from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from vhd.config import MediaConfig
from vhd.errors import ConfigError
from vhd.labels.sets import load_labelled_media
from vhd.media.load import media_settings
from vhd.records import Kind, LabelledSample


def item(path: Path, harmful: bool = False) -> LabelledSample:
    return LabelledSample(id="0" * 64, path=path, kind=Kind.IMAGE, harmful=harmful)


def test_loads_each_labelled_sample_in_order(tmp_path: Path) -> None:
    paths = []
    for name, color in (("b.png", "blue"), ("a.png", "red")):
        Image.new("RGB", (40, 30), color).save(tmp_path / name)
        paths.append(tmp_path / name)
    loaded = load_labelled_media([item(p) for p in paths], media_settings(MediaConfig()))
    assert [Path(x.sample.path).name for x in loaded] == ["b.png", "a.png"]
    assert all(x.sample.kind is Kind.IMAGE and len(x.images) == 1 for x in loaded)


def test_a_sample_that_is_no_longer_media_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a picture")
    with pytest.raises(ConfigError, match=r"notes\.txt is no longer a single readable file; fix the labels"):
        load_labelled_media([item(tmp_path / "notes.txt")], media_settings(MediaConfig()))
    with pytest.raises(ConfigError, match=r"input not found: .*gone\.png"):
        load_labelled_media([item(tmp_path / "gone.png")], media_settings(MediaConfig()))


def test_spans_are_stored_with_the_labelled_set(tmp_path: Path) -> None:
    from tests.media.conftest import make_video
    from vhd.labels.sets import import_labels, load_labelled_set

    make_video(tmp_path / "a.mp4", 24)
    make_video(tmp_path / "b.mp4", 30)
    Image.new("RGB", (40, 30), "red").save(tmp_path / "c.png")
    labels = tmp_path / "val.csv"
    labels.write_text('path,harmful,segments\na.mp4,yes,"0.2-0.5; 0.6-0.9"\nb.mp4,no,\nc.png,yes,0-1\n')
    res = import_labels(labels, store=tmp_path / "run.db", name="val")
    assert res.imported == 2
    assert res.skipped == [(4, f"{tmp_path / 'c.png'}: segments on an image: spans are times in a video")]
    items = {Path(i.path).name: i for i in load_labelled_set(tmp_path / "run.db", "val")}
    a = items["a.mp4"].segments
    assert a is not None and [(s.start_s, s.end_s, s.harmful, s.decided_by) for s in a] == [
        (0.2, 0.5, True, "human"),
        (0.6, 0.9, True, "human"),
    ]
    assert items["b.mp4"].segments is None
