"""The frames that represent a video: which to pick, what a reader returns, and stream facts.

`frame_indices` says which frames represent a video and `VideoFrames` holds them. The helpers
below read what both frame readers need from a PyAV stream (its duration, a frame's rotation,
how far a frame count may be off, strict decoding): forward decoding (`vhd.media.video`) and the
keyframe plan (`vhd.media.keyframes`) share them here, below both.
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vhd.errors import ConfigError, MediaError
from vhd.media.untrusted import STRICT, frame_pixels_refusal

if TYPE_CHECKING:
    from PIL import Image

DEFAULT_FRAMES = 5
"""Frames shown to the models per video."""

DEFAULT_FIRST = 4000
"""Only the first this-many frames of a video are considered."""


@dataclass
class VideoFrames:
    """Frames chosen from one video.

    Attributes:
        images: The frames as upright RGB images, in chronological order.
        indices: The 0-based frame index of each image (same order).
        total_frames: The number of frames in the video as far as it is known: the count the
            container stores, else the count found by decoding when decoding reached the end,
            else an estimate from duration x frame rate.
        fps: Average frame rate, when the container gives one.
        frames_decoded: Frames decoded to get this result, over all passes (a cost measure;
            never more than ``first`` per pass).
        method: ``keyframes`` when the keyframe plan found the frames, ``decode`` when they
            were decoded forward from the start.
        seeks: Seeks made by the keyframe plan.
    """

    images: list[Image.Image]
    indices: list[int]
    total_frames: int
    fps: float | None
    frames_decoded: int = 0
    method: str = "decode"
    seeks: int = 0


def check_counts(n: int, first: int) -> None:
    """Check the frames wanted and the frame window.

    Raises:
        ConfigError: ``n`` or ``first`` is below 1.
    """
    if n < 1:
        raise ConfigError(f"the number of frames per video must be at least 1, got {n}")
    if first < 1:
        raise ConfigError(f"the frame window (first frames) must be at least 1, got {first}")


def frame_indices(total: int, n: int = DEFAULT_FRAMES, first: int = DEFAULT_FIRST) -> list[int]:
    """Return the indices of ``n`` evenly spaced frames among the first ``first`` frames.

    The result is ``round(linspace(0, T - 1, n))`` with ``T = min(total, first)``, computed as
    NumPy does (same floating-point steps, halves rounded to even). When ``T < n`` there are
    fewer frames than wanted and every frame is used once: the result is ``[0, ..., T - 1]``
    (the distinct values of the formula), so callers may get fewer than ``n`` indices.

    Args:
        total: Frames in the video; 0 or less gives an empty list.
        n: Frames wanted.
        first: Only frames ``0 .. first - 1`` are considered.

    Returns:
        Sorted, distinct indices in ``[0, min(total, first) - 1]``.

    Raises:
        ConfigError: ``n`` or ``first`` is below 1.
    """
    check_counts(n, first)
    count = min(total, first)
    if count <= 0:
        return []
    if count <= n:
        return list(range(count))
    if n == 1:
        return [0]
    step = (count - 1) / (n - 1)
    values = [round(float(i) * step) for i in range(n - 1)]
    return [*values, count - 1]


def _parse_clock(text: str) -> float | None:
    """Parse a Matroska ``DURATION`` tag such as ``00:01:02.500000000`` to seconds."""
    try:
        hours, minutes, seconds = text.strip().split(":")
        return int(hours) * 3600 + int(minutes) * 60 + float(seconds)
    except ValueError:
        return None


def duration_s(container: Any, stream: Any) -> float | None:
    """A video stream's duration in seconds: the stream's, a ``DURATION`` tag, else the container's."""
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    tag = stream.metadata.get("DURATION") or stream.metadata.get("duration")
    if tag:
        parsed = _parse_clock(tag)
        if parsed is not None:
            return parsed
    if container.duration is not None:
        return float(container.duration) / 1_000_000
    return None


def upright(image: Image.Image, rotation: int) -> Image.Image:
    """Rotate a frame by its display-matrix rotation (degrees counter-clockwise)."""
    from PIL import Image

    angle = rotation % 360
    if angle == 0:
        return image
    transpose = {
        90: Image.Transpose.ROTATE_90,
        180: Image.Transpose.ROTATE_180,
        270: Image.Transpose.ROTATE_270,
    }.get(angle)
    if transpose is not None:
        return image.transpose(transpose)
    return image.rotate(angle, expand=True, fillcolor=(0, 0, 0))


def observed_total(duration_s: float | None, span_s: float, count: int) -> int | None:
    """Estimate a stream's frame count from its duration and the frame rate seen in ``count`` frames.

    Containers without a frame count often give a nominal rate that is wrong for variable
    frame rate video; the frames' own timestamps are not.
    """
    if not duration_s or count < 2 or span_s <= 0:
        return None
    return round(duration_s * (count - 1) / span_s)


def tolerance(total: int) -> int:
    """How many frames short of the expected count still count as an estimate error."""
    return max(2, math.ceil(total * 0.02))


REWIND = object()
"""``start_pts`` value meaning: the container is reused untouched (nothing to rewind)."""


def strict(stream: Any) -> None:
    """Make a stream's decoder report the errors it would otherwise conceal (``err_detect=explode``).

    Call before the first frame is decoded. Without it FFmpeg hides corrupted data (a few flipped
    bytes in an H.264 stream) behind concealment, and a model would judge garbled frames.
    """
    stream.codec_context.options = {**stream.codec_context.options, **STRICT}


DECODE_THREADS = 4
"""Most threads one video's decoder uses. FFmpeg's default is one per core (up to 16), and with
frame threading each thread holds a frame of its own: 16 frames of an 8K video are 0.8 GB."""


def check_frame_size(width: int, height: int, max_pixels: int | None, *, decoded: bool = False) -> None:
    """Refuse a video frame size over ``max_pixels`` (None: no limit).

    Args:
        width: The frame's width.
        height: The frame's height.
        max_pixels: The limit.
        decoded: The size is a decoded frame's (the refusal then says so): a stream whose size
            changed midway in a way its decoder did not refuse first.

    Raises:
        MediaError: One line with the size, the limit and the setting that raises it.
    """
    if max_pixels is not None and width * height > max_pixels:
        raise MediaError(frame_pixels_refusal("video", width, height, max_pixels, decoded=decoded))


def decoder_limit(max_pixels: int) -> int:
    """The ``max_pixels`` FFmpeg's decoders are given for a frame limit of ``max_pixels``: twice it, and a margin.

    FFmpeg checks the size of the buffer it would allocate, whose width some decoders round up
    for alignment (a 96x64 H.264 frame counts as 128x64), so the exact limit would refuse frames
    that fit. A frame past this is never allocated; one between the limit and this is decoded
    once, then refused by the exact check, which says so (`check_frame_size` ``decoded``).
    """
    return 2 * max_pixels + 2**16


def bounded(stream: Any, max_pixels: int | None) -> None:
    """Check the frame size a stream's decoder was set up with, cap what it may decode, bound its threads.

    Call after the file is opened and before the first frame is decoded: the size is the one
    FFmpeg found in the stream's own headers (the container's may differ). The decoder is also
    given FFmpeg's own ``max_pixels`` option (`decoder_limit`), so a frame that grows far past
    the limit midway (a stream whose later frames say 12000x12000 after a 64x64 start) is refused
    by the decoder before its picture is allocated (`decode_strictly` names it), not decoded first.

    Raises:
        MediaError: The frame size is over ``max_pixels``.
    """
    context = stream.codec_context
    check_frame_size(int(context.width or 0), int(context.height or 0), max_pixels)
    if max_pixels is not None:
        context.options = {**context.options, "max_pixels": str(decoder_limit(max_pixels))}
    stream.thread_type = "AUTO"
    context.thread_count = min(DECODE_THREADS, os.cpu_count() or 1)


def checked_stream(container: Any, max_pixels: int | None) -> Any:
    """An opened file's first video stream, checked and set up for a strict, bounded decode.

    Call before the first frame is decoded (`bounded`, then `strict`).

    Raises:
        MediaError: No video stream, no decoder for it, or a frame size over ``max_pixels``.
    """
    if not container.streams.video:
        raise MediaError("no video stream (audio-only or data file)")
    stream = container.streams.video[0]
    if stream.codec_context is None:
        raise MediaError(
            "damaged: the video stream has no decoder (its codec description is unknown or damaged); "
            "re-download or re-encode it"
        )
    bounded(stream, max_pixels)
    strict(stream)
    return stream


_BIT_REVERSED = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))

FFV1_PROBE_PACKETS = 3
"""Packets in a row that fail the slice CRCs at the start of an FFV1 stream before it is taken
for a stream without slice CRCs (version 1, or encoded with ``slicecrc=0``)."""


def ffv1_slices_intact(data: bytes) -> bool:
    """Whether an FFV1 frame (one packet) is a chain of slices that each pass their CRC.

    In FFV1 version 3 with slice CRCs (FFmpeg's default for Matroska) every slice ends with a
    trailer: its size (3 bytes, big-endian, trailer excluded), an error status byte and a CRC-32
    (MSB-first, polynomial 0x04C11DB7, initial value 0) chosen so that the slice's CRC including
    it is 0. FFmpeg's decoder checks it, but only logs a mismatch and conceals the slice, whatever
    ``err_detect`` says, so the check is made here. The CRC is zlib's on bit-reversed bytes.
    """
    end = len(data)
    if end == 0:
        return False
    while end > 0:
        if end < 8:
            return False
        size = int.from_bytes(data[end - 8 : end - 5], "big") + 8
        if size > end or zlib.crc32(data[end - size : end].translate(_BIT_REVERSED), 0xFFFFFFFF) != 0xFFFFFFFF:
            return False
        end -= size
    return True


def _ffv1_checked(packets: Iterable[Any], name: str) -> Iterator[Any]:
    """The packets of an FFV1 stream, in order; a packet failing its slice CRCs is damage.

    Whether the stream carries slice CRCs at all is learnt from its first packets: the first that
    passes says it does (any failing packet held back before it is then damage); `FFV1_PROBE_PACKETS`
    failing in a row say it does not, and the rest pass unchecked.
    """
    held: list[Any] = []
    checked: bool | None = None  # None while not known
    for index, packet in enumerate(packets):
        if packet.size == 0 or checked is False:  # the end-of-stream flush packet, or no CRCs
            yield from held
            held.clear()
            yield packet
            continue
        intact = ffv1_slices_intact(bytes(packet))
        if intact and not held:
            checked = True
            yield packet
        elif checked or intact:  # a stream with CRCs: this packet, or the first one held back, failed
            raise MediaError(
                f"damaged: {name} video fails its slice checksum (CRC) in frame {index - len(held)}; "
                "its frames would be partly garbage, so it is skipped (re-download or re-encode it)"
            )
        else:
            held.append(packet)
            if len(held) >= FFV1_PROBE_PACKETS:
                checked = False
                yield from held
                held.clear()
    yield from held


def decode_strictly(container: Any, stream: Any, max_pixels: int | None = None) -> Iterator[Any]:
    """Decode a stream's frames in order (as ``container.decode(stream)``), damage as a `MediaError`.

    The stream must have been made `strict`. Errors of the container (demuxing) pass through
    unchanged, to be reported by the caller. FFV1 frames are also checked against their slice
    CRCs (`ffv1_slices_intact`), and every frame's size against ``max_pixels`` (a stream can
    change its size midway).

    Raises:
        MediaError: ``damaged: ...``, when the decoder finds invalid data or an FFV1 slice fails
            its CRC; or a frame over ``max_pixels``.
    """
    import av

    name = stream.codec_context.name or "video"
    packets: Iterable[Any] = container.demux(stream)
    if name == "ffv1":
        packets = _ffv1_checked(packets, name)
    decoded = 0
    context = stream.codec_context
    for packet in packets:
        size = (int(context.width or 0), int(context.height or 0))
        try:
            frames = packet.decode()
        except ValueError as exc:  # av.error.InvalidDataError and ArgumentError (EINVAL) both are
            if max_pixels is not None and size[0] and not context.width:
                # the decoder's size check (max_pixels, set by `bounded`) refused the frame before
                # allocating it: FFmpeg zeroes the size it refused (ff_set_dimensions)
                raise MediaError(grown_refusal(name, decoded, size, max_pixels)) from exc
            if isinstance(exc, av.error.InvalidDataError):
                raise MediaError(
                    f"damaged: {name} video has decoding errors near frame {decoded} (FFmpeg's strict check); "
                    "its frames would be partly garbage, so it is skipped (re-download or re-encode it)"
                ) from exc
            raise
        for frame in frames:
            decoded += 1
            check_frame_size(frame.width, frame.height, max_pixels, decoded=True)
            yield frame


def grown_refusal(codec: str, decoded: int, size: tuple[int, int], max_pixels: int) -> str:
    """The one-line reason a stream is refused when its decoder refused a frame over ``max_pixels``.

    Args:
        codec: The decoder's name.
        decoded: Frames decoded before the refused one.
        size: The frame size the decoder had until then (the stream's header, or its last frame).
        max_pixels: The limit.
    """
    return (
        f"{codec} video frame {decoded} grows past the frame limit of {max_pixels:,} pixels (the frames "
        f"before it were {size[0]}x{size[1]}; possible decompression bomb; refused before decoding that "
        "frame; raise max_frame_pixels to accept it)"
    )


def error_reason(exc: BaseException) -> str:
    """An exception as ``Type: message`` on one line, for a one-line media error."""
    text = " ".join(str(exc).split()) or "no details"
    return f"{type(exc).__name__}: {text}"
