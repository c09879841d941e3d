"""`vhd export`: the VHD11K CSV split by kind, said; --kind writes exactly the name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import vhd
from tests.annotate.test_api import make_images
from vhd.cli.main import main


def test_export_csv_split_is_said_and_kind_writes_exactly_the_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.media.conftest import make_video

    make_images(tmp_path / "m", 2)
    make_video(tmp_path / "m" / "clip.mp4", 12)
    store = tmp_path / "s.db"
    vhd.annotate([tmp_path / "m"], model="scripted:demo", store=store, progress=False)
    assert main(["export", str(store), "-o", str(tmp_path / "x.csv")]) == 0
    out = capsys.readouterr().out
    assert "x_images.csv" in out and "x_videos.csv" in out and "separate files" in out
    assert main(["export", str(store), "--kind", "video", "-o", str(tmp_path / "v.csv"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["files"] == [str(tmp_path / "v.csv")] and got["split_by_kind"] is False and got["written"] == 1
