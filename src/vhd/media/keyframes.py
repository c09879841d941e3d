"""The keyframe-aware frame plan behind `vhd.media.video.read_frames`.

Decoding a video forward to frame 3,999 to keep five frames costs thousands of decoded frames;
seeking to each wanted frame instead can cost more when keyframes are far apart. This plan
does what is cheapest without ever trusting the container blindly:

1. Scan the packets of the window (demuxing only, nothing decoded): their presentation
   timestamps, sorted, give the exact frame count and the timestamp of every frame index;
   the keyframe packets give where decoding may start.
2. For each wanted frame, seek to the last keyframe at or before it only when that keyframe
   lies after the current decoding position (by at least `MIN_SKIP` frames); otherwise
   decode forward.
3. Check every decoded frame against the scanned timestamps, in order. Anything unexpected
   (a seek landing elsewhere, a dropped or extra frame, a first frame that is not a keyframe)
   abandons the plan, and the caller decodes forward from the start instead.

The plan is used only where it can help: when no keyframe would let it skip frames, the caller
decodes forward (same frames, one pass, no seeks).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vhd.media.videoframes import (
    REWIND,
    VideoFrames,
    bounded,
    check_frame_size,
    duration_s,
    frame_indices,
    observed_total,
    strict,
    tolerance,
    upright,
)

if TYPE_CHECKING:
    from PIL import Image

SEEKABLE_CODECS = frozenset({"h264", "hevc", "vp9", "av1"})
"""Codecs whose keyframe flags and one-frame-per-packet layout the keyframe plan trusts; other
codecs (MPEG-4 Part 2 with packed B-frames, VP8 alt-ref frames, ...) are decoded forward."""

REORDER_MARGIN = 64
"""Packets scanned past the window, so that frames reordered by B-frames are all seen."""

MIN_SKIP = 30
"""A seek is made only when it skips at least this many frames: a seek flushes the decoder
(and its frame threads), so skipping a handful of frames is not worth one."""


@dataclass(frozen=True)
class PacketScan:
    """What scanning a video stream's packets (without decoding) found.

    Attributes:
        pts: Presentation timestamps of the scanned frames, sorted: ``pts[i]`` is frame ``i``.
        keyframes: Frame indices of keyframe packets, sorted.
        complete: The scan reached the end of the stream (``len(pts)`` is the frame count).
    """

    pts: list[int]
    keyframes: list[int]
    complete: bool


class _Untrusted(Exception):
    """The plan cannot be trusted for this file; decode forward instead."""


def scan_packets(container: Any, stream: Any, limit: int) -> PacketScan:
    """Demux up to ``limit`` packets of a stream and index their frames.

    Args:
        container: An open PyAV input container.
        stream: Its video stream.
        limit: Stop after this many frame packets.

    Returns:
        The frames' timestamps and keyframe positions.

    Raises:
        _Untrusted: A packet has no timestamp, is corrupt, or two frames share a timestamp.
    """
    stamps: list[int] = []
    key_stamps: list[int] = []
    complete = True
    for packet in container.demux(stream):
        if packet.size == 0:  # the demuxer's end-of-stream flush packet
            continue
        if packet.pts is None or packet.is_corrupt:
            raise _Untrusted
        if packet.is_discard:  # dropped by the decoder (edit lists): not a frame
            continue
        stamps.append(int(packet.pts))
        if packet.is_keyframe:
            key_stamps.append(int(packet.pts))
        if len(stamps) >= limit:
            complete = False
            break
    ordered = sorted(stamps)
    if len(set(ordered)) != len(ordered):
        raise _Untrusted
    position = {p: i for i, p in enumerate(ordered)}
    return PacketScan(ordered, sorted(position[p] for p in key_stamps), complete)


def _plan_total(container: Any, stream: Any, scan: PacketScan, first: int, fps: float | None) -> tuple[int, int]:
    """Return (frames to plan on, total frames to report), as forward decoding would find them.

    Raises:
        _Untrusted: The scan disagrees with the container, or the file looks cut short (the
            forward decoder then gives the right error).
    """
    count = len(scan.pts)
    reported = int(stream.frames or 0)
    if reported > 0:
        if (scan.complete and count != reported) or (not scan.complete and reported < count):
            raise _Untrusted
        return reported, reported
    duration = duration_s(container, stream)
    estimate = round(duration * fps) if duration and fps else 0
    if scan.complete and stream.time_base is not None:
        span = float((scan.pts[-1] - scan.pts[0]) * stream.time_base) if scan.pts else 0.0
        estimate = observed_total(duration, span, count) or estimate
    actual = count if scan.complete else first
    expected = min(estimate, first)
    if estimate > 0 and expected - min(actual, first) > tolerance(expected):
        raise _Untrusted  # far fewer frames than the duration promises: cut short
    total = count if scan.complete else max(estimate, first)
    return min(actual, first), total


def _useful(plan: list[int], keyframes: list[int]) -> bool:
    """Whether some keyframe lets decoding skip frames on the way to a wanted frame."""
    position = 0
    for index in plan:
        k = keyframes[bisect.bisect_right(keyframes, index) - 1] if keyframes else -1
        if k - position >= MIN_SKIP:
            return True
        position = index + 1
    return False


def try_plan(container: Any, n: int, first: int, max_pixels: int | None = None) -> tuple[VideoFrames | None, Any]:
    """Read the planned frames of an open video with the keyframe plan, if it applies.

    Args:
        container: An open PyAV input container (nothing read from it yet).
        n: Frames wanted.
        first: Only frames ``0 .. first - 1`` are considered.
        max_pixels: Largest frame accepted (width x height; None: no limit).

    Returns:
        ``(frames, None)`` when the plan found them: exactly those forward decoding gives.
        Otherwise ``(None, start)``, where ``start`` says how the container may be reused
        for forward decoding: `vhd.media.videoframes.REWIND` when nothing was read from it, the
        first frame's timestamp to seek back to after a scan, or None when it should not be
        reused (open the file again).
    """
    import av

    try:
        if not container.streams.video:
            return None, REWIND
        stream = container.streams.video[0]
        if stream.codec_context is None:  # no decoder (a damaged codec description): forward decoding names it
            return None, REWIND
        bounded(stream, max_pixels)  # a frame over the limit: refused here, before any is decoded
        if stream.codec_context.codec.canonical_name not in SEEKABLE_CODECS:
            return None, REWIND
        # Strict decoding: a damaged frame abandons the plan, and forward decoding names the damage.
        # Seeking into an open GOP also abandons it (the leading pictures and reference marking
        # refer to frames before the keyframe, which FFmpeg's strict check reports as errors).
        strict(stream)
        scan = scan_packets(container, stream, first + REORDER_MARGIN)
        if not scan.pts:
            return None, None
        planned = _read(container, stream, scan, n, first, max_pixels)
        return planned, (None if planned is not None else scan.pts[0])
    except (_Untrusted, av.error.FFmpegError, OSError, ValueError, EOFError, RuntimeError):
        return None, None


def _read(
    container: Any, stream: Any, scan: PacketScan, n: int, first: int, max_pixels: int | None
) -> VideoFrames | None:
    rate = stream.average_rate or stream.guessed_rate
    fps = float(rate) if rate else None
    plan_on, total = _plan_total(container, stream, scan, first, fps)
    plan = frame_indices(plan_on, n, first)
    if not plan or plan[-1] >= len(scan.pts) or not scan.keyframes or not _useful(plan, scan.keyframes):
        return None
    images, decoded, seeks = _decode_plan(container, stream, scan, plan, max_pixels)
    return VideoFrames(
        images=[images[i] for i in plan],
        indices=plan,
        total_frames=total,
        fps=fps,
        frames_decoded=decoded,
        method="keyframes",
        seeks=seeks,
    )


def _decode_plan(
    container: Any, stream: Any, scan: PacketScan, plan: list[int], max_pixels: int | None = None
) -> tuple[dict[int, Image.Image], int, int]:
    """Seek and decode along the plan, checking every frame against the scan.

    Returns:
        The kept frames by index, frames decoded, and seeks made.

    Raises:
        _Untrusted: A frame came out that the scan does not predict.
    """
    pts = scan.pts
    images: dict[int, Image.Image] = {}
    decoded = seeks = 0
    frames: Any = None
    expected = 0  # index of the next frame the decoder should produce
    fresh = False  # no frame decoded since the last seek
    for target in plan:
        k = scan.keyframes[bisect.bisect_right(scan.keyframes, target) - 1]
        if frames is None or k - expected >= MIN_SKIP:
            # Half a frame past the keyframe, so that rounding in the container's index
            # cannot land on the keyframe before it (seen on AVI).
            step = (pts[k + 1] - pts[k]) // 2 if k + 1 < len(pts) else 0
            container.seek(pts[k] + step, stream=stream, backward=True, any_frame=False)
            frames = iter(container.decode(stream))
            seeks += 1
            expected = k
            fresh = True
        while expected <= target:
            frame = next(frames, None)
            if frame is None or frame.pts is None:
                raise _Untrusted
            decoded += 1
            check_frame_size(frame.width, frame.height, max_pixels)  # a stream can change its size midway
            if fresh and frame.pts < pts[k]:
                continue  # a leading picture of an open GOP, shown before the keyframe
            if frame.pts != pts[expected] or (fresh and not frame.key_frame):
                raise _Untrusted
            fresh = False
            if expected == target:
                images[target] = upright(frame.to_image(), int(frame.rotation or 0))
            expected += 1
    return images, decoded, seeks
