"""A hostile corpus, built from code in seconds: corrupt media of every accepted kind, hostile text.

`media_corpus` writes, for each accepted image format and each video codec vhd decodes, one good
file and its corrupt variants: truncated at several points, bytes flipped in the header area
(first 1%) and in the payload (at 1/3), a zeroed block, a wrong extension, plus files that pose as
media (a playlist named ``.mp4``, zero bytes, a PNG header claiming huge dimensions) and pixel
bombs: an 8192 x 8192 H.264 clip and 7000 x 7000 animated GIF, APNG and WebP files of 30 frames
(kilobytes each, gigabytes decoded), a strobe (a cut at every frame) and a clip whose timestamps
start near 2^52 (its header's duration overflows). `text_corpus`
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
    for fmt, ext in (("GIF", ".gif"), ("PNG", ".png"), ("WEBP", ".webp")):
        put(f"bomb_animated_7000{ext}", animated_bomb(fmt))
    if videos:
        written.append(write_video_bomb(folder / "bomb_h264_8192.mp4"))
        written.append(strobe_video(folder / "strobe_every_frame.mp4", seconds=2.0))
        written.append(far_timestamps_video(folder / "timestamps_near_2p52.mkv"))
    return written


# --- pixel bombs: a few kilobytes that decode to gigabytes ------------------------------------

BOMB_SIDE = 8192
"""Side of the video bombs: 67 megapixels a frame, over the default frame limit (8K UHD, 33 megapixels)."""

ANIMATION_SIDE = 7000
"""Side of the animation bombs: 49 megapixels a frame, under the still-image limit (64) but over the frame limit."""


def video_bomb(
    encoder: str = "libx264", fmt: str = "mp4", size: int | tuple[int, int] = BOMB_SIDE, frames: int = 1
) -> bytes:
    """A clip of ``frames`` flat-coloured frames of ``size`` (one side, or width and height): kilobytes.

    H.264 (``libx264``, ultrafast, one thread) takes a second or two a frame at 8192 x 8192 and
    0.7 GB while encoding (`write_video_bomb` does it in a child process); VP9 (``libvpx-vp9``)
    takes far longer and is left to the benchmark.
    """
    import av

    width, height = (size, size) if isinstance(size, int) else size

    options = {
        "libx264": {"preset": "ultrafast", "tune": "zerolatency", "threads": "1"},
        "libvpx-vp9": {"deadline": "realtime", "cpu-used": "8", "lag-in-frames": "0", "threads": "1"},
        "libvpx": {"deadline": "realtime", "cpu-used": "16", "threads": "1"},
    }.get(encoder, {})
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as out:
        stream = out.add_stream(encoder, rate=12, options=options)
        stream.width, stream.height = width, height
        stream.pix_fmt = "yuv420p"
        frame = av.VideoFrame(width, height, "yuv420p")
        for plane, value in zip(frame.planes, (90, 100, 160), strict=True):
            plane.update(bytes([value]) * plane.buffer_size)
        for i in range(frames):
            frame.pts = i
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return buf.getvalue()


def write_video_bomb(path: Path, encoder: str = "libx264", fmt: str = "mp4", frames: int = 1) -> Path:
    """Write `video_bomb` (8192 x 8192) to ``path`` from a child process, so that its encoder's memory is not ours."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    code = (
        "import sys; from pathlib import Path; from tests.hostile_corpus import video_bomb; "
        "Path(sys.argv[1]).write_bytes(video_bomb(sys.argv[2], sys.argv[3], frames=int(sys.argv[4])))"
    )
    subprocess.run([sys.executable, "-c", code, str(path), encoder, fmt, str(frames)], check=True, cwd=root)
    return path


def _tile(fmt: str, side: int = 16) -> bytes:
    """A small drawn tile encoded by Pillow: the piece an animation bomb repeats."""
    buf = io.BytesIO()
    img = Image.fromarray(_frame(1, side))
    img = img.convert("P", palette=Image.Palette.ADAPTIVE, colors=16) if fmt == "GIF" else img
    img.save(buf, fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    return buf.getvalue()


def _gif_pieces(data: bytes) -> tuple[bytes, bytes]:
    """The global colour table and the first image's LZW data (code size + sub-blocks + terminator)."""
    flags = data[10]
    table_end = 13 + (3 * 2 ** ((flags & 7) + 1) if flags & 0x80 else 0)
    pos = table_end
    while data[pos] == 0x21:  # extensions: label, then sub-blocks
        pos += 2
        while data[pos]:
            pos += data[pos] + 1
        pos += 1
    assert data[pos] == 0x2C, "no image descriptor"
    start = pos + 10 + (3 * 2 ** ((data[pos + 9] & 7) + 1) if data[pos + 9] & 0x80 else 0)
    pos = start + 1
    while data[pos]:
        pos += data[pos] + 1
    return data[13:table_end], data[start : pos + 1]


def _spots(frames: int, side: int, tile: int) -> list[tuple[int, int]]:
    """Where each frame's tile goes: a diagonal across the canvas (even offsets, as WebP needs)."""
    step = max(2, (side - tile) // max(1, frames) // 2 * 2)
    return [(i * step, i * step) for i in range(frames)]


def animated_bomb(fmt: str, side: int = ANIMATION_SIDE, frames: int = 30) -> bytes:
    """An animated GIF, APNG or WebP whose canvas is ``side`` x ``side`` and whose frames are 16 x 16 tiles.

    Written chunk by chunk around tiles Pillow encodes, so it is built in milliseconds and weighs
    a few kilobytes; a decoder still composes every frame on the whole canvas.
    """
    tile = 16
    spots = _spots(frames, side, tile)
    if fmt == "GIF":
        table, lzw = _gif_pieces(_tile("GIF", tile))
        size_bits = max(0, (len(table) // 3).bit_length() - 2)
        out = b"GIF89a" + struct.pack("<HHBBB", side, side, 0x80 | 0x70 | size_bits, 0, 0) + table
        out += b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"  # loop forever
        for x, y in spots:
            out += b"\x21\xf9\x04\x04" + struct.pack("<H", 10) + b"\x00\x00"  # 0.1 s, keep the canvas
            out += b"\x2c" + struct.pack("<HHHHB", x, y, tile, tile, 0) + lzw
        return out + b"\x3b"
    if fmt == "PNG":
        return _apng(side, spots, tile)
    if fmt == "WEBP":
        data = _tile("WEBP", tile)
        assert data[12:16] == b"VP8L", "Pillow did not write a lossless WebP"
        vp8l = data[12 : 20 + struct.unpack("<I", data[16:20])[0]]

        def chunk(kind: bytes, payload: bytes) -> bytes:
            return kind + struct.pack("<I", len(payload)) + payload + (b"\x00" if len(payload) % 2 else b"")

        def u24(value: int) -> bytes:
            return value.to_bytes(3, "little")

        body = chunk(b"VP8X", b"\x02\x00\x00\x00" + u24(side - 1) + u24(side - 1))  # animation flag
        body += chunk(b"ANIM", b"\xff\xff\xff\xff\x00\x00")
        for x, y in spots:
            head = u24(x // 2) + u24(y // 2) + u24(tile - 1) + u24(tile - 1) + u24(100) + b"\x02"  # no blending
            body += chunk(b"ANMF", head + vp8l)
        return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body
    raise ValueError(f"no animation bomb in {fmt}")


def _apng(side: int, spots: list[tuple[int, int]], tile: int) -> bytes:
    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    def control(seq: int, width: int, height: int, x: int, y: int) -> bytes:
        return chunk(b"fcTL", struct.pack(">IIIIIHHBB", seq, width, height, x, y, 1, 10, 0, 0))

    whole = zlib.compressobj(9)
    row = bytes(side + 1)  # filter byte 0, then gray 0
    first = b"".join(whole.compress(row) for _ in range(side)) + whole.flush()
    small = zlib.compress(b"".join(b"\x00" + bytes([(x * 16) % 256 for x in range(tile)]) for _ in range(tile)), 9)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
    out += chunk(b"acTL", struct.pack(">II", len(spots), 0)) + control(0, side, side, 0, 0) + chunk(b"IDAT", first)
    seq = 1
    for x, y in spots[1:]:
        out += control(seq, tile, tile, x, y) + chunk(b"fdAT", struct.pack(">I", seq + 1) + small)
        seq += 2
    return out + chunk(b"IEND", b"")


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


# --- videos that cost calls or memory: strobes, stills, lying timestamps, growing frames -----


def strobe_video(path: Path, seconds: float = 4.0, fps: int = 10, side: int = 32) -> Path:
    """A video whose colour flips every frame: a hard cut at every frame (with ``min_segment_s = 0``, one per frame)."""
    import av

    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=fps, options={"preset": "ultrafast", "threads": "1"})
        stream.width = stream.height = side
        stream.pix_fmt = "yuv420p"
        for i in range(round(seconds * fps)):
            pixels = np.zeros((side, side, 3), np.uint8)
            pixels[:] = (230, 20, 20) if i % 2 == 0 else (20, 20, 230)
            for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def still_video(path: Path, seconds: float = 600.0, fps: float = 0.5, side: int = 32) -> Path:
    """One still picture for ``seconds`` (a long shot with no cut): bytes, however long it lasts."""
    import fractions

    import av

    base = fractions.Fraction(1, 1000)
    with av.open(str(path), "w", format="matroska") as out:
        stream = out.add_stream("mjpeg", rate=fractions.Fraction(fps).limit_denominator(1000))
        stream.width = stream.height = side
        stream.pix_fmt = "yuvj420p"
        stream.time_base = base
        for i in range(round(seconds * fps)):
            frame = av.VideoFrame.from_ndarray(np.full((side, side, 3), 120, np.uint8), format="rgb24")
            frame.pts, frame.time_base = round(i / fps * 1000), base
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def far_timestamps_video(path: Path, start: int = 2**52, frames: int = 10) -> Path:
    """A Matroska clip whose timestamps start near 2^52 ticks: its header's duration comes out negative."""
    import fractions

    import av

    base = fractions.Fraction(1, 25)
    with av.open(str(path), "w", format="matroska") as out:
        stream = out.add_stream("mjpeg", rate=25)
        stream.width = stream.height = 32
        stream.pix_fmt = "yuvj420p"
        stream.time_base = base
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(np.full((32, 32, 3), i * 20, np.uint8), format="rgb24")
            frame.pts, frame.time_base = start + i, base
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def growing_video(path: Path, sides: tuple[int, ...] = (64, 64, 2000, 64)) -> Path:
    """An AVI (Motion JPEG) whose header says 64x64 and whose frames are JPEGs of ``sides``: a frame grows midway.

    Each frame is its own JPEG, so a flat 12000 x 12000 one is a few megabytes that decode to 216 MB.
    """
    import fractions

    import av

    with av.open(str(path), "w", format="avi") as out:
        stream = out.add_stream("mjpeg", rate=10)
        stream.width = stream.height = 64
        stream.pix_fmt = "yuvj420p"
        for i, side in enumerate(sides):
            buf = io.BytesIO()
            Image.new("RGB", (side, side), (200, 30, 30)).save(buf, "JPEG", quality=50)
            packet = av.Packet(buf.getvalue())
            packet.stream, packet.pts, packet.dts = stream, i, i
            packet.time_base = fractions.Fraction(1, 10)
            out.mux(packet)
    return path


def deep_png(width: int = 16000, height: int = 16000) -> bytes:
    """A real 16-bit RGB PNG of ``width`` x ``height`` (all black): a megabyte or so that decodes to gigabytes.

    Named ``clip.mp4`` it poses as a video; FFmpeg would decode it (it reads PNG too).
    """

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    row = b"\0" * (1 + width * 6)
    packer = zlib.compressobj(9)
    body = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b"")
