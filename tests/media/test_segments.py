"""Segments of a video (`vhd.media.segments`): cuts from pixels, times from decoded frames, bad input."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.media.conftest import make_video
from vhd.demo import PlantedVideo, red_visible, write_event_video
from vhd.errors import ConfigError, MediaError
from vhd.media.segments import (
    SegmentationError,
    SegmentSettings,
    iter_segments,
    segments_from_frames,
)
from vhd.media.videoframes import duration_s

av = pytest.importorskip("av")


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, PlantedVideo]:
    video = PlantedVideo(12.0, events=((3.0, 5.0), (9.0, 10.5)), cuts=(3.0, 5.0, 7.0, 9.0, 10.5), fps=10)
    return write_event_video(tmp_path_factory.mktemp("seg") / "planted.mp4", video), video


def test_cuts_found_where_the_shots_change(planted: tuple[Path, PlantedVideo]) -> None:
    path, video = planted
    segments = list(iter_segments(path, SegmentSettings(min_s=1.0, max_s=20.0, frames=3)))
    assert [(s.start_s, s.end_s) for s in segments] == [
        (0.0, 3.0),
        (3.0, 5.0),
        (5.0, 7.0),
        (7.0, 9.0),
        (9.0, 10.5),
        (10.5, 12.0),
    ]
    assert [s.cut for s in segments] == ["start", "cut", "cut", "cut", "cut", "cut"]
    for s in segments:
        assert len(s.images) == 3
        assert all(s.start_s <= t < s.end_s for t in s.times)
        assert [red_visible(i) for i in s.images] == [video.event_at(t) for t in s.times]
    assert sum(s.frame_count for s in segments) == video.frame_count


def test_min_and_max_bound_the_segments(planted: tuple[Path, PlantedVideo]) -> None:
    path, _ = planted
    spans = [(s.start_s, s.end_s) for s in iter_segments(path, SegmentSettings(min_s=2.5, max_s=4.0))]
    assert all(end - start <= 4.0 + 1e-6 for start, end in spans)
    assert all(end - start >= 2.5 - 1e-6 for start, end in spans[:-1])
    assert spans[0][0] == 0.0 and spans[-1][1] == 12.0
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))


def test_fixed_windows(planted: tuple[Path, PlantedVideo]) -> None:
    path, _ = planted
    spans = [(s.start_s, s.end_s, s.cut) for s in iter_segments(path, SegmentSettings(detect="windows", window_s=5))]
    assert spans == [(0.0, 5.0, "start"), (5.0, 10.0, "window"), (10.0, 12.0, "window")]


def test_variable_frame_rate_times_come_from_the_frames(tmp_path: Path) -> None:
    # 30 frames at irregular times (time base 1/100 s): 0.0, 0.1, ... then a jump of 2 s
    pts = [k * 10 for k in range(15)] + [350 + k * 30 for k in range(15)]
    path = make_video(tmp_path / "vfr.mp4", 30, fps=10, pts=pts)
    segments = list(iter_segments(path, SegmentSettings(detect="windows", window_s=2.0)))
    starts = [s.start_s for s in segments]
    assert starts[0] == 0.0
    assert segments[-1].end_s == pytest.approx(3.5 + 14 * 0.3 + 0.3, abs=0.11)
    assert 3.5 in starts  # the first frame after the gap starts a window at its own time


def test_a_lying_duration_header_is_not_used(tmp_path: Path) -> None:
    path = make_video(tmp_path / "liar.mkv", 40, fps=10)  # 4 s; Matroska keeps its duration in a tag
    data = path.read_bytes()
    assert data.count(b"00:00:04.000000000") == 1
    path.write_bytes(data.replace(b"00:00:04.000000000", b"00:09:04.000000000"))
    with av.open(str(path)) as container:
        assert duration_s(container, container.streams.video[0]) == pytest.approx(544.0)  # the header lies
    segments = list(iter_segments(path, SegmentSettings(detect="windows", window_s=3.0)))
    assert [(s.start_s, s.end_s) for s in segments] == [(0.0, 3.0), (3.0, pytest.approx(4.0))]


def test_a_stream_without_keyframe_flags_is_segmented(tmp_path: Path) -> None:
    source = write_event_video(tmp_path / "src.mp4", PlantedVideo(6.0, cuts=(3.0,), fps=10))
    path = tmp_path / "nokeys.mkv"
    with av.open(str(source)) as src, av.open(str(path), "w") as dst:
        stream_in = src.streams.video[0]
        stream_out = dst.add_stream_from_template(stream_in)
        for packet in src.demux(stream_in):
            if packet.dts is None:
                continue
            packet.is_keyframe = False  # the container marks no frame as a keyframe
            packet.stream = stream_out
            dst.mux(packet)
    with av.open(str(path)) as container:
        flags = [p.is_keyframe for p in container.demux(container.streams.video[0]) if p.size]
    assert not any(flags[1:])  # Matroska's demuxer still calls the first block a keyframe
    assert [(s.start_s, s.end_s) for s in iter_segments(path)] == [(0.0, 3.0), (3.0, pytest.approx(6.0))]


def test_a_zero_length_stream_cannot_be_segmented(tmp_path: Path) -> None:
    path = make_video(tmp_path / "empty.mp4", 0, fps=10)
    with pytest.raises(MediaError):
        list(iter_segments(path))


class _Frame:
    """A decoded frame as `segments_from_frames` reads it."""

    def __init__(self, pts: int | None, colour: tuple[int, int, int] = (0, 0, 200)) -> None:
        self.pts = pts
        self.time_base = Fraction(1, 10)
        self.duration = 1
        self.rotation = 0
        self.image = Image.new("RGB", (32, 24), colour)

    def reformat(self, **_: Any) -> Any:
        return av.VideoFrame.from_image(self.image).reformat(format="rgb24")

    def to_image(self) -> Image.Image:
        return self.image


def test_timestamps_going_backwards_are_a_segmentation_error() -> None:
    frames = [_Frame(p) for p in (0, 1, 2, 1, 3)]
    with pytest.raises(SegmentationError, match="backwards at frame 3"):
        list(segments_from_frames(frames, SegmentSettings()))


def test_missing_timestamps_and_no_frames_are_segmentation_errors() -> None:
    with pytest.raises(SegmentationError, match="no timestamp"):
        list(segments_from_frames([_Frame(0), _Frame(None)], SegmentSettings()))
    with pytest.raises(SegmentationError, match="zero-length"):
        list(segments_from_frames([], SegmentSettings()))


def test_frames_kept_stay_few_however_long_the_segment() -> None:
    frames = [_Frame(k) for k in range(1000)]  # 100 s of one shot, no cut, no max reached
    (segment,) = segments_from_frames(frames, SegmentSettings(max_s=1000.0, frames=4))
    assert len(segment.images) == 4
    assert segment.times[0] == 0.0 and segment.times[-1] > 60.0
    assert segment.end_s == pytest.approx(100.0)


def test_bad_settings_are_one_line_errors() -> None:
    with pytest.raises(ConfigError, match="min < max"):
        SegmentSettings(min_s=5, max_s=2)
    with pytest.raises(ConfigError, match="choose one of shots, windows"):
        SegmentSettings(detect="scenes")
