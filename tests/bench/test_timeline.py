"""Where in a video: frames sampled over time, human spans as the truth, segment numbers in the report."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.media.conftest import make_video
from vhd.bench.data import BenchItem
from vhd.bench.pipeline import benchmark, build_detectors
from vhd.bench.timeline import segment_truth, timeline_frames
from vhd.records import Kind, Segment

RED, BLUE = (250, 10, 10), (10, 10, 250)


def _video(path: Path, frames: int, red: set[int]) -> Path:
    return make_video(path, frames, fps=10, draw=lambda i: Image.new("RGB", (64, 48), RED if i in red else BLUE))


def test_frames_over_the_whole_video(tmp_path: Path) -> None:
    video = _video(tmp_path / "v.mp4", 45, set())
    tl = timeline_frames(video)
    assert tl.times == pytest.approx([0.0, 1.0, 2.0, 3.0, 4.0])
    assert tl.end_s == pytest.approx(4.5) and len(tl.images) == 5
    # past max_frames every other frame goes and the step doubles: memory bounded in the length
    dense = timeline_frames(video, every_s=0.1, max_frames=10)
    assert len(dense.times) <= 10 and dense.every_s > 0.1
    assert dense.times[0] == 0.0 and dense.times[-1] > 3.0
    with pytest.raises(ValueError, match="every_s"):
        timeline_frames(video, every_s=0)


def test_which_videos_have_spans_to_compare() -> None:
    def item(n: int, kind: Kind, harmful: bool, segments: list[Segment] | None) -> BenchItem:
        return BenchItem(id=str(n), path=f"/m/{n}", kind=kind, harmful=harmful, segments=segments)

    spans = [Segment(1.0, 2.0, True, decided_by="human")]
    items = [
        item(1, Kind.VIDEO, True, spans),
        item(2, Kind.VIDEO, False, None),  # unharmful: no harm anywhere
        item(3, Kind.VIDEO, True, None),  # harmful, but where is unknown: left out
        item(4, Kind.IMAGE, False, None),
    ]
    assert segment_truth(items) == [spans, [], None, None]
    assert segment_truth(items[1:]) == [None, None, None]  # no span anywhere: no segment numbers


@pytest.mark.slow
def test_bench_reports_segment_numbers(tmp_path: Path) -> None:
    media = tmp_path / "media"
    _video(media / "a.mp4", 80, set(range(20, 50)))  # red 2.0-5.0 s
    _video(media / "b.mp4", 60, set(range(10, 20)) | set(range(40, 50)))  # red 1-2 s and 4-5 s
    _video(media / "c.mp4", 50, set())
    _video(media / "d.mp4", 30, set(range(0, 30)))  # harmful, no spans given: not in the segment numbers
    labels = tmp_path / "labels.csv"
    with labels.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["path", "harmful", "segments"])
        w.writerows([["a.mp4", "yes", "2-5"], ["b.mp4", "yes", "1-2; 4-5"], ["c.mp4", "no", ""], ["d.mp4", "yes", ""]])
    out = tmp_path / "report"
    report = benchmark(labels, build_detectors(["red"]), out, media=media, resamples=100, plots=False)
    seg = report.results[0].segments
    assert seg is not None and seg.n_videos == 3 and seg.n_answered == 3
    assert (seg.n_true, seg.n_pred, seg.matched) == (3, 3, 3)
    for name in ("segment_f1", "segment_precision", "segment_recall", "duration_f1"):
        assert seg.values[name].value == pytest.approx(1.0), name
    assert seg.values["boundary_error_s"].value == pytest.approx(0.0, abs=0.05)
    data = json.loads((out / "results.json").read_text())
    assert data["detectors"][0]["segments"]["metrics"]["segment_f1"]["value"] == pytest.approx(1.0)
    md = (out / "segments.md").read_text()
    assert md.startswith("| Detector | Videos | Segment F1 (IoU>=0.5) |") and "| red | 3/3 | 1.000" in md
    assert "Where in the video" in (out / "index.html").read_text()
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert {r["metric"] for r in rows if r["group"] == "video-segments"} >= {"segment_f1", "duration_recall"}
    assert float(next(iter(csv.DictReader((out / "segments.csv").open())))["segment_f1"]) == pytest.approx(1.0)
    # the segments are cached with the predictions: a second run computes nothing and says the same
    again = benchmark(labels, build_detectors(["red"]), out, media=media, resamples=100, plots=False)
    assert again.run.detectors[0].computed == 0
    assert again.results[0].segments is not None and again.results[0].segments.matched == 3


@pytest.mark.slow
def test_no_spans_no_segment_numbers(tmp_path: Path) -> None:
    media = tmp_path / "media"
    _video(media / "a.mp4", 20, set(range(20)))
    labels = tmp_path / "labels.csv"
    labels.write_text("path,harmful\na.mp4,yes\n")
    out = tmp_path / "report"
    report = benchmark(labels, build_detectors(["red"]), out, media=media, resamples=0, plots=False)
    assert report.results[0].segments is None and not (out / "segments.md").exists()


@pytest.mark.slow
def test_cli_prints_the_segment_table_at_the_iou_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vhd.cli.main import main

    media = tmp_path / "media"
    _video(media / "a.mp4", 60, set(range(20, 40)))  # red 2-4 s; the human says 2-5 s: IoU 2/3
    labels = tmp_path / "labels.csv"
    labels.write_text('path,harmful,segments\na.mp4,yes,"2-5"\n')
    base = ["bench", "--labels", str(labels), "--media", str(media), "--detector", "red", "--no-plots"]
    assert main([*base, "--out", str(tmp_path / "a"), "--bootstrap", "0"]) == 0
    printed = capsys.readouterr().out
    assert "Where in the video" in printed and "| red | 1/1 | 1.000 |" in printed
    assert main([*base, "--out", str(tmp_path / "b"), "--bootstrap", "0", "--segment-iou", "0.8"]) == 0
    printed = capsys.readouterr().out
    assert "Segment F1 (IoU>=0.8)" in printed and "| red | 1/1 | 0.000 |" in printed
    assert main([*base, "--out", str(tmp_path / "c"), "--segment-iou", "1.5"]) == 2
    assert "--segment-iou must be above 0 and at most 1" in capsys.readouterr().err


def _debate_config(path: Path, base_url: str, segments: bool | None) -> Path:
    lines = ["[backends.openai]", f'base_url = "{base_url}"', "backoff_base = 0.01", "max_retries = 1"]
    lines += ["[debate]", "rounds = 1"]
    if segments is not None:
        lines += ["[video]", f"segments = {str(segments).lower()}"]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_bench_debate_detector_judges_videos_by_segments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`vhd bench` with the debate detector and `[video] segments = true`: a segment row beside Table 1.

    The endpoint says harmful exactly when the planted red disk is in a frame it is sent, and
    the human spans are the planted events, so every event is found where it is.
    """
    from tests.annotate.test_segments import red_judge
    from tests.servers.chat_server import ChatServer
    from vhd.cli.main import main
    from vhd.demo import PlantedVideo, write_event_video

    media = tmp_path / "media"
    media.mkdir()
    write_event_video(media / "a.mp4", PlantedVideo(12.0, events=((3.0, 5.0), (9.0, 10.5)), cuts=(3.0, 5.0, 9.0, 10.5)))
    write_event_video(media / "b.mp4", PlantedVideo(8.0, events=((2.0, 4.0),), cuts=(2.0, 4.0)))
    write_event_video(media / "c.mp4", PlantedVideo(6.0, cuts=(3.0,)))
    labels = tmp_path / "labels.csv"
    labels.write_text('path,harmful,segments\na.mp4,yes,"3-5; 9-10.5"\nb.mp4,yes,"2-4"\nc.mp4,no,\n')
    base = ["bench", "--labels", str(labels), "--media", str(media), "--detector", "debate:openai:m"]
    base += ["--no-plots", "--no-progress", "--bootstrap", "0"]
    with ChatServer(reply=red_judge) as srv:
        cfg = _debate_config(tmp_path / "on.toml", srv.base_url, True)
        assert main([*base, "--set", f"debate.config={cfg}", "--out", str(tmp_path / "on")]) == 0
        printed = capsys.readouterr().out
        calls = srv.chat_requests
        plain = _debate_config(tmp_path / "off.toml", srv.base_url, False)
        assert main([*base, "--set", f"debate.config={plain}", "--out", str(tmp_path / "off")]) == 0
        five_frames = srv.chat_requests - calls
    assert "Where in the video" in printed and "| debate | 3/3 | 1.000 |" in printed
    data = json.loads((tmp_path / "on" / "results.json").read_text())
    seg = data["detectors"][0]["segments"]
    assert seg["metrics"]["segment_f1"]["value"] == pytest.approx(1.0)
    assert seg["metrics"]["duration_f1"]["value"] == pytest.approx(1.0)
    # segments: a: 0-3 3-5 5-9 9-10.5 10.5-12; b: 0-2 2-4 4-8; c: 0-3 3-6 -> 10 screens, 3 debates of 3 calls
    assert calls == 10 + 3 * 3
    # segments off: the VHD11K protocol, one debate of 3 calls over five frames a video, no segment row
    assert five_frames == 3 * 3
    off = json.loads((tmp_path / "off" / "results.json").read_text())
    assert off["detectors"][0]["segments"] is None and not (tmp_path / "off" / "segments.md").exists()
    assert off["detectors"][0]["run"]["identity"]["debate"] == data["detectors"][0]["run"]["identity"]["debate"]
    assert "video" in data["detectors"][0]["run"]["identity"] and "video" not in off["detectors"][0]["run"]["identity"]


def test_a_segmenting_debate_reads_the_video_file_once_and_names_a_bad_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`predict_item` hands a segmenting debate the path: no five frames read, a cut file is a media error."""
    import asyncio

    import vhd.bench.work as work
    from vhd.demo import PlantedVideo, write_event_video
    from vhd.detectors.registry import create_detector

    config = tmp_path / "debate.toml"
    config.write_text("[debate]\nrounds = 1\n[video]\nsegments = true\n")
    rules = [{"when": {"tag": "judge"}, "reply": "No, plain colours."}, {"reply": "1. Plain colours."}]
    det = create_detector(
        "debate:scripted:inline", {"config": str(config), "backends": {"scripted": {"script": {"rules": rules}}}}
    )
    good = write_event_video(tmp_path / "good.mp4", PlantedVideo(4.0, cuts=(2.0,)))
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(good.read_bytes()[:1500])
    loads: list[bool] = []
    real_load = work.load_media

    def counting(item: BenchItem, original: bool, settings: Any) -> list[Any]:
        loads.append(original)
        return real_load(item, original, settings)

    monkeypatch.setattr(work, "load_media", counting)

    def predict(path: Path) -> work.Outcome:
        item = BenchItem(id=path.name, path=str(path), kind=Kind.VIDEO, harmful=False)
        [found] = asyncio.run(work.predict_item([det], None, item, [0], asyncio.Semaphore(1)))
        return found

    _, pred, _, _ = predict(good)
    assert pred.harmful is False and pred.segments is not None and len(pred.segments) == 2
    assert loads == []  # the segment pass is the only read of the file
    _, bad, _, _ = predict(cut)
    assert bad.harmful is None and bad.error is not None and bad.error.startswith("media: cannot open video")
