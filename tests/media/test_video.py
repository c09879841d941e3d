from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from tests.media.conftest import (
    FRAME_SIZE,
    center_index,
    make_audio_only,
    make_video,
)
from vhd.errors import ConfigError, MediaError, MissingDependencyError
from vhd.media.video import VideoFrames, frame_indices, read_frames, write_frames

# --- frame_indices ------------------------------------------------------------------------


@given(
    total=st.integers(min_value=-5, max_value=20_000),
    n=st.integers(min_value=1, max_value=40),
    first=st.integers(min_value=1, max_value=8_000),
)
def test_frame_indices_properties(total: int, n: int, first: int) -> None:
    indices = frame_indices(total, n, first)
    count = min(total, first)
    if count <= 0:
        assert indices == []
        return
    assert indices == sorted(set(indices))
    assert all(0 <= i <= count - 1 for i in indices)
    assert len(indices) == min(n, count)
    assert indices[0] == 0
    if n > 1:
        assert indices[-1] == count - 1


@given(
    total=st.integers(min_value=1, max_value=20_000),
    n=st.integers(min_value=1, max_value=40),
    first=st.integers(min_value=1, max_value=8_000),
)
def test_frame_indices_match_numpy_linspace(total: int, n: int, first: int) -> None:
    count = min(total, first)
    expected = sorted(set(np.round(np.linspace(0, count - 1, n)).astype(int).tolist()))
    assert frame_indices(total, n, first) == expected


def test_frame_indices_examples() -> None:
    assert frame_indices(48) == [0, 12, 24, 35, 47]
    assert frame_indices(100, 5, 40) == [0, 10, 20, 29, 39]
    assert frame_indices(60_000) == [0, 1000, 2000, 2999, 3999]
    assert frame_indices(3, 5) == [0, 1, 2]
    assert frame_indices(0) == []
    assert frame_indices(10, 1) == [0]


def test_frame_indices_rejects_bad_counts() -> None:
    with pytest.raises(ConfigError):
        frame_indices(10, 0)
    with pytest.raises(ConfigError):
        frame_indices(10, 5, 0)


# --- read_frames --------------------------------------------------------------------------


def _indices_seen(frames: VideoFrames) -> list[int]:
    return [center_index(img) for img in frames.images]


@pytest.mark.parametrize(("name", "codec"), [("v.mp4", "libx264"), ("v.webm", "libvpx-vp9")])
def test_read_frames_mp4_and_webm(tmp_path: Path, name: str, codec: str) -> None:
    path = make_video(tmp_path / name, 48, codec=codec)
    frames = read_frames(path)
    assert frames.indices == [0, 12, 24, 35, 47]
    assert _indices_seen(frames) == frames.indices
    assert frames.total_frames == 48
    assert frames.frames_decoded == 48
    assert frames.fps == pytest.approx(24.0)
    assert all(img.mode == "RGB" and img.size == FRAME_SIZE for img in frames.images)


def test_first_frames_limit_is_honoured(tmp_path: Path) -> None:
    path = make_video(tmp_path / "v.mp4", 100)
    frames = read_frames(path, n=5, first=40)
    assert frames.indices == [0, 10, 20, 29, 39]
    assert _indices_seen(frames) == [0, 10, 20, 29, 39]
    assert frames.total_frames == 100
    assert frames.frames_decoded == 40  # stopped at frame 39


def test_first_frames_limit_on_webm(tmp_path: Path) -> None:
    path = make_video(tmp_path / "v.webm", 100, codec="libvpx-vp9")
    frames = read_frames(path, n=5, first=40)
    assert _indices_seen(frames) == [0, 10, 20, 29, 39]


def test_decoding_stops_at_the_window(tmp_path: Path) -> None:
    # Damage after frame ~60 is never reached when only the first 40 frames are considered.
    path = make_video(tmp_path / "v.webm", 100, codec="libvpx-vp9")
    data = path.read_bytes()
    cut = tmp_path / "cut.webm"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    frames = read_frames(cut, n=5, first=40)
    assert frames.indices == [0, 10, 20, 29, 39]
    assert _indices_seen(frames) == [0, 10, 20, 29, 39]
    assert frames.frames_decoded == 40
    with pytest.raises(MediaError, match="video ended after"):
        read_frames(cut, n=5, first=4000)


def test_video_shorter_than_n_frames(tmp_path: Path) -> None:
    path = make_video(tmp_path / "v.mp4", 3)
    frames = read_frames(path, n=5)
    assert frames.indices == [0, 1, 2]
    assert _indices_seen(frames) == [0, 1, 2]


def test_webm_truncated_in_half(tmp_path: Path) -> None:
    path = make_video(tmp_path / "v.webm", 48, codec="libvpx-vp9")
    data = path.read_bytes()
    cut = tmp_path / "cut.webm"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(MediaError, match=r"video ended after \d+ frames; expected frame"):
        read_frames(cut)


def test_webm_missing_its_last_frames(tmp_path: Path) -> None:
    path = make_video(tmp_path / "v.webm", 48, codec="libvpx-vp9")
    data = path.read_bytes()
    cut = tmp_path / "cut.webm"
    cut.write_bytes(data[: int(len(data) * 0.9)])
    with pytest.raises(MediaError, match="video ended after"):
        read_frames(cut)


def test_mp4_cut_short(tmp_path: Path) -> None:
    path = make_video(tmp_path / "v.mp4", 48)
    data = path.read_bytes()
    for fraction in (0.5, 0.9):
        cut = tmp_path / f"cut{fraction}.mp4"
        cut.write_bytes(data[: int(len(data) * fraction)])
        with pytest.raises(MediaError):
            read_frames(cut)


def test_mp4_with_index_first_cut_short(tmp_path: Path) -> None:
    def noisy(i: int) -> Image.Image:
        rng = np.random.default_rng(i)
        return Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))

    path = make_video(tmp_path / "v.mp4", 48, options={"movflags": "faststart"}, draw=noisy)
    data = path.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(MediaError):
        read_frames(cut)


def test_zero_byte_and_text_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(MediaError, match="empty file"):
        read_frames(empty)
    text = tmp_path / "text.webm"
    text.write_text("not a video\n" * 50)
    with pytest.raises(MediaError, match=r"^not a recognised video format"):
        read_frames(text)
    with pytest.raises(MediaError, match="cannot read file"):
        read_frames(tmp_path / "missing.mp4")


def test_audio_only_file(tmp_path: Path) -> None:
    path = make_audio_only(tmp_path / "sound.mp4")
    with pytest.raises(MediaError, match="no video stream"):
        read_frames(path)


def test_rotation_metadata_is_applied(tmp_path: Path) -> None:
    def split(_: int) -> Image.Image:
        img = Image.new("RGB", (64, 48), (0, 0, 255))
        img.paste((255, 0, 0), (0, 0, 32, 48))  # left red, right blue
        return img

    path = make_video(tmp_path / "r.mp4", 6, rotation=90, draw=split)
    frames = read_frames(path, n=2)
    img = frames.images[0]
    assert img.size == (48, 64)
    # Rotated 90 degrees counter-clockwise: the right (blue) half is now on top.
    top, bottom = img.getpixel((24, 8)), img.getpixel((24, 56))
    assert isinstance(top, tuple) and isinstance(bottom, tuple)
    assert top[2] > 200 and top[0] < 60
    assert bottom[0] > 200 and bottom[2] < 60


def test_webm_duration_estimate_too_high_is_replanned(tmp_path: Path) -> None:
    # The last frame is shown late, so duration x rate suggests 50 frames; 48 exist.
    pts = [i * 10 for i in range(47)] + [490]
    path = make_video(tmp_path / "long.webm", 48, codec="libvpx-vp9", pts=pts)
    frames = read_frames(path)
    assert frames.indices == [0, 12, 24, 35, 47]
    assert _indices_seen(frames) == [0, 12, 24, 35, 47]
    assert frames.total_frames == 48
    assert frames.frames_decoded == 96  # a second pass on the real count


def test_webm_duration_estimate_too_low_is_replanned(tmp_path: Path) -> None:
    # The last frames come quickly, so duration x rate suggests 41 frames; 48 exist.
    pts = [i * 10 for i in range(38)] + [380 + j * 2 for j in range(10)]
    path = make_video(tmp_path / "short.webm", 48, codec="libvpx-vp9", pts=pts)
    frames = read_frames(path)
    assert _indices_seen(frames) == [0, 12, 24, 35, 47]
    assert frames.total_frames == 48


def test_read_frames_rejects_bad_counts(tmp_path: Path) -> None:
    path = make_video(tmp_path / "v.mp4", 4)
    with pytest.raises(ConfigError):
        read_frames(path, n=0)


def test_missing_pyav_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_video(tmp_path / "v.mp4", 4)
    monkeypatch.setitem(sys.modules, "av", None)
    with pytest.raises(MissingDependencyError, match=r"vhd\[video\]"):
        read_frames(path)


def test_write_frames_naming(tmp_path: Path) -> None:
    frames = read_frames(make_video(tmp_path / "clip.mp4", 20))
    paths = write_frames(frames, tmp_path / "out", "clip")
    assert [p.name for p in paths] == [f"clip_{k:04d}.png" for k in range(5)]
    assert [center_index(Image.open(p)) for p in paths] == frames.indices
