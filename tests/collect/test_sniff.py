from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from tests.collect.conftest import mp4_bytes
from vhd.collect.sniff import describe, sniff
from vhd.records import Kind


@pytest.mark.parametrize(
    ("fmt", "name", "ext"),
    [
        ("JPEG", "jpeg", ".jpg"),
        ("PNG", "png", ".png"),
        ("GIF", "gif", ".gif"),
        ("WEBP", "webp", ".webp"),
        ("BMP", "bmp", ".bmp"),
    ],
)
def test_images_made_by_pillow_are_recognised(fmt: str, name: str, ext: str) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), "green").save(buf, fmt)
    media = sniff(buf.getvalue()[:64])
    assert media is not None
    assert (media.kind, media.name, media.ext) == (Kind.IMAGE, name, ext)


@pytest.mark.parametrize(
    ("container", "codec", "name"),
    [
        ("mp4", "libx264", "mp4"),
        ("mov", "libx264", "mov"),
        ("webm", "libvpx-vp9", "webm"),
        ("matroska", "libx264", "mkv"),
        ("avi", "mpeg4", "avi"),
    ],
)
def test_videos_encoded_by_pyav_are_recognised(tmp_path: Path, container: str, codec: str, name: str) -> None:
    import av
    import numpy as np

    path = tmp_path / f"clip.{name}"
    with av.open(str(path), "w", format=container) as out:
        stream = out.add_stream(codec, rate=8)
        stream.width, stream.height = 32, 32
        stream.pix_fmt = "yuv420p"
        for _ in range(3):
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    media = sniff(path.read_bytes()[:64])
    assert media is not None and media.kind is Kind.VIDEO and media.name == name


def test_helper_mp4_is_mp4(tmp_path: Path) -> None:
    media = sniff(mp4_bytes(tmp_path)[:64])
    assert media is not None and media.ext == ".mp4"


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        (b"", "empty content"),
        (b"<!DOCTYPE html><html><body>not found</body></html>", "an HTML page"),
        (b"  \n<html>", "an HTML page"),
        (b'{"error": "gone"}', "JSON text"),
        (b"%PDF-1.7 binary", "a PDF document"),
        (b"PK\x03\x04zipzip", "a ZIP archive"),
        (b"<?xml version='1.0'?><svg/>", "XML or SVG text"),
        (b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00", "AVIF image (not supported)"),
        (b"hello, plain words", "plain text"),
        (bytes(range(200, 256)), "unrecognised binary data"),
    ],
)
def test_other_content_is_refused_and_described(content: bytes, phrase: str) -> None:
    assert sniff(content) is None
    assert phrase in describe(content)


def test_two_letters_of_bmp_magic_are_not_enough() -> None:
    assert sniff(b"BMW is a car brand, not a bitmap at all!") is None
    assert sniff(b"RIFF\x10\x00\x00\x00WAVEfmt ") is None
