"""A plain install (no PyAV) and a folder with videos: the videos are skipped naming the extra, the run finishes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.annotate.test_api import make_images
from vhd.cli.main import main


def test_videos_without_pyav_are_skipped_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("av")
    from tests.hostile_corpus import video_bytes

    make_images(tmp_path / "m", 2)
    (tmp_path / "m" / "clip.mp4").write_bytes(video_bytes("libx264", "mp4"))
    monkeypatch.setitem(sys.modules, "av", None)  # as on an install without vhd[video]
    args = ["annotate", str(tmp_path / "m"), "--model", "scripted:demo", "--store", str(tmp_path / "s.db")]
    assert main([*args, "--json", "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["annotated"] == 2 and summary["skipped"] == 1 and summary["remaining"] == 0
    assert main(["runs", str(tmp_path / "s.db"), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert runs[0]["finished_at"] is not None and runs[0]["annotated"] == 2  # not left "running or stopped"
    assert main(["annotate", str(tmp_path / "m"), "--model", "scripted:demo", "--store", str(tmp_path / "s.db")]) == 0
    out = capsys.readouterr().out
    assert "vhd[video]" in out and "clip.mp4" in out
