"""The clip cutter: a span of a video as a bounded MP4 (native video input), and a span as frames."""

from __future__ import annotations

import io
from fractions import Fraction
from pathlib import Path

import pytest
from PIL import Image

from tests.media.conftest import FRAME_SIZE, center_index, index_color, make_video
from vhd.errors import ConfigError, MediaError
from vhd.media.clip import ClipLimits, cut_clip, decode_clip, span_frames, video_content

pytest.importorskip("av")


def _clip_times(data: bytes) -> list[float]:
    import av

    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        assert stream.codec_context.pix_fmt == "yuv420p"
        return [round(float(f.time), 3) for f in container.decode(stream)]


def test_clip_shows_exactly_the_span_at_the_capped_rate(tmp_path: Path) -> None:
    video = make_video(tmp_path / "v.mp4", 240, fps=24)  # 10 s, frame i drawn as index_color(i)
    clip = cut_clip(video, 2.0, 5.0, fps=2, max_side=32)
    assert (clip.start_s, clip.end_s, clip.frames, clip.capped) == (2.0, 5.0, 6, False)
    assert clip.data[4:8] == b"ftyp" and clip.mime == "video/mp4"
    assert [center_index(f) for f in decode_clip(clip.data)] == [48, 60, 72, 84, 96, 108]  # 2.0 s, 2.5 s, ...
    assert _clip_times(clip.data) == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]  # source time minus start_s
    assert max(clip.width, clip.height) <= 32 and clip.width % 2 == 0 and clip.height % 2 == 0
    assert clip.data_url.startswith("data:video/mp4;base64,")


def test_clip_from_the_start_and_a_low_source_rate(tmp_path: Path) -> None:
    video = make_video(tmp_path / "v.mp4", 12, fps=4)  # 3 s at 4 fps: a 10 fps cap keeps every frame
    clip = cut_clip(video, 0.0, 3.0, fps=10)
    assert clip.frames == 12
    assert [center_index(f) for f in decode_clip(clip.data)] == list(range(12))
    assert (clip.width, clip.height) == FRAME_SIZE


def test_webm_span(tmp_path: Path) -> None:
    video = make_video(tmp_path / "v.webm", 100, codec="libvpx-vp9", fps=10)
    clip = cut_clip(video, 4.0, 6.0, fps=1)
    assert [center_index(f) for f in decode_clip(clip.data)] == [40, 50]


def test_duration_cap_cuts_a_long_span_short(tmp_path: Path) -> None:
    video = make_video(tmp_path / "v.mp4", 100, fps=10)
    clip = cut_clip(video, 1.0, 100.0, fps=1, max_duration_s=3.0)
    assert (clip.end_s, clip.capped) == (4.0, True)
    assert [center_index(f) for f in decode_clip(clip.data)] == [10, 20, 30]


def test_span_past_the_end_stops_at_the_last_frame(tmp_path: Path) -> None:
    video = make_video(tmp_path / "v.mp4", 30, fps=10)
    clip = cut_clip(video, 2.0, 50.0, fps=10)
    assert [center_index(f) for f in decode_clip(clip.data)] == list(range(20, 30))


def test_span_after_the_end_is_refused_with_the_decoded_end(tmp_path: Path) -> None:
    video = make_video(tmp_path / "v.mp4", 30, fps=10)
    with pytest.raises(
        MediaError, match=r"no frames between 20\.00 s and 30\.00 s: the video has its last frame at 2\.90 s"
    ):
        cut_clip(video, 20.0, 30.0)


def test_byte_cap_refuses_with_the_fix(tmp_path: Path) -> None:
    def noise(i: int) -> Image.Image:
        return Image.effect_noise((256, 256), 100 + i).convert("RGB")

    video = make_video(tmp_path / "noise.mp4", 40, fps=10, size=(256, 256), draw=noise)
    with pytest.raises(MediaError, match=r"clip over 2,048 bytes .*lower clip_fps or clip_max_side"):
        cut_clip(video, 0.0, 4.0, fps=10, max_side=256, max_bytes=2048)


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "empty file"), (b"hello, not a video at all", "not a recognised video format")],
)
def test_hostile_files_get_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(content)
    with pytest.raises(MediaError, match=message) as info:
        cut_clip(bad, 0.0, 1.0)
    assert "\n" not in str(info.value)


def test_truncated_mp4_is_a_media_error(tmp_path: Path) -> None:
    video = make_video(tmp_path / "v.mp4", 48, fps=24)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(video.read_bytes()[: video.stat().st_size // 2])
    with pytest.raises(MediaError) as info:
        cut_clip(cut, 0.0, 2.0)
    assert "\n" not in str(info.value)


def _backwards_video(path: Path) -> Path:
    """MJPEG in Matroska, 10 fps; frames 20-24 carry timestamps 0.5-0.9 s (backwards by 1.5 s)."""
    import av
    import numpy as np

    tb = Fraction(1, 1000)
    with av.open(str(path), "w", format="matroska") as out:
        stream = out.add_stream("mjpeg", rate=10)
        stream.width, stream.height = FRAME_SIZE
        stream.pix_fmt = "yuvj420p"
        stream.codec_context.time_base = tb
        for i in range(40):
            frame = av.VideoFrame.from_ndarray(np.asarray(Image.new("RGB", FRAME_SIZE, index_color(i))), format="rgb24")
            for packet in stream.encode(frame):
                packet.pts = (i - 15) * 100 if 20 <= i < 25 else i * 100
                packet.dts = i
                packet.time_base = tb
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def test_backwards_timestamps_are_dropped_not_shown(tmp_path: Path) -> None:
    video = _backwards_video(tmp_path / "back.mkv")
    clip = cut_clip(video, 0.0, 4.0, fps=10)
    shown = [center_index(f) for f in decode_clip(clip.data)]
    assert shown == [*range(20), *range(25, 40)]
    times = _clip_times(clip.data)
    assert times == sorted(times) and len(set(times)) == len(times)


def test_span_frames_spread_over_the_span(tmp_path: Path) -> None:
    video = make_video(tmp_path / "v.mp4", 240, fps=24)
    frames = span_frames(video, 2.0, 5.0, 3)
    assert [center_index(Image.open(io.BytesIO(f.data))) for f in frames] == [48, 72, 96]
    few = span_frames(make_video(tmp_path / "short.mp4", 2, fps=1), 0.0, 2.0, 5)
    assert [center_index(Image.open(io.BytesIO(f.data))) for f in few] == [0, 1]


def test_video_content_modes(tmp_path: Path) -> None:
    video = make_video(tmp_path / "v.mp4", 100, fps=10)
    limits = ClipLimits(seconds=2.0, fps=1.0, max_side=32)
    frames = video_content(video, 3.0, 8.0, "frames", limits, n_frames=5)
    assert frames.clip is None and len(frames.frames) == 5
    native = video_content(video, 3.0, 8.0, "native", limits)
    assert native.frames == [] and native.clip is not None
    assert (native.clip.start_s, native.clip.end_s, native.clip.capped) == (3.0, 5.0, True)
    assert [center_index(f) for f in native.clip.to_frames()] == [30, 40]
    both = video_content(video, 3.0, 8.0, "both", limits, n_frames=2)
    assert len(both.frames) == 2 and both.clip is not None
    with pytest.raises(ConfigError, match="frames or native"):
        video_content(video, 0.0, 1.0, "movie", limits)


@pytest.mark.parametrize(("start", "end"), [(-1.0, 2.0), (3.0, 3.0), (4.0, 1.0), (0.0, float("nan"))])
def test_bad_span_is_a_config_error(tmp_path: Path, start: float, end: float) -> None:
    video = make_video(tmp_path / "v.mp4", 10, fps=10)
    with pytest.raises(ConfigError, match="0 <= start_s < end_s"):
        cut_clip(video, start, end)


def test_clip_limits_are_checked() -> None:
    with pytest.raises(ConfigError, match="clip_fps"):
        ClipLimits(fps=0)
    with pytest.raises(ConfigError, match="clip_max_side"):
        ClipLimits(max_side=4)


def test_rotation_metadata_turns_the_clip_upright(tmp_path: Path) -> None:
    video = make_video(tmp_path / "rot.mp4", 20, fps=10, rotation=90)  # stored 64x48, shown 48x64
    clip = cut_clip(video, 0.0, 2.0, fps=2)
    assert (clip.width, clip.height) == (FRAME_SIZE[1], FRAME_SIZE[0])
    assert [center_index(f) for f in decode_clip(clip.data)] == [0, 5, 10, 15]


def test_a_clip_survives_pickling_for_executor_workers(tmp_path: Path) -> None:
    import pickle

    clip = cut_clip(make_video(tmp_path / "v.mp4", 20, fps=10), 0.0, 1.0, fps=2)
    assert clip.data_url  # the cached data URL travels too, or is rebuilt
    again = pickle.loads(pickle.dumps(clip))
    assert again == clip and (again.start_s, again.end_s, again.frames, again.capped) == (0.0, 1.0, 2, False)


def test_video_content_default_limits_bound_the_clip(tmp_path: Path) -> None:
    video = make_video(tmp_path / "v.mp4", 20, fps=10)
    content = video_content(video, 0.5, 1.5, "native")  # ClipLimits(): 30 s, 2 fps, 448 px
    assert content.clip is not None and content.clip.frames == 2 and not content.clip.capped
