"""Fixtures for the collect room: a misbehaving local HTTP server and media made in code."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from tests.collect.media_server import MediaServer


def png_bytes(color: str | tuple[int, int, int] = "red", size: tuple[int, int] = (32, 24)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


def jpeg_bytes(
    color: str | tuple[int, int, int] = "blue", size: tuple[int, int] = (40, 30), quality: int = 90
) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def photo_bytes(name: str = "astronaut", side: int = 256, fmt: str = "JPEG", quality: int = 90) -> bytes:
    """A real photo from scikit-image, resized and encoded (for perceptual hashing)."""
    from skimage import data

    img = Image.fromarray(getattr(data, name)()).convert("RGB")
    img = img.resize((side, round(side * img.height / img.width)))
    buf = io.BytesIO()
    img.save(buf, fmt, **({"quality": quality} if fmt == "JPEG" else {}))
    return buf.getvalue()


def mp4_bytes(tmp_path: Path, frames: int = 6, color: tuple[int, int, int] = (200, 40, 40)) -> bytes:
    """A tiny H.264 MP4 encoded by PyAV."""
    import av
    import numpy as np

    path = tmp_path / f"clip_{frames}_{color[0]}.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=12)
        stream.width, stream.height = 32, 32
        stream.pix_fmt = "yuv420p"
        for i in range(frames):
            arr = np.full((32, 32, 3), color, dtype=np.uint8)
            arr[: i + 1] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path.read_bytes()


def leftovers(out: Path) -> list[Path]:
    """Temporary or partial files anywhere under ``out``."""
    return [p for p in out.rglob("*") if p.is_file() and (p.suffix in (".part", ".tmp") or p.parent.name == ".partial")]


@pytest.fixture
def server() -> Iterator[MediaServer]:
    with MediaServer() as srv:
        yield srv
