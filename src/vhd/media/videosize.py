"""The frame size a video file declares, read from its container's header without FFmpeg.

A video's pixel limit (`vhd.media.image.ImageLimits.max_frame_pixels`) is checked here first,
before FFmpeg opens the file: opening it already decodes frames for some codecs (FFmpeg's stream
probe decodes up to several H.264 frames and one VP9 frame to learn their parameters), so an
8192 x 8192 clip would cost hundreds of megabytes before its size could be seen. Only the few
boxes or elements that hold the size are read, by seeking past everything else:

- MP4 / MOV: the width and height of every visual sample entry (``stsd``) and track header
  (``tkhd``) of video tracks (``hdlr`` ``vide``);
- WebM / Matroska: ``PixelWidth`` and ``PixelHeight`` of every video track;
- AVI: the main header's (``avih``) and every stream format's (``strf``) width and height.

A header can lie, so the decoder's own size is checked again when the file is opened, and every
frame's when it is decoded (`vhd.media.videoframes.check_frame_size`); this check only makes the
common bomb, whose header tells the truth, cost nothing.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import BinaryIO, Final

MAX_BOXES: Final = 4096
"""Boxes or elements read per file before giving up (a header made of millions of tiny boxes)."""

MAX_DEPTH: Final = 4
"""Nesting followed below a track (``mdia`` > ``minf`` > ``stbl``) or an AVI header list: no deeper."""

_EBML_SEGMENT: Final = 0x18538067
_EBML_TRACKS: Final = 0x1654AE6B
_EBML_TRACK_ENTRY: Final = 0xAE
_EBML_VIDEO: Final = 0xE0
_EBML_PIXEL_WIDTH: Final = 0xB0
_EBML_PIXEL_HEIGHT: Final = 0xBA
_EBML_CLUSTER: Final = 0x1F43B675


class _Budget:
    def __init__(self) -> None:
        self.left = MAX_BOXES

    def spend(self) -> bool:
        self.left -= 1
        return self.left >= 0


def declared_frame_size(path: str | os.PathLike[str], demuxer: str) -> tuple[int, int] | None:
    """The largest frame (width, height) a video's header declares, or None when it says nothing readable.

    Args:
        path: The video file.
        demuxer: The demuxer `vhd.media.untrusted.video_demuxer` chose: ``mov``, ``matroska`` or ``avi``.
    """
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            sizes: list[tuple[int, int]] = []
            if demuxer == "mov":
                _mp4(fh, size, sizes)
            elif demuxer == "matroska":
                _matroska(fh, size, sizes)
            elif demuxer == "avi":
                _avi(fh, size, sizes)
    except (OSError, ValueError, struct.error):
        return None
    sizes = [(w, h) for w, h in sizes if w > 0 and h > 0]
    return max(sizes, key=lambda s: s[0] * s[1]) if sizes else None


# --- MP4 / MOV -------------------------------------------------------------------------------


def _boxes(fh: BinaryIO, start: int, end: int, budget: _Budget) -> Iterator[tuple[bytes, int, int]]:
    """The boxes in ``[start, end)`` as ``(type, body start, end)``; stops at the first that does not fit."""
    pos = start
    while pos + 8 <= end and budget.spend():
        fh.seek(pos)
        head = fh.read(16)
        if len(head) < 8:
            return
        length, kind = struct.unpack(">I4s", head[:8])
        body = pos + 8
        if length == 1:  # a 64-bit size follows
            if len(head) < 16:
                return
            length, body = struct.unpack(">Q", head[8:16])[0], pos + 16
        elif length == 0:  # to the end of the enclosing box
            length = end - pos
        if length < body - pos or pos + length > end:
            return
        yield kind, body, pos + length
        pos += length


def _mp4(fh: BinaryIO, size: int, sizes: list[tuple[int, int]]) -> None:
    budget = _Budget()
    for kind, body, stop in _boxes(fh, 0, size, budget):
        if kind == b"moov":
            for inner, start, end in _boxes(fh, body, stop, budget):
                if inner == b"trak":
                    _mp4_track(fh, start, end, sizes, budget)


def _mp4_track(fh: BinaryIO, start: int, end: int, sizes: list[tuple[int, int]], budget: _Budget) -> None:
    """Add the sizes a video track declares (its header's and its sample entries')."""
    found: list[tuple[int, int]] = []
    handler = b""

    def walk(first: int, last: int, depth: int = 0) -> None:
        nonlocal handler
        for kind, body, stop in _boxes(fh, first, last, budget):
            if kind in (b"mdia", b"minf", b"stbl") and depth < MAX_DEPTH:
                walk(body, stop, depth + 1)
            elif kind == b"hdlr":
                fh.seek(body + 8)  # version and flags, pre_defined
                handler = fh.read(4)
            elif kind == b"tkhd":  # 16.16 fixed-point width and height after the matrix
                fh.seek(body)
                fh.seek(body + (88 if fh.read(1) == b"\x01" else 76))
                width, height = struct.unpack(">II", fh.read(8))
                found.append((width >> 16, height >> 16))
            elif kind == b"stsd":
                fh.seek(body + 4)  # version and flags
                (count,) = struct.unpack(">I", fh.read(4))
                entry = body + 8
                for _ in range(min(count, 16)):
                    fh.seek(entry)
                    head = fh.read(36)  # a visual sample entry: width and height at bytes 32-35
                    if len(head) < 36:
                        break
                    found.append(struct.unpack(">HH", head[32:36]))
                    length = struct.unpack(">I", head[:4])[0]
                    if length < 8:
                        break
                    entry += length

    walk(start, end)
    if handler == b"vide":
        sizes.extend(found)


# --- WebM / Matroska ---------------------------------------------------------------------------


def _vint(fh: BinaryIO, *, keep_marker: bool) -> tuple[int, int] | None:
    """An EBML variable-length integer: ``(value, bytes read)``; value -1 for an unknown size."""
    first = fh.read(1)
    if not first:
        return None
    byte = first[0]
    width = 1
    while width <= 8 and not byte & (0x80 >> (width - 1)):
        width += 1
    if width > 8:
        return None
    rest = fh.read(width - 1)
    if len(rest) < width - 1:
        return None
    value = byte if keep_marker else byte & (0xFF >> width)
    for b in rest:
        value = (value << 8) | b
    if not keep_marker and value == (1 << (7 * width)) - 1:
        return -1, width
    return value, width


def _elements(fh: BinaryIO, start: int, end: int, budget: _Budget) -> Iterator[tuple[int, int, int]]:
    """The elements in ``[start, end)`` as ``(id, body start, end)``; an unknown size runs to ``end``."""
    pos = start
    while pos < end and budget.spend():
        fh.seek(pos)
        ident = _vint(fh, keep_marker=True)
        length = _vint(fh, keep_marker=False) if ident is not None else None
        if ident is None or length is None:
            return
        body = pos + ident[1] + length[1]
        stop = end if length[0] < 0 else body + length[0]
        if stop > end:
            stop = end  # a truncated file: read what is there
        yield ident[0], body, stop
        if length[0] < 0:
            return  # nothing after an element of unknown size can be found without parsing it
        pos = stop


def _uint(fh: BinaryIO, start: int, stop: int) -> int:
    fh.seek(start)
    return int.from_bytes(fh.read(min(8, stop - start)), "big")


def _matroska(fh: BinaryIO, size: int, sizes: list[tuple[int, int]]) -> None:
    budget = _Budget()
    for ident, body, stop in _elements(fh, 0, size, budget):
        if ident != _EBML_SEGMENT:
            continue
        for child, start, end in _elements(fh, body, stop, budget):
            if child == _EBML_CLUSTER:
                return  # the tracks come before the first cluster
            if child != _EBML_TRACKS:
                continue
            for entry, first, last in _elements(fh, start, end, budget):
                if entry != _EBML_TRACK_ENTRY:
                    continue
                for part, video, video_end in _elements(fh, first, last, budget):
                    if part != _EBML_VIDEO:
                        continue
                    found = {
                        field: _uint(fh, at, until)
                        for field, at, until in _elements(fh, video, video_end, budget)
                        if field in (_EBML_PIXEL_WIDTH, _EBML_PIXEL_HEIGHT)
                    }
                    sizes.append((found.get(_EBML_PIXEL_WIDTH, 0), found.get(_EBML_PIXEL_HEIGHT, 0)))
        return


# --- AVI -------------------------------------------------------------------------------------


def _chunks(fh: BinaryIO, start: int, end: int, budget: _Budget) -> Iterator[tuple[bytes, int, int]]:
    """RIFF chunks in ``[start, end)`` as ``(id, body start, end)``; a ``LIST`` id is ``LIST`` + its type."""
    pos = start
    while pos + 8 <= end and budget.spend():
        fh.seek(pos)
        head = fh.read(12)
        if len(head) < 8:
            return
        kind, length = head[:4], struct.unpack("<I", head[4:8])[0]
        body, stop = pos + 8, min(end, pos + 8 + length)
        if kind == b"LIST" and len(head) == 12:
            kind, body = kind + head[8:12], body + 4
        yield kind, body, stop
        pos = pos + 8 + length + (length & 1)


def _avi(fh: BinaryIO, size: int, sizes: list[tuple[int, int]]) -> None:
    budget = _Budget()

    def walk(start: int, end: int, depth: int = 0) -> None:
        for kind, body, stop in _chunks(fh, start, end, budget):
            if kind in (b"LISThdrl", b"LISTstrl") and depth < MAX_DEPTH:
                walk(body, stop, depth + 1)
            elif kind == b"avih" and stop - body >= 40:  # MainAVIHeader: width, height at bytes 32-39
                fh.seek(body + 32)
                sizes.append(struct.unpack("<II", fh.read(8)))
            elif kind == b"strf" and stop - body >= 12:  # BITMAPINFOHEADER (audio formats are tiny numbers)
                fh.seek(body + 4)
                width, height = struct.unpack("<ii", fh.read(8))
                sizes.append((abs(width), abs(height)))  # a negative height: rows stored top-down

    walk(12, size)
