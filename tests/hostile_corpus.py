"""A hostile corpus, built from code in seconds: corrupt media of every accepted kind, hostile text.

`media_corpus` writes, for each accepted image format and each video codec vhd decodes, one good
file and its corrupt variants: truncated at several points, bytes flipped in the header area
(first 1%) and in the payload (at 1/3), a zeroed block, a wrong extension, plus files that pose as
media (a playlist named ``.mp4``, zero bytes, a PNG header claiming huge dimensions). `text_corpus`
writes hostile manifests and label files: JSON nested 100,000 deep, NUL bytes in paths,
unterminated quotes, duplicated headers, BOMs, UTF-16, ragged rows and formula cells.
`endpoint_replies` lists the hostile answers a model endpoint or API can give (a loopback server
plays them, `tests.servers.chat_server.Failure`): silence after the headers, a trickle in the
body or the headers, an endless chunked body, a huge one, JSON nested 200,000 deep, a million
choices.

Everything is drawn by code (gradients and shapes); nothing is downloaded. Deterministic: the
same call writes the same bytes.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

VIDEO_CODECS: tuple[tuple[str, str, str, str], ...] = (
    # (name, PyAV encoder, container format, extension)
    ("h264", "libx264", "mp4", ".mp4"),
    ("mpeg4", "mpeg4", "mp4", ".mp4"),
    ("vp8", "libvpx", "webm", ".webm"),
    ("vp9", "libvpx-vp9", "webm", ".webm"),
    ("ffv1", "ffv1", "matroska", ".mkv"),
    ("mjpeg", "mjpeg", "avi", ".avi"),
)
"""Video codecs vhd accepts, one per container it reads (MP4/MOV, WebM/MKV, AVI)."""

IMAGE_FORMATS: tuple[tuple[str, str], ...] = (
    ("JPEG", ".jpg"),
    ("PNG", ".png"),
    ("WEBP", ".webp"),
    ("BMP", ".bmp"),
    ("GIF", ".gif"),
)

DEEP = 100_000
"""Nesting depth of the deep JSON inputs."""


@dataclass(frozen=True)
class Variant:
    """One corruption: a name and a function from good bytes to bad bytes."""

    name: str
    apply: Callable[[bytes], bytes]


def _flip(at: float, count: int = 8) -> Callable[[bytes], bytes]:
    def apply(data: bytes) -> bytes:
        out = bytearray(data)
        start = max(0, min(len(out) - count, int(len(out) * at)))
        for i in range(start, min(len(out), start + count)):
            out[i] ^= 0xA5
        return bytes(out)

    return apply


def _truncate(at: float) -> Callable[[bytes], bytes]:
    return lambda data: data[: int(len(data) * at)]


def _zero(at: float, size: int = 256) -> Callable[[bytes], bytes]:
    def apply(data: bytes) -> bytes:
        out = bytearray(data)
        start = int(len(out) * at)
        out[start : start + size] = bytes(len(out[start : start + size]))
        return bytes(out)

    return apply


def flip_codec_tag(data: bytes) -> bytes:
    """Flip the bytes that name the codec: MP4's sample description, Matroska's CodecID, AVI's stream format."""
    for tag in (b"stsd", b"V_", b"strf"):
        at = data.find(tag)
        if at >= 0:
            out = bytearray(data)
            for i in range(at, at + len(tag)):
                out[i] ^= 0xFF
            return bytes(out)
    return _flip(0.02)(data)


VARIANTS: tuple[Variant, ...] = (
    Variant("fliptag", flip_codec_tag),
    Variant("cut10", _truncate(0.10)),
    Variant("cut50", _truncate(0.50)),
    Variant("cut90", _truncate(0.90)),
    Variant("fliphead", _flip(0.01)),
    Variant("flipthird", _flip(1 / 3)),
    Variant("zeromid", _zero(0.5)),
)


def _frame(i: int, size: int = 64) -> np.ndarray:
    y, x = np.mgrid[0:size, 0:size]
    img = np.stack([(x * 4 + i * 9) % 256, (y * 4) % 256, ((x + y) * 2 + i * 17) % 256], axis=-1)
    img[8 + i : 24 + i, 20:40] = (250, 30, 30)
    return img.astype(np.uint8)


def video_bytes(encoder: str, fmt: str, frames: int = 12, size: int = 64, *, noise: bool = False) -> bytes:
    """Encode a short drawn clip with PyAV (``noise``: pixels of seeded noise instead); the container's bytes."""
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as out:
        stream = out.add_stream(encoder, rate=12)
        stream.width = stream.height = size
        stream.pix_fmt = "yuvj420p" if encoder == "mjpeg" else "yuv420p"
        for i in range(frames):
            pixels = np.random.default_rng(i).integers(0, 256, (size, size, 3), np.uint8) if noise else _frame(i, size)
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return buf.getvalue()


def image_bytes(fmt: str, size: int = 64) -> bytes:
    """A drawn image in one of the accepted formats."""
    buf = io.BytesIO()
    Image.fromarray(_frame(3, size)).save(buf, fmt)
    return buf.getvalue()


def huge_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A valid-looking PNG header claiming enormous dimensions (a decompression bomb's header)."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def media_corpus(folder: Path, *, videos: bool = True) -> list[Path]:
    """Write the hostile media corpus into ``folder``; the files written.

    Args:
        folder: Where to write (created).
        videos: Include videos (needs PyAV).
    """
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def put(name: str, data: bytes) -> None:
        path = folder / name
        path.write_bytes(data)
        written.append(path)

    goods: list[tuple[str, str, bytes]] = [(fmt.lower(), ext, image_bytes(fmt)) for fmt, ext in IMAGE_FORMATS]
    if videos:
        goods += [(name, ext, video_bytes(enc, fmt)) for name, enc, fmt, ext in VIDEO_CODECS]
    for name, ext, data in goods:
        put(f"{name}_good{ext}", data)
        for variant in VARIANTS:
            put(f"{name}_{variant.name}{ext}", variant.apply(data))
    put("png_named_as.mp4", goods[1][2])
    if videos:
        put("h264_named_as.jpg", next(d for n, _, d in goods if n == "h264"))
    put("playlist_posing.mp4", b"#EXTM3U\n#EXT-X-VERSION:3\n#EXTINF:10,\nhttp://127.0.0.1:9/seg0.ts\n#EXT-X-ENDLIST\n")
    put("empty.jpg", b"")
    put("empty.mp4", b"")
    put("huge_dimensions.png", huge_png())
    return written


def deep_json(kind: str = "list", depth: int = DEEP) -> str:
    """JSON nested ``depth`` levels deep: ``[[[...]]]`` or ``{"a":{"a":...}}``."""
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


def text_corpus(folder: Path, media: Path) -> dict[str, Path]:
    """Write hostile manifests and label files naming images in ``media``; name -> path.

    ``media`` must hold ``png_good.png`` and ``jpeg_good.jpg`` (from `media_corpus`).
    """
    folder.mkdir(parents=True, exist_ok=True)
    a, b = (media / "png_good.png").as_posix(), (media / "jpeg_good.jpg").as_posix()
    texts: dict[str, str | bytes] = {
        "deep_list.json": deep_json("list"),
        "deep_dict.json": deep_json("dict"),
        "deep_line.jsonl": f'{{"path": "{a}", "harmful": "yes"}}\n' + deep_json("dict") + "\n",
        "nul_path.csv": f"path,harmful\n{a},yes\nbad\x00name.jpg,no\n",
        "unterminated.csv": f'path,harmful\n"{a},yes\n{b},no\n' + "".join(f"{a},no\n" for _ in range(20)),
        "duplicate_header.csv": f"path,harmful,harmful\n{a},yes,no\n{b},no,yes\n",
        "bom.csv": "\ufeffpath,harmful\n" + f"{a},yes\n{b},no\n",
        "utf16.csv": ("path,harmful\n" + f"{a},yes\n{b},no\n").encode("utf-16"),
        "ragged.csv": f"path,harmful\n{a},yes,extra,cells\n{b}\n",
        "formula.csv": f'path,harmful,note\n{a},yes,=HYPERLINK("http://x")\n{b},no,@SUM(1+1)\n',
        "binary.csv": bytes(range(256)) * 4,
        "empty.csv": "",
    }
    out: dict[str, Path] = {}
    for name, text in texts.items():
        path = folder / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8", newline="")
        out[name] = path
    return out


def endpoint_replies(*, stall_s: float = 30.0) -> dict[str, Any]:
    """Hostile answers of a model endpoint or detector API, by name (`Failure`s of the chat server).

    Each must cost only its own call: ended by the configured timeout (the stalls and trickles,
    which hold the connection ``stall_s`` seconds at most) or the byte cap (the others).
    """
    from tests.servers.chat_server import Failure

    return {
        "silent_after_headers": Failure.stall_after_headers(stall_s),
        "trickled_body": Failure.trickle(every=0.3, seconds=stall_s),
        "trickled_headers": Failure.trickle(every=0.3, seconds=stall_s, in_headers=True),
        "endless_chunked": Failure.endless(limit=256 << 20),
        "huge_200MB": Failure.huge(200 << 20),
        "deep_200k": Failure.deep(200_000),
        "million_choices": Failure.many_choices(1_000_000),
    }


if __name__ == "__main__":  # python tests/hostile_corpus.py OUT: write the corpus to look at
    import sys
    import time

    t = time.perf_counter()
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "hostile")
    files = media_corpus(root / "media")
    texts = text_corpus(root / "text", root / "media")
    size = sum(p.stat().st_size for p in files) + sum(p.stat().st_size for p in texts.values())
    print(f"{len(files)} media files, {len(texts)} text files, {size / 1e6:.1f} MB in {time.perf_counter() - t:.1f} s")
