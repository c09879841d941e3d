"""A detector whose extra is missing: one line naming the extra, and no report folder left behind."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PIL import Image

from vhd.cli.main import main


def test_bench_out_is_not_created_when_a_detector_cannot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    Image.new("RGB", (16, 16), (200, 10, 10)).save(tmp_path / "a.png")
    labels = tmp_path / "labels.csv"
    labels.write_text("path,harmful\na.png,yes\n")
    monkeypatch.setitem(sys.modules, "nudenet", None)  # as on an install without vhd[nudenet]
    out = tmp_path / "rep"
    code = main(["bench", "--labels", str(labels), "--detector", "nudenet", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "vhd[nudenet]" in err
    assert not out.exists()
