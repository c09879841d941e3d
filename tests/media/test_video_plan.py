"""The keyframe-aware frame plan returns exactly the frames that forward decoding returns."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.media.conftest import make_audio_only
from vhd.errors import ConfigError, MediaError
from vhd.media.keyframes import MIN_SKIP, scan_packets
from vhd.media.video import VideoFrames, read_frames

SIZE = (128, 96)
BITS = 12  # a 4 x 3 grid of 32-pixel blocks: frame indices up to 4095


def draw_index(i: int, size: tuple[int, int] = SIZE) -> np.ndarray:
    """Frame ``i`` as RGB: its index in binary, one black or white 32-pixel block per bit."""
    w, h = size
    img = np.full((h, w, 3), 128, dtype=np.uint8)
    for bit in range(BITS):
        row, col = divmod(bit, 4)
        value = 255 if (i >> bit) & 1 else 0
        img[row * 32 : row * 32 + 32, col * 32 : col * 32 + 32] = value
    return img


def read_index(image: Image.Image) -> int:
    """Read back the index drawn by `draw_index` (upright frames only)."""
    gray = np.asarray(image.convert("L"), dtype=np.int32)
    value = 0
    for bit in range(BITS):
        row, col = divmod(bit, 4)
        if gray[row * 32 + 16, col * 32 + 16] > 128:
            value |= 1 << bit
    return value


def encode(
    path: Path,
    frames: int,
    codec: str = "libx264",
    options: dict[str, str] | None = None,
    pts: Sequence[int] | None = None,
    rotation: int | None = None,
    audio: bool = False,
    fps: int = 24,
) -> Path:
    """Encode a video whose frame i shows i in binary (`draw_index`)."""
    import av
    from av.video.stream import VideoStream

    with av.open(str(path), "w") as container:
        sound = container.add_stream("aac", rate=44100) if audio else None
        stream = container.add_stream(codec, rate=fps, options=options or {})
        assert isinstance(stream, VideoStream)
        stream.width, stream.height = SIZE
        stream.pix_fmt = "yuv420p"
        if pts is not None:
            stream.codec_context.time_base = Fraction(1, fps * 10)
        if rotation is not None:
            stream.set_display_rotation(rotation)
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(draw_index(i), format="rgb24")
            if pts is not None:
                frame.pts = pts[i]
                frame.time_base = Fraction(1, fps * 10)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
        if sound is not None:
            for j in range(20):
                chunk = av.AudioFrame.from_ndarray(np.zeros((1, 1024), dtype=np.float32), format="fltp", layout="mono")
                chunk.sample_rate = 44100
                chunk.pts = j * 1024
                for packet in sound.encode(chunk):
                    container.mux(packet)
            for packet in sound.encode():
                container.mux(packet)
    return path


def assert_same_frames(path: Path, n: int = 5, first: int = 4000) -> VideoFrames:
    """Read both ways; same indices, totals and pixels, and the drawn indices match."""
    planned = read_frames(path, n, first)
    reference = read_frames(path, n, first, strategy="decode")
    assert planned.indices == reference.indices
    assert planned.total_frames == reference.total_frames
    assert [read_index(img) for img in planned.images] == planned.indices
    for a, b in zip(planned.images, reference.images, strict=True):
        assert a.size == b.size
        assert np.array_equal(np.asarray(a), np.asarray(b))
    return planned


# Each case: file name, codec, encoder options. Keyframes every 40 frames, so seeks pay.
SEEKABLE = [
    ("h264.mp4", "libx264", {"g": "40", "bf": "3"}),
    ("h264.mkv", "libx264", {"g": "40"}),
    ("h264.mov", "libx264", {"g": "40"}),
    ("h264_opengop.mkv", "libx264", {"g": "40", "x264-params": "open-gop=1:keyint=40"}),
    ("vp9.webm", "libvpx-vp9", {"g": "40", "deadline": "realtime", "cpu-used": "8"}),
    ("hevc.mp4", "libx265", {"g": "40", "x265-params": "keyint=40:min-keyint=40:log-level=error"}),
    ("av1.mp4", "libsvtav1", {"g": "40"}),
    ("av1.webm", "libsvtav1", {"g": "40"}),
]


@pytest.mark.parametrize(("name", "codec", "options"), SEEKABLE)
def test_plan_matches_forward_decoding(tmp_path: Path, name: str, codec: str, options: dict[str, str]) -> None:
    path = encode(tmp_path / name, 300, codec, options)
    frames = assert_same_frames(path)
    assert frames.indices == [0, 75, 150, 224, 299]
    if "opengop" in name:
        # Decoding is strict (damage must not be concealed): after a seek into an open GOP the
        # decoder misses the frames before the keyframe and reports it, so the plan gives way.
        assert frames.method == "decode"
        return
    assert frames.method == "keyframes"
    assert frames.seeks >= 2
    assert frames.frames_decoded < 300


@pytest.mark.parametrize(("n", "first"), [(1, 4000), (2, 4000), (7, 4000), (5, 250), (5, 81), (20, 300), (3, 10)])
def test_plan_matches_for_other_counts_and_windows(tmp_path: Path, n: int, first: int) -> None:
    path = encode(tmp_path / "v.mp4", 300, options={"g": "40"})
    frames = assert_same_frames(path, n, first)
    assert frames.total_frames == 300


def test_plan_stops_at_the_window(tmp_path: Path) -> None:
    path = encode(tmp_path / "v.mp4", 400, options={"g": "40"})
    frames = assert_same_frames(path, 5, 200)
    assert frames.indices == [0, 50, 100, 149, 199]
    assert frames.method == "keyframes"
    assert frames.frames_decoded < 200


def test_webm_has_no_frame_count_but_the_scan_counts_exactly(tmp_path: Path) -> None:
    import av

    path = encode(tmp_path / "v.webm", 250, "libvpx-vp9", {"g": "40", "deadline": "realtime", "cpu-used": "8"})
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert stream.frames == 0
        scan = scan_packets(container, stream, 10_000)
    assert scan.complete and len(scan.pts) == 250
    assert scan.keyframes[0] == 0 and len(scan.keyframes) >= 5
    frames = assert_same_frames(path)
    assert frames.total_frames == 250 and frames.method == "keyframes"


def test_variable_frame_rate(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    gaps = rng.integers(1, 30, size=300)
    pts = np.concatenate([[0], np.cumsum(gaps)[:-1]]).tolist()
    for name in ("vfr.mp4", "vfr.mkv", "vfr.webm"):
        codec = "libvpx-vp9" if name.endswith(".webm") else "libx264"
        path = encode(tmp_path / name, 300, codec, {"g": "40"}, pts=pts)
        frames = assert_same_frames(path)
        assert frames.method == "keyframes"


def test_rotation_is_applied_on_the_plan_too(tmp_path: Path) -> None:
    path = encode(tmp_path / "r.mp4", 200, options={"g": "40"}, rotation=180)
    planned = read_frames(path)
    reference = read_frames(path, strategy="decode")
    assert planned.method == "keyframes"
    assert planned.images[0].size == SIZE
    upright = [read_index(img.transpose(Image.Transpose.ROTATE_180)) for img in planned.images]
    assert upright == planned.indices
    assert all(
        np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(planned.images, reference.images, strict=True)
    )


def test_video_with_an_audio_stream(tmp_path: Path) -> None:
    path = encode(tmp_path / "av.mp4", 200, options={"g": "40"}, audio=True)
    assert assert_same_frames(path).method == "keyframes"


def test_short_video_and_video_shorter_than_n(tmp_path: Path) -> None:
    short = encode(tmp_path / "three.mp4", 3, options={"g": "40"})
    frames = assert_same_frames(short)
    assert frames.indices == [0, 1, 2]
    assert frames.method == "decode"  # nothing to skip: plain forward decoding
    one = encode(tmp_path / "one.webm", 1, "libvpx-vp9")
    assert assert_same_frames(one).indices == [0]


def test_no_seek_when_keyframes_skip_too_little(tmp_path: Path) -> None:
    path = encode(tmp_path / "v.mp4", 60, options={"g": str(MIN_SKIP // 3)})
    frames = assert_same_frames(path, 5)
    assert frames.method == "decode"


@pytest.mark.parametrize(
    ("name", "codec", "options"),
    [
        ("v.avi", "mpeg4", {"g": "20", "bf": "2"}),  # keyframe flags not trusted
        ("vp8.webm", "libvpx", {"g": "20"}),  # alt-ref frames may be packets without a picture
        ("h264.avi", "libx264", {"g": "40"}),  # AVI timestamps are in decoding order: checked, then abandoned
    ],
)
def test_untrusted_codecs_decode_forward(tmp_path: Path, name: str, codec: str, options: dict[str, str]) -> None:
    path = encode(tmp_path / name, 200, codec, options)
    planned = read_frames(path)
    reference = read_frames(path, strategy="decode")
    assert planned.method == "decode"
    assert planned.indices == reference.indices
    assert planned.frames_decoded == reference.frames_decoded == 200


@pytest.mark.parametrize("name", ["cut.webm", "cut.mp4", "cut.mkv"])
def test_truncated_files_fail_as_forward_decoding_does(tmp_path: Path, name: str) -> None:
    codec, options = (
        ("libvpx-vp9", {"g": "40", "deadline": "realtime"}) if name.endswith("webm") else ("libx264", {"g": "40"})
    )
    path = encode(tmp_path / ("full" + Path(name).suffix), 300, codec, options)
    data = path.read_bytes()
    cut = tmp_path / name
    cut.write_bytes(data[: int(len(data) * 0.6)])
    errors = []
    for strategy in ("auto", "decode"):
        with pytest.raises(MediaError) as info:
            read_frames(cut, strategy=strategy)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_truncated_file_inside_the_window_still_reads(tmp_path: Path) -> None:
    path = encode(tmp_path / "full.mkv", 400, options={"g": "40"})
    data = path.read_bytes()
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(data[: int(len(data) * 0.8)])
    frames = assert_same_frames(cut, 5, 100)
    assert frames.indices == [0, 25, 50, 74, 99]


def test_audio_only_and_bad_strategy(tmp_path: Path) -> None:
    sound = make_audio_only(tmp_path / "sound.mp4")
    with pytest.raises(MediaError, match="no video stream"):
        read_frames(sound)
    with pytest.raises(ConfigError, match="unknown frame strategy"):
        read_frames(sound, strategy="seek")


def test_a_stream_without_a_decoder_is_refused_not_a_crash(tmp_path: Path) -> None:
    """A flipped codec description (MP4 ``stsd``) opens as a stream with no codec context: one reason."""
    import av

    from tests.hostile_corpus import flip_codec_tag, video_bytes
    from vhd.media.keyframes import try_plan
    from vhd.media.videoframes import REWIND

    path = tmp_path / "h264_fliptag.mp4"
    path.write_bytes(flip_codec_tag(video_bytes("libx264", "mp4")))
    with av.open(str(path)) as container:
        assert container.streams.video[0].codec_context is None
        assert try_plan(container, 5, 4000) == (None, REWIND)
    with pytest.raises(MediaError, match="no decoder"):
        read_frames(path, 5)
