"""The one way a video file is opened for reading: the gate, then FFmpeg with bounded probing.

`gate_video` runs before any decoder sees the file (its content sniffed, one demuxer chosen, the
frame size its header declares checked); `open_gated` opens what it let through with that demuxer;
`open_video` is both, for every reader (the run's, the dry run's, a benchmark's time line,
provenance tags). ``tests/media/test_one_gate.py`` checks that no module outside `vhd.media`
calls ``av.open`` to read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vhd.errors import MediaError, MissingDependencyError
from vhd.media.untrusted import DEFAULT_MAX_FRAME_PIXELS, HEAD_BYTES, video_demuxer, video_refusal
from vhd.media.videoframes import check_frame_size, duration_s, error_reason
from vhd.media.videosize import declared_frame_size

__all__ = ["declared_seconds", "gate_video", "open_gated", "open_video"]


def gate_video(path: Path, max_pixels: int | None) -> str:
    """The checks a video file passes before any decoder sees it; returns the demuxer it may be opened with.

    Reads the file's first bytes once: an unreadable or empty file, a container that is not an
    allowed video format, or a frame size its header declares over ``max_pixels`` is refused.

    Raises:
        MediaError: One line saying why.
    """
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError as exc:
        raise MediaError(f"cannot read file ({error_reason(exc)})") from exc
    if size == 0:
        raise MediaError("empty file (0 bytes)")
    demuxer = video_demuxer(head)
    if demuxer is None:
        raise MediaError(video_refusal(head))
    declared = declared_frame_size(path, demuxer)
    if declared is not None:  # before FFmpeg opens it: opening already decodes a frame or more of some codecs
        check_frame_size(*declared, max_pixels)
    return demuxer


def open_gated(path: Path, demuxer: str, max_pixels: int | None) -> Any:
    """Open a file `gate_video` let through, with the one demuxer it chose (a PyAV container).

    ``max_pixels`` is checked by `vhd.media.videoframes.checked_stream` once the stream is opened
    (FFmpeg's probe found the size its own headers give), and by the decoder itself after that.

    Raises:
        MediaError: PyAV or FFmpeg cannot open it.
        MissingDependencyError: PyAV is not installed.
    """
    try:
        import av
    except ImportError as exc:
        raise MissingDependencyError("av", "video") from exc
    try:
        return av.open(str(path), format=demuxer)
    except (av.error.FFmpegError, OSError, ValueError, EOFError, RuntimeError) as exc:
        raise MediaError(f"cannot open video ({error_reason(exc)})") from exc


@contextmanager
def open_video(path: str | os.PathLike[str], max_pixels: int | None = DEFAULT_MAX_FRAME_PIXELS) -> Iterator[Any]:
    """The one way to open a video file for reading: the gate, then the container (closed on exit).

    Every reader outside `vhd.media` goes through this (the dry run's durations, a benchmark's
    time line, provenance tags): `gate_video` first (content sniffed, the header's frame size
    checked, before FFmpeg sees a byte), then `open_gated`. Pass the container to `checked_stream`
    before decoding; a reader of metadata only needs neither.

    Raises:
        MediaError: The file is refused by the gate or cannot be opened.
        MissingDependencyError: PyAV is not installed.
    """
    gated = Path(path)
    container = open_gated(gated, gate_video(gated, max_pixels), max_pixels)
    with container:
        yield container


def declared_seconds(container: Any, stream: Any) -> float | None:
    """A stream's duration as its headers declare it (`duration_s`), or None when it is not a usable length.

    A header is untrusted: a duration that is not a finite positive number of seconds (timestamps
    near 2^63 that overflow, a negative span, NaN) counts as unknown, never as a length.
    """
    try:
        seconds = duration_s(container, stream)
    except (ArithmeticError, TypeError, ValueError):
        return None
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return None
    return seconds
