"""`vhd annotate --segments`, `--max-calls-per-video` and the segmented dry run, from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.annotate.test_segments import CUTS, EVENTS, config, red_judge
from tests.servers.chat_server import ChatServer
from vhd.cli.main import main
from vhd.demo import PlantedVideo, write_event_video

pytest.importorskip("av")


@pytest.fixture
def video(tmp_path: Path) -> Path:
    return write_event_video(tmp_path / "events.mp4", PlantedVideo(12.0, events=EVENTS, cuts=CUTS, fps=10))


def test_segments_flags(video: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ChatServer(reply=red_judge) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url, segments=False)  # the flag turns them on
        argv = ["annotate", str(video), "--model", "openai:m", "--store", str(tmp_path / "vhd.db")]
        code = main([*argv, "--config", str(cfg), "--no-progress", "--segments", "--max-calls-per-video", "9"])
        calls = srv.chat_requests
    out = capsys.readouterr().out
    assert code == 0
    assert "1 harmful" in out
    assert "6 video segment(s) judged; 1 flagged segment(s) left at their screen verdict by the call cap" in out
    assert calls == 9
    assert main(["show", str(tmp_path / "vhd.db"), str(video)]) == 0
    shown = capsys.readouterr().out
    assert "decided by: segments (video protocol)" in shown
    assert "time line (6 segments):" in shown
    assert "0:03-0:05  harmful   a red disk  (debate, P 0.99)" in shown
    assert "0:09-0:10.5  harmful   a red disk  (screen (call cap), P 0.99)" in shown
    assert "0:00-0:03  ok        plain colours  (screen, P 0.01)" in shown


def test_segmented_dry_run_gives_one_total_for_the_run(
    video: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = config(tmp_path / "c.toml", "http://127.0.0.1:9/v1", window_s=6.0, detect="windows")
    argv = ["annotate", str(video), "--model", "openai:m", "--store", str(tmp_path / "vhd.db"), "--config", str(cfg)]
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    # 12 s of video; windows of 6 s: 2 or 3 segments (the header's length, give or take a second);
    # 1 round: 3 calls a debate; the headline's total is the segments'
    assert "1 to annotate with 2-12 calls (--segments included), at most" in out
    assert (
        "--segments: 1 video, 0.2 video-minute(s) (0 without a duration in their header); 2-3 segments, "
        "2-3 screen calls, 2-12 calls if every segment is flagged; at most 500 segments a video (no call cap)"
    ) in out
