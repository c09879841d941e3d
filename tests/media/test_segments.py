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


def test_a_strobe_is_cut_into_one_segment_a_second_on_average(tmp_path: Path) -> None:
    """A cut at every frame with ``min_s = 0``: 40 segments in 4 s before; now about one a second."""
    from tests.hostile_corpus import strobe_video

    video = strobe_video(tmp_path / "strobe.mp4", seconds=4.0, fps=10)
    spans = [(s.start_s, s.end_s) for s in iter_segments(video, SegmentSettings(min_s=0.0))]
    assert 3 <= len(spans) <= 5 and spans[-1][1] == pytest.approx(4.0)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    fast = [s.start_s for s in segments_from_frames([_Frame(k, (255 * (k % 2), 0, 0)) for k in range(30)],
                                                    SegmentSettings(min_s=0.0, max_s=0.5))]  # fmt: skip
    assert len(fast) <= 1 + 3 / 0.5  # the average floor is max_s when it is under a second


def test_a_long_still_video_is_covered_to_its_end_within_the_bound(tmp_path: Path) -> None:
    """Past half the bound the lengths double: 600 s of one shot in at most 20 segments, to its last frame."""
    from tests.hostile_corpus import still_video
    from vhd.media.segments import segment_bound

    video = still_video(tmp_path / "still.mkv", seconds=600.0, fps=0.5)
    plain = list(iter_segments(video, SegmentSettings(max_s=20.0, max_segments=None)))
    bounded = list(iter_segments(video, SegmentSettings(max_s=20.0, max_segments=20)))
    assert len(plain) == 30  # 600 s of 20-s pieces
    assert len(bounded) <= 20 and bounded[-1].end_s == plain[-1].end_s  # coarser, to the very end
    lengths = [round(s.end_s - s.start_s) for s in bounded]
    assert lengths[:10] == [20] * 10 and lengths[10:15] == [40] * 5 and lengths == sorted(lengths[:-1]) + lengths[-1:]
    assert all(s.stopped is None for s in bounded)
    assert len(bounded) <= segment_bound(SegmentSettings(max_s=20.0, max_segments=20), 600.0) <= 20
    # a cut every frame, as long: thinned out to one per 60 s of header (capped at max_s), to the end
    frames = [_Frame(k * 5, (255 * (k % 2), 0, 0)) for k in range(1200)]  # 600 s at 2 frames a second
    dense = list(segments_from_frames(frames, SegmentSettings(min_s=0.0, max_segments=20), declared_s=600.0))
    assert len(dense) <= 20 and dense[-1].end_s == pytest.approx(599.6) and dense[-1].stopped is None


def test_frames_past_the_header_stop_the_segments_and_say_why() -> None:
    """A header that says 3 s over 100 s of frames: the segments stop at what 3 s allows (the rest not judged)."""
    frames = [_Frame(k) for k in range(1000)]  # 100 s, no cut
    segments = list(segments_from_frames(frames, SegmentSettings(detect="windows", window_s=1.0), declared_s=3.0))
    assert len(segments) == 5 and segments[-1].end_s == pytest.approx(5.0)
    assert segments[-1].stopped == "its frames go on past the 3 s its header declares (5 segments at most)"
    assert all(s.stopped is None for s in segments[:-1])


def test_frames_are_kept_at_the_side_the_models_are_sent(planted: tuple[Path, PlantedVideo]) -> None:
    """Kept frames are scaled as the encoder would scale them: the same pixels, a fraction of the memory."""
    from vhd.media.image import fit_image

    path, _ = planted
    full = list(iter_segments(path, SegmentSettings(frames=3)))
    small = list(iter_segments(path, SegmentSettings(frames=3, keep_side=32)))
    assert [s.times for s in small] == [s.times for s in full]
    for a, b in zip(full, small, strict=True):
        assert all(max(im.size) == 32 for im in b.images)
        assert [fit_image(im, 32).tobytes() for im in a.images] == [im.tobytes() for im in b.images]


def test_a_frame_that_grows_midway_is_refused_before_it_is_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Header 64x64, third frame 2000x2000 over a 1,000,000-pixel limit: the decoder refuses to allocate it."""
    import vhd.media.videoframes as videoframes
    from tests.hostile_corpus import growing_video

    video = growing_video(tmp_path / "grow.avi", (64, 64, 2000, 64))
    seen: list[tuple[int, int]] = []
    real = videoframes.check_frame_size

    def checking(width: int, height: int, max_pixels: int | None, **kw: Any) -> None:
        seen.append((width, height))
        real(width, height, max_pixels, **kw)

    monkeypatch.setattr(videoframes, "check_frame_size", checking)
    with pytest.raises(MediaError, match="frame 2 grows past the frame limit of 1,000,000 pixels") as caught:
        list(iter_segments(video, max_pixels=1_000_000))
    assert "refused before decoding that frame" in str(caught.value)
    assert (2000, 2000) not in seen  # never decoded (it was: the size was checked on the decoded frame)


def test_a_size_checked_after_decoding_says_so() -> None:
    from vhd.media.videoframes import check_frame_size

    with pytest.raises(MediaError, match="refused at the first such frame decoded"):
        check_frame_size(5000, 5000, 1_000_000, decoded=True)
    with pytest.raises(MediaError, match="refused before decoding"):
        check_frame_size(5000, 5000, 1_000_000)
