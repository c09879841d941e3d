from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from PIL import Image

from tests.media.conftest import center_index, make_audio_only, make_video
from vhd.cli.main import main
from vhd.curate.frames import JOURNAL, extract_frames
from vhd.errors import ConfigError
from vhd.media.discover import discover


@pytest.fixture
def videos(tmp_path: Path) -> Path:
    root = tmp_path / "videos"
    make_video(root / "one.mp4", 48)
    make_video(root / "sub" / "two.webm", 20, codec="libvpx-vp9")
    make_video(root / "sub" / "tiny.mp4", 3)
    (root / "sub" / "cut.mp4").write_bytes((root / "one.mp4").read_bytes()[:2000])
    make_audio_only(root / "sound.mp4")
    Image.new("RGB", (8, 8)).save(root / "still.png")
    return root


def drawn(paths: list[str]) -> list[int]:
    return [center_index(Image.open(p)) for p in paths]


def test_folders_layout_names_and_indices(tmp_path: Path, videos: Path) -> None:
    result = extract_frames(videos, tmp_path / "out")
    by = {Path(v.path).name: v for v in result.videos}
    one = by["one.mp4"]
    assert one.status == "written" and one.indices == [0, 12, 24, 35, 47]
    assert [Path(f).relative_to(tmp_path / "out").as_posix() for f in one.files] == [
        f"one/one_{k:04d}.png" for k in range(5)
    ]
    assert drawn(one.files) == one.indices
    two = by["two.webm"]
    assert next(Path(f).relative_to(tmp_path / "out").as_posix() for f in two.files) == "sub/two/two_0000.png"
    assert drawn(two.files) == [0, 5, 10, 14, 19]
    assert by["tiny.mp4"].indices == [0, 1, 2] and len(by["tiny.mp4"].files) == 3
    assert by["cut.mp4"].status == "failed" and by["cut.mp4"].reason
    assert "no video stream" in by["sound.mp4"].reason
    assert result.skipped == [] and result.images == 1
    # Each folder reads back as one video sample.
    found = discover([tmp_path / "out"], frame_folders=True)
    assert sorted(i.path.name for i in found.items) == ["one", "tiny", "two"]
    assert not [p for p in (tmp_path / "out").rglob("*") if p.name.startswith(".") and p.name != JOURNAL]


def test_flat_layout_and_window(tmp_path: Path, videos: Path) -> None:
    result = extract_frames(videos / "one.mp4", tmp_path / "flat", n=3, first=10, layout="flat")
    (video,) = result.videos
    assert [Path(f).name for f in video.files] == ["one_0000.png", "one_0001.png", "one_0002.png"]
    assert video.indices == [0, 4, 9] and drawn(video.files) == [0, 4, 9]


def test_rerun_skips_done_videos_and_redoes_changed_ones(tmp_path: Path, videos: Path) -> None:
    out = tmp_path / "out"
    extract_frames(videos, out)
    again = extract_frames(videos, out)
    assert {v.status for v in again.videos if Path(v.path).name != "cut.mp4" and "sound" not in v.path} == {"done"}
    make_video(videos / "one.mp4", 100)  # replaced: new size and time
    third = extract_frames(videos, out)
    one = next(v for v in third.videos if v.path.endswith("one.mp4"))
    assert one.status == "written" and one.indices == [0, 25, 50, 74, 99] and drawn(one.files) == one.indices
    # Other settings redo everything.
    assert {v.status for v in extract_frames(videos, out, n=2).videos if v.indices} == {"written"}


def test_interrupted_run_leaves_no_partial_set_and_resumes(tmp_path: Path, videos: Path) -> None:
    calls = []

    def stop(done: int, total: int) -> None:
        calls.append(done)
        if done == 2:
            raise KeyboardInterrupt

    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        extract_frames(videos, out, progress=stop)
    for folder in out.rglob("*"):
        if folder.is_dir() and not folder.name.startswith("."):
            pngs = list(folder.glob("*.png"))
            assert len(pngs) in (0, 3, 5), folder  # a video's frames appear all at once
    resumed = extract_frames(videos, out)
    clean = extract_frames(videos, tmp_path / "clean")
    rel = lambda r, base: sorted(Path(f).relative_to(base).as_posix() for v in r.videos for f in v.files)  # noqa: E731
    assert rel(resumed, out) == rel(clean, tmp_path / "clean")


def test_a_killed_runs_temporary_folder_is_cleared_by_the_rerun(tmp_path: Path, videos: Path) -> None:
    out = tmp_path / "out"
    left = out / ".one.vhd-tmp"  # what SIGKILL during write_frames leaves behind
    left.mkdir(parents=True)
    (left / "one_0001.png").write_bytes(b"half a png")
    (out / "sub").mkdir()
    (out / "sub" / ".two.vhd-tmp").write_bytes(b"a file where the folder goes")
    other = out / ".one.x.vhd-tmp"  # not the temporary of any video here: left alone
    other.mkdir()
    result = extract_frames(videos, out)
    assert result.count("written") == 3
    hidden = sorted(p.relative_to(out).as_posix() for p in out.rglob(".*") if p.name != JOURNAL)
    assert hidden == [other.name]
    assert sorted(p.name for p in (out / "one").iterdir()) == [f"one_{k:04d}.png" for k in range(5)]


def test_a_video_named_like_a_temporary_folder_is_refused(tmp_path: Path) -> None:
    make_video(tmp_path / "in" / "a.mp4", 12)
    make_video(tmp_path / "in" / ".a.vhd-tmp.mp4", 12)
    # a folder walk passes hidden files over; named one by one, both are read
    result = extract_frames([tmp_path / "in" / "a.mp4", tmp_path / "in" / ".a.vhd-tmp.mp4"], tmp_path / "out", n=2)
    assert result.statuses == {"written": 1, "failed": 1}
    [failed] = [v for v in result.videos if v.status == "failed"]
    assert "temporary folder vhd frames uses for 'a'" in (failed.reason or "")
    assert sorted(p.name for p in (tmp_path / "out" / "a").iterdir()) == ["a_0000.png", "a_0001.png"]


def test_same_stem_in_one_folder_is_reported(tmp_path: Path) -> None:
    make_video(tmp_path / "v" / "clip.mp4", 10)
    make_video(tmp_path / "v" / "clip.webm", 10, codec="libvpx-vp9")
    result = extract_frames(tmp_path / "v", tmp_path / "out")
    statuses = sorted(v.status for v in result.videos)
    assert statuses == ["failed", "written"]
    failed = next(v for v in result.videos if v.status == "failed")
    assert "same stem" in failed.reason


def test_bad_settings(tmp_path: Path, videos: Path) -> None:
    with pytest.raises(ConfigError):
        extract_frames(videos, tmp_path / "o", n=0)
    with pytest.raises(ConfigError, match="layout"):
        extract_frames(videos, tmp_path / "o", layout="zip")


def test_cli_report_and_exit_code(tmp_path: Path, videos: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "frames.csv"
    code = main(["frames", str(videos), "--out", str(tmp_path / "out"), "--report", str(report), "--no-progress"])
    assert code == 1  # cut.mp4 and sound.mp4 failed
    out = capsys.readouterr().out
    assert "3 video(s) written" in out and "failed" in out
    rows = list(csv.DictReader(report.open()))
    assert {r["status"] for r in rows} == {"written", "failed"}
    ok = tmp_path / "ok"
    assert (
        main(["frames", str(videos / "one.mp4"), "--out", str(ok), "--json", "--decode-all", "--layout", "flat"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data[0]["indices"] == "0 12 24 35 47"
    assert sorted(os.listdir(ok)) == sorted([JOURNAL] + [f"one_{k:04d}.png" for k in range(5)])


def test_result_keeps_counts_and_a_bounded_list(
    tmp_path: Path, videos: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The result holds the first outcomes only; every one still reaches on_outcome, the counts and the report."""
    import vhd.curate.frames as frames

    monkeypatch.setattr(frames, "KEEP_EXAMPLES", 2)
    seen: list[str] = []
    result = extract_frames(videos, tmp_path / "out", on_outcome=lambda v: seen.append(v.status))
    assert len(result.videos) == 2 and result.total == len(seen) == 5
    assert result.count("written") == seen.count("written") == 3 and result.count("failed") == 2
    report = tmp_path / "all.json"
    main(["frames", str(videos), "--out", str(tmp_path / "out"), "--report", str(report), "--no-progress"])
    assert "3 already done, 2 failed" in capsys.readouterr().out
    rows = json.loads(report.read_text())
    assert len(rows) == 5 and sorted(r["status"] for r in rows) == ["done", "done", "done", "failed", "failed"]


def test_streamed_json_is_what_json_dumps_writes() -> None:
    import io

    from vhd.cli.frames import _write_json

    row = {"video": "a \u00e9\n.mp4", "status": "failed", "indices": "", "total_frames": 0, "files": "", "reason": "x"}
    for rows in ([], [row], [row, {**row, "status": "written", "indices": "0 1"}]):
        out = io.StringIO()
        _write_json(out, rows)
        assert out.getvalue() == json.dumps(rows, indent=2)


def test_progress_total_walks_the_inputs_once_more_only_when_asked(
    tmp_path: Path, videos: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vhd.curate.frames as frames_mod

    walks: list[int] = []
    real = frames_mod._found
    monkeypatch.setattr(frames_mod, "_found", lambda inputs: (walks.append(1), real(inputs))[1])
    calls: list[tuple[int, int | None]] = []
    extract_frames(videos, tmp_path / "a", progress=lambda done, total, **_: calls.append((done, total)))
    assert len(walks) == 2  # one to count for the bar, one to do the work
    assert calls and all(total == 5 for _, total in calls) and calls[-1][0] == 5  # every video file, audio-only too
    walks.clear()
    extract_frames(videos, tmp_path / "b")
    assert len(walks) == 1
    with pytest.raises(ConfigError, match="nope"):  # a missing input fails before any work, bar or not
        extract_frames([videos, tmp_path / "nope"], tmp_path / "c")
    assert not (tmp_path / "c" / JOURNAL).exists()
