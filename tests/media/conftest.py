"""Fixtures and helpers for the media room: test media made in code, never committed."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path

import pytest
from PIL import Image

FRAME_SIZE = (64, 48)


def index_color(index: int) -> tuple[int, int, int]:
    """A solid colour that encodes a frame index (0-255), robust to lossy compression."""
    return ((index % 16) * 16 + 8, (index // 16) * 16 + 8, 128)


def color_index(rgb: tuple[int, ...]) -> int:
    """Read back the index drawn by `index_color`."""
    return round((rgb[0] - 8) / 16) + 16 * round((rgb[1] - 8) / 16)


def center_index(image: Image.Image) -> int:
    return color_index(image.convert("RGB").getpixel((image.width // 2, image.height // 2)))  # type: ignore[arg-type]


def make_video(
    path: Path,
    frames: int,
    codec: str = "libx264",
    fps: int = 24,
    size: tuple[int, int] = FRAME_SIZE,
    rotation: int | None = None,
    pts: Sequence[int] | None = None,
    options: dict[str, str] | None = None,
    draw: Callable[[int], Image.Image] | None = None,
) -> Path:
    """Encode a video whose frame i is a solid `index_color(i)` (or ``draw(i)``)."""
    import av
    import numpy as np
    from av.video.stream import VideoStream

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", options=options or {}) as container:
        stream = container.add_stream(codec, rate=fps)
        assert isinstance(stream, VideoStream)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        if pts is not None:
            stream.codec_context.time_base = Fraction(1, fps * 10)
        if rotation is not None:
            stream.set_display_rotation(rotation)
        for i in range(frames):
            image = draw(i) if draw else Image.new("RGB", size, index_color(i))
            frame = av.VideoFrame.from_ndarray(np.asarray(image.convert("RGB")), format="rgb24")
            if pts is not None:
                frame.pts = pts[i]
                frame.time_base = Fraction(1, fps * 10)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def make_audio_only(path: Path) -> Path:
    """Encode one second of silence as AAC in an MP4 container (no video stream)."""
    import av
    import numpy as np

    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=44100)
        stream.layout = "mono"
        for i in range(44):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), dtype=np.float32), format="fltp", layout="mono")
            frame.sample_rate = 44100
            frame.pts = i * 1024
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_header_only(width: int, height: int) -> bytes:
    """A tiny PNG that declares ``width x height`` pixels but holds almost no data."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", zlib.compress(b"\0" * 16))
        + png_chunk(b"IEND", b"")
    )


def jpeg_bytes(image: Image.Image, quality: int = 90, **kwargs: object) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=quality, **kwargs)
    return buf.getvalue()


def photo(size: tuple[int, int] = (800, 600)) -> Image.Image:
    """A photo-like RGB test image (a scikit-image photo resized)."""
    from skimage import data

    array = data.astronaut()  # type: ignore[no-untyped-call]
    return Image.fromarray(array).resize(size, Image.Resampling.BICUBIC)


@pytest.fixture
def write_bytes(tmp_path: Path) -> Callable[[str, bytes], Path]:
    def write(name: str, data: bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    return write


def _pillow_bytes(fmt: str, mode: str = "RGB") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, (16, 12), (200, 30, 30)).save(buf, format=fmt)
    return buf.getvalue()


def psd_bytes(width: int = 16, height: int = 12) -> bytes:
    """A minimal RGB Photoshop document (header, empty sections, raw planes) Pillow opens."""
    head = b"8BPS" + struct.pack(">H6xHIIHH", 1, 3, height, width, 8, 3)
    sections = struct.pack(">III", 0, 0, 0) + struct.pack(">H", 0)  # colour mode, resources, layers; raw
    return head + sections + bytes([200]) * (width * height) + bytes([30]) * (width * height * 2)


EPS_BYTES = (
    b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 16 12\n%%EndComments\n"
    b"newpath 0 0 moveto 16 12 lineto stroke\nshowpage\n%%EOF\n"
)
"""An Encapsulated PostScript file: Pillow would hand it to Ghostscript to decode."""


def refused_images() -> dict[str, bytes]:
    """Image files of formats vhd does not decode, by the name of the format, for tests of refusal."""
    return {
        "TIFF": _pillow_bytes("TIFF"),
        "TGA": _pillow_bytes("TGA"),
        "PSD": psd_bytes(),
        "EPS": EPS_BYTES,
        "DDS": _pillow_bytes("DDS", "RGBA"),
    }


def allowed_images() -> dict[str, bytes]:
    """One small file of every image format vhd decodes, by Pillow's name for it."""
    return {fmt: _pillow_bytes(fmt) for fmt in ("JPEG", "PNG", "WEBP", "BMP", "GIF")}
