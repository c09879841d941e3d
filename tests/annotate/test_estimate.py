"""The dry run's bounds (`vhd.annotate.estimate`): what the run does always lies within them.

The property test draws small videos (a cut wherever the pattern says, any frame rate and length)
and settings (cuts, windows, ``min_segment_s = 0``, the call cap, the segment bound, rounds), runs
`vhd.debate.segmented.judge_video` on them with calls that flag the segments a second pattern
says, and checks the calls it made against `video_calls` from the same file's header.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vhd
from tests.hostile_corpus import deep_png, far_timestamps_video, strobe_video
from vhd.annotate.options import RunOptions
from vhd.config import VideoConfig
from vhd.debate.engine import DebateResult
from vhd.debate.segmented import judge_video, segment_settings
from vhd.media.load import MediaSettings
from vhd.records import Usage, Verdict

av = pytest.importorskip("av")


def _video(path: Path, fps: int, cuts: Sequence[bool]) -> Path:
    """A 16x16 Motion JPEG video in Matroska, its colour changing at every frame ``cuts`` marks."""
    import fractions

    import numpy as np

    base = fractions.Fraction(1, 1000)
    colour = 0
    with av.open(str(path), "w", format="matroska") as out:
        stream = out.add_stream("mjpeg", rate=fps)
        stream.width = stream.height = 16
        stream.pix_fmt = "yuvj420p"
        stream.time_base = base
        for i, cut in enumerate(cuts):
            colour = (colour + 1) % 2 if cut else colour
            pixels = np.zeros((16, 16, 3), np.uint8)
            pixels[:] = (230, 30, 30) if colour else (30, 30, 230)
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts, frame.time_base = round(i * 1000 / fps), base
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


class _Calls:
    """`SegmentCalls` that answer at once: a screen flags the segments ``flag`` says; a debate costs its calls."""

    def __init__(self, rounds: int, flag: int) -> None:
        self.debate_calls = 2 * rounds + 1
        self.flag = flag
        self.made = 0

    @property
    def calls_per_debate(self) -> int:
        return self.debate_calls

    @property
    def calls_per_screen(self) -> int:
        return 1

    async def screen(self, images: Any, clip: Any, span: tuple[float, float]) -> DebateResult:
        self.made += 1
        flagged = (round(span[0] * 1000) // 7 + self.flag) % 3 == 0
        return DebateResult(Verdict(flagged, "screened"), usage=Usage(calls=1))

    async def debate(self, images: Any, clip: Any, span: tuple[float, float] | None) -> DebateResult:
        self.made += self.debate_calls
        return DebateResult(Verdict(True, "debated"), usage=Usage(calls=self.debate_calls))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fps=st.sampled_from([2, 5, 10, 25]),
    cuts=st.lists(st.booleans(), min_size=1, max_size=120),
    detect=st.sampled_from(["shots", "windows"]),
    min_s=st.sampled_from([0.0, 0.1, 0.5, 1.0, 2.0]),
    max_s=st.sampled_from([0.2, 1.0, 3.0, 20.0]),
    window_s=st.sampled_from([0.3, 1.0, 4.0]),
    cap=st.one_of(st.none(), st.integers(1, 40)),
    bound=st.one_of(st.none(), st.integers(1, 12)),
    rounds=st.integers(0, 2),
    flag=st.integers(0, 2),
    parallel=st.sampled_from([1, 3]),
)
def test_the_run_calls_lie_within_the_dry_run_range(
    fps: int,
    cuts: list[bool],
    detect: str,
    min_s: float,
    max_s: float,
    window_s: float,
    cap: int | None,
    bound: int | None,
    rounds: int,
    flag: int,
    parallel: int,
) -> None:
    from vhd.annotate.estimate import header_facts, video_calls

    min_s = min(min_s, max_s / 2)
    video = VideoConfig(
        segments=True, detect=detect, min_segment_s=min_s, max_segment_s=max_s, window_s=window_s,
        min_harmful_segments=1, max_calls_per_video=cap, max_segments_per_video=bound, frames_per_segment=2,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        path = _video(Path(folder) / "v.mkv", fps, cuts)
        facts = header_facts(str(path), None)
        assert facts is not None
        calls = _Calls(rounds, flag)
        judged = asyncio.run(judge_video(path, video, MediaSettings(max_side=16), calls=calls, parallel=parallel))
    fewest, most = video_calls(segment_settings(video), *facts, cap=cap, screen=(1, 1), debate=calls.calls_per_debate)
    assert judged.usage.calls == calls.made
    assert fewest <= calls.made and (most is None or calls.made <= most), (facts, judged.verdict.reason)
    if cap is not None:
        assert calls.made <= cap


def _dry(inputs: list[Path], cfg: Path, store: Path) -> dict[str, Any]:
    s = vhd.annotate(inputs, config=cfg, store=store, model="scripted:demo", progress=False,
                     options=RunOptions(dry_run=True))  # fmt: skip
    assert s.estimate is not None
    return s.estimate


def test_a_strobe_video_is_bounded_by_its_dry_run(tmp_path: Path) -> None:
    """A cut every frame with ``min_segment_s = 0``: the dry run said 3-60 a minute; the run made 1,500 segments."""
    video = strobe_video(tmp_path / "strobe.mp4", seconds=6.0, fps=10)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[debate]\nrounds = 1\n[video]\nsegments = true\nmin_segment_s = 0.0\n")
    e = _dry([video], cfg, tmp_path / "d.db")
    run = vhd.annotate([video], config=cfg, store=tmp_path / "r.db", model="scripted:demo", progress=False)
    assert run.segments <= 8  # one a second on average (was 60: one a frame)
    assert e["calls_min"] <= run.usage.calls <= e["calls"]
    assert e["calls"] == e["segments"]["calls"][1]  # the headline's total includes the segments


def test_the_headline_gives_one_total_for_the_run_with_segments(tmp_path: Path, capsys: Any) -> None:
    from tests.media.conftest import make_video
    from vhd.cli.main import main

    make_video(tmp_path / "media" / "a.mp4", 20, fps=10)
    (tmp_path / "media" / "b.png").write_bytes(_png())
    cfg = tmp_path / "c.toml"
    prices = '[prices."scripted:demo"]\ninput = 1.0\noutput = 2.0\n'
    cfg.write_text("[debate]\nrounds = 1\n[video]\nsegments = true\n" + prices)
    argv = ["annotate", str(tmp_path / "media"), "--model", "scripted:demo", "--store", str(tmp_path / "d.db")]
    assert main([*argv, "--config", str(cfg), "--dry-run", "--no-progress"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    e = _dry([tmp_path / "media"], cfg, tmp_path / "d.db")
    segment_calls = e["segments"]["calls"]
    assert e["calls"] == 3 + segment_calls[1]  # one image debate (3 calls) and the video's segments at most
    assert f"{e['calls_min']}-{e['calls']} calls (--segments included)" in first and "at most $" in first


def _png() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (10, 200, 10)).save(buf, "PNG")
    return buf.getvalue()


def test_absurd_timestamps_give_a_bounded_estimate_never_negative_minutes(tmp_path: Path) -> None:
    video = far_timestamps_video(tmp_path / "far.mkv")
    with av.open(str(video)) as container:  # the header's duration overflows to about -2.1e9 s
        from vhd.media.videoframes import duration_s

        assert duration_s(container, container.streams.video[0]) < 0
    cfg = tmp_path / "c.toml"
    cfg.write_text("[debate]\nrounds = 1\n[video]\nsegments = true\nmax_calls_per_video = 30\n")
    e = _dry([video], cfg, tmp_path / "d.db")
    seg = e["segments"]
    assert seg["video_minutes"] >= 0 and seg["videos_without_duration"] == 1  # it was -35,791,394 minutes
    assert e["calls"] == 30 and e["calls_min"] >= 1  # the call cap bounds a video of unknown length


def test_the_dry_run_opens_a_video_through_the_runs_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 16-bit PNG named clip.mp4: the run refuses it before FFmpeg sees it; so does the dry run (it decoded it)."""
    media = tmp_path / "media"
    media.mkdir()
    (media / "clip.mp4").write_bytes(deep_png(3000, 3000))
    opened: list[str] = []
    real = av.open
    monkeypatch.setattr(av, "open", lambda file, *a, **k: opened.append(str(file)) or real(file, *a, **k))
    cfg = tmp_path / "c.toml"
    cfg.write_text("[video]\nsegments = true\n")
    e = _dry([media], cfg, tmp_path / "d.db")
    assert opened == []  # refused by its first bytes, as the run does
    assert e["to_annotate"] == 0 and e["unreadable"] == 1 and e["calls"] == 0
