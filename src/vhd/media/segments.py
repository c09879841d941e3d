"""Split a video into time segments in one streaming decode (``vhd annotate --segments``).

Every frame is decoded once, in order, and reduced to a cheap feature: a 64-bin colour histogram
of the frame scaled down to 32x24 (4 levels per channel). A *hard cut* is a frame whose histogram
differs from the previous frame's by at least ``threshold`` (half the L1 distance, in ``[0, 1]``).
A segment ends at a cut once it is at least ``min_s`` long, and is split whenever it reaches
``max_s`` (so a long shot becomes pieces of ``max_s``); ``detect="windows"`` ignores cuts and
gives fixed windows of ``window_s``. While a segment streams by, a few of its frames are kept, at
a stride that doubles whenever more than ``2 x frames`` are held, and ``frames`` evenly spaced
ones among them represent it; so memory is flat in the video's length (at most ``2 x frames + 1``
pictures and one histogram are held), never all frames.

Times come from the decoded frames (``pts x time_base``), never from the container's duration or
frame-rate header, so a lying header, a variable frame rate or a stream without keyframes changes
nothing. A stream whose timestamps go backwards or are missing, or that decodes no frame, cannot
be segmented: `SegmentationError` says why, and the caller falls back to the whole-video protocol
(`vhd.media.video.read_frames`) with that reason recorded.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.errors import MediaError, MissingDependencyError
from vhd.media.segmentplan import (
    DEFAULT_MAX_SEGMENTS,
    DETECT,
    SegmentSettings,
    fewest_segments,
    segment_bound,
)
from vhd.media.untrusted import DEFAULT_MAX_FRAME_PIXELS
from vhd.media.videoframes import checked_stream, decode_strictly, frame_indices, upright
from vhd.media.videoopen import declared_seconds, gate_video, open_gated

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "DEFAULT_MAX_SEGMENTS",
    "DETECT",
    "SegmentSettings",
    "SegmentationError",
    "VideoSegment",
    "fewest_segments",
    "histogram_distance",
    "iter_segments",
    "segment_bound",
    "segments_from_frames",
]

FEATURE_SIZE = (32, 24)
"""Width and height a frame is scaled to for its histogram."""


class SegmentationError(MediaError):
    """A video that cannot be segmented from its decoded timestamps (the caller falls back)."""


@dataclass
class VideoSegment:
    """One segment of a video with the frames that represent it.

    Attributes:
        index: 0-based position in the video.
        start_s: Timestamp of its first frame, in seconds.
        end_s: Timestamp of the next segment's first frame (for the last: its last frame's
            timestamp plus that frame's duration), exclusive.
        images: Up to ``frames`` upright RGB frames, in time order.
        times: Each image's timestamp (same order).
        frame_count: Frames decoded in the segment.
        cut: Why it starts here: ``start`` (the video's first frame), ``cut`` (a hard cut),
            ``max`` (the previous segment reached ``max_s``) or ``window``.
        stopped: Set on the last segment when the video goes on past it but is cut into no more
            (`segment_bound`): why, in words. None otherwise.
        video_s: The video's length as its header declares it (a hint, for progress; None: unknown).
    """

    index: int
    start_s: float
    end_s: float
    images: list[Image.Image] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    frame_count: int = 0
    cut: str = "start"
    stopped: str | None = None
    video_s: float | None = None


def histogram_distance(a: Any, b: Any) -> float:
    """Half the L1 distance of two normalised histograms: 0 (same) to 1 (disjoint)."""
    return float(abs(a - b).sum()) / 2.0


def _histogram(frame: Any) -> Any:
    """A decoded frame's 64-bin colour histogram (4 levels a channel), normalised to sum 1."""
    import numpy as np

    pixels = frame.reformat(width=FEATURE_SIZE[0], height=FEATURE_SIZE[1], format="rgb24").to_ndarray()
    levels = (pixels >> 6).astype(np.int64)
    codes = (levels[..., 0] << 4) | (levels[..., 1] << 2) | levels[..., 2]
    counts = np.bincount(codes.ravel(), minlength=64).astype(np.float64)
    return counts / counts.sum()


class _Keeper:
    """The frames kept for one segment while it streams by, at a doubling stride."""

    def __init__(self, want: int, side: int | None = None) -> None:
        self.want = want
        self.side = side
        self.stride = 1
        self.seen = 0
        self.kept: list[tuple[float, Any]] = []

    def offer(self, t: float, frame: Any) -> None:
        if self.seen % self.stride == 0:
            image = upright(frame.to_image(), int(frame.rotation or 0))
            if self.side is not None:  # what the encoder would make of it, kept instead of the full frame
                from vhd.media.image import fit_image

                image = fit_image(image, self.side)
            self.kept.append((t, image))
            if len(self.kept) > 2 * self.want:
                self.kept = self.kept[::2]
                self.stride *= 2
        self.seen += 1

    def chosen(self) -> list[tuple[float, Any]]:
        picks = frame_indices(len(self.kept), self.want, len(self.kept) or 1)
        return [self.kept[i] for i in picks]


def _import_av() -> Any:
    try:
        import av
    except ImportError as exc:
        raise MissingDependencyError("av", "video") from exc
    return av


def iter_segments(
    path: str | Path,
    settings: SegmentSettings | None = None,
    *,
    max_pixels: int | None = DEFAULT_MAX_FRAME_PIXELS,
) -> Generator[VideoSegment, None, None]:
    """Decode a video once and yield its segments in time order, each as soon as it ends.

    Args:
        path: The video file (MP4/MOV, WebM/MKV or AVI).
        settings: How to cut; defaults to `SegmentSettings()`.
        max_pixels: Largest frame accepted, width x height (None: no limit).

    Yields:
        Each segment with its representative frames; the file stays open until the generator
        is exhausted or closed.

    Raises:
        SegmentationError: Timestamps go backwards or are missing, or no frame decodes.
        MediaError: The file is unreadable, damaged, or its frames are over ``max_pixels``.
        MissingDependencyError: PyAV is not installed.
    """
    settings = settings or SegmentSettings()
    path = Path(path)
    av, demuxer = _import_av(), gate_video(path, max_pixels)
    with open_gated(path, demuxer, max_pixels) as container:
        stream = checked_stream(container, max_pixels)
        try:
            rate = stream.average_rate or stream.guessed_rate
            yield from segments_from_frames(
                decode_strictly(container, stream, max_pixels),
                settings,
                time_base=stream.time_base,
                rate=float(rate) if rate else None,
                declared_s=declared_seconds(container, stream),
            )
        except (av.error.FFmpegError, OSError, ValueError, EOFError, RuntimeError) as exc:
            if isinstance(exc, MediaError):
                raise
            raise MediaError(f"cannot decode video ({type(exc).__name__}: {exc})") from exc


def segments_from_frames(
    frames: Iterable[Any],
    settings: SegmentSettings,
    *,
    time_base: Any = None,
    rate: float | None = None,
    declared_s: float | None = None,
) -> Iterator[VideoSegment]:
    """Cut decoded frames into segments as they stream by (the core of `iter_segments`).

    Args:
        frames: Decoded PyAV video frames in decoding order (anything with ``pts``,
            ``time_base``, ``duration``, ``rotation``, ``reformat`` and ``to_image``).
        settings: How to cut.
        time_base: The stream's time base, for frames that carry none.
        rate: The stream's nominal frame rate, only to give a last frame without a duration
            one frame's length.
        declared_s: The video's length as its header declares it: only bounds the segments
            (`segment_bound`), never places them.

    Yields:
        Each segment as soon as the frame after it (or the end) is seen; at most `segment_bound`
        of them (the last then says why in ``stopped``, and the rest of the video is not decoded).

    Raises:
        SegmentationError: A frame has no timestamp, timestamps go backwards, or there is no
            frame at all.
    """
    index = 0
    start = last_t = first = 0.0
    last_duration = 0.0
    reason = "start"
    keeper = _Keeper(settings.frames, settings.keep_side)
    previous: Any = None
    count = 0
    limit = segment_bound(settings, declared_s)
    floor = settings.floor_for(declared_s)
    scale, budget = 1, floor  # the stretch of this segment; where the next may start at the earliest
    for k, frame in enumerate(frames):
        if frame.pts is None:
            raise SegmentationError(f"frame {k} has no timestamp, so its time is unknown")
        base = frame.time_base or time_base
        if base is None:
            raise SegmentationError(f"frame {k} has no time base, so its time is unknown")
        t = float(frame.pts * base)
        if not math.isfinite(t):
            raise SegmentationError(f"frame {k} has a timestamp that is not a number ({t})")
        if k == 0:
            start = first = t
        elif t < last_t:
            raise SegmentationError(f"timestamps go backwards at frame {k} ({last_t:.3f} s, then {t:.3f} s)")
        else:
            last_duration = t - last_t
        new: str | None = None
        if k > 0:
            length = t - start
            if settings.detect == "windows":
                new = "window" if length >= settings.window_s * scale else None
            else:
                feature = _histogram(frame)
                if (
                    length >= settings.min_s * scale
                    and t - first >= budget
                    and histogram_distance(feature, previous) >= settings.threshold
                ):
                    new = "cut"
                elif length >= settings.max_s * scale:
                    new = "max"
                previous = feature
        elif settings.detect != "windows":
            previous = _histogram(frame)
        if new is not None:
            if limit is not None and index + 1 >= limit:
                yield _finish(index, start, t, keeper, count, reason, _stopped(settings, limit, declared_s))
                return  # the rest is neither decoded nor judged
            yield _finish(index, start, t, keeper, count, reason, video_s=declared_s)
            index, start, count, reason = index + 1, t, 0, new
            scale = settings.scale(index)
            budget += floor * scale
            keeper = _Keeper(settings.frames, settings.keep_side)
        keeper.offer(t, frame)
        count += 1
        last_t = t
        if frame.duration and base:
            last_duration = float(frame.duration * base)
    if count == 0:
        raise SegmentationError("the video stream decodes no frame (a zero-length stream)")
    tail = last_duration or (1.0 / rate if rate else 0.0) or 1e-3
    yield _finish(index, start, last_t + tail, keeper, count, reason, video_s=declared_s)


def _stopped(settings: SegmentSettings, limit: int, declared_s: float | None) -> str:
    """Why a video's segments stop though its frames go on."""
    if settings.max_segments is not None and limit >= settings.max_segments:
        return f"a video is cut into at most {limit} segments (max_segments_per_video)"
    return f"its frames go on past the {declared_s:g} s its header declares ({limit} segments at most)"


def _finish(
    index: int,
    start: float,
    end: float,
    keeper: _Keeper,
    count: int,
    reason: str,
    stopped: str | None = None,
    video_s: float | None = None,
) -> VideoSegment:
    chosen = keeper.chosen()
    return VideoSegment(
        index=index,
        start_s=round(start, 6),
        end_s=round(end, 6),
        images=[image for _, image in chosen],
        times=[round(t, 6) for t, _ in chosen],
        frame_count=count,
        cut=reason,
        stopped=stopped,
        video_s=video_s,
    )
