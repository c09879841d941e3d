"""Where in a video a detector finds harm: frames sampled over the whole video, judged against human spans.

The VHD11K protocol shows a detector five frames of a video's start; to place harm in time a
frame-scoring detector is instead shown one frame every ``every_s`` seconds of the whole video
(`timeline_frames`: one streaming decode, times from the decoded frames, never the header), and
`vhd.detectors.base.Detector.predict_segments` turns its frame scores into harmful spans. A
detector that reports spans itself (the debate detector, from its verdict's segments) needs no
frames. `segment_truth` says which videos of a benchmark have human spans to compare with, and
`evaluate_segments` (in `vhd.bench.evaluate`) scores them with `vhd.bench.metrics.segments`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vhd.records import Kind, Segment

if TYPE_CHECKING:
    from vhd.bench.data import BenchItem
    from vhd.media.encoded import EncodedImage
    from vhd.media.load import MediaSettings

EVERY_S = 1.0
"""Seconds between the frames a frame-scoring detector is shown for segments."""

MAX_FRAMES = 1800
"""The most frames kept for one video: past it, every other one is dropped and the step doubles."""


@dataclass
class Timeline:
    """Frames sampled over a whole video.

    Attributes:
        times: Each frame's time in seconds, from its decoded timestamp.
        images: The frames, prepared as for the models.
        end_s: Where the last decoded frame ends (its time plus one frame).
        every_s: The step between frames in the end (doubled for long videos).
    """

    times: list[float] = field(default_factory=list)
    images: list[EncodedImage] = field(default_factory=list)
    end_s: float = 0.0
    every_s: float = EVERY_S


def timeline_frames(
    path: str | os.PathLike[str],
    settings: MediaSettings | None = None,
    *,
    every_s: float = EVERY_S,
    max_frames: int = MAX_FRAMES,
) -> Timeline:
    """One frame every ``every_s`` seconds of a video file, in one streaming decode.

    Frames whose timestamp is missing or goes backwards are skipped; at most ``max_frames`` are
    kept (the step doubles past it), so memory stays bounded in the video's length.

    Raises:
        MediaError: The file cannot be decoded, or has no timestamped frame.
        ValueError: ``every_s`` is not positive.
    """
    from vhd.errors import MediaError
    from vhd.media.image import encode_image
    from vhd.media.load import MediaSettings
    from vhd.media.videoframes import checked_stream, decode_strictly
    from vhd.media.videoopen import open_video

    if not every_s > 0:
        raise ValueError(f"every_s must be positive, got {every_s}")
    settings = settings or MediaSettings()
    try:
        import av
    except ImportError as exc:
        from vhd.errors import MissingDependencyError

        raise MissingDependencyError("av", "video") from exc
    out = Timeline(every_s=every_s)
    last: float | None = None
    step = 0.0
    try:
        limit = settings.limits.effective_max_frame_pixels
        with open_video(path, limit) as container:  # the run's gate, so what a run refuses is refused here
            stream = checked_stream(container, limit)
            for frame in decode_strictly(container, stream, limit):
                t = frame.time
                if t is None or (last is not None and t <= last):
                    continue
                step = t - last if last is not None else step
                last = t
                if out.times and t < out.times[-1] + out.every_s:
                    continue
                image = encode_image(frame.to_image(), settings.max_side, settings.fmt, settings.quality)
                out.times.append(float(t))
                out.images.append(image)
                if len(out.times) > max_frames:
                    out.times, out.images = out.times[::2], out.images[::2]
                    out.every_s *= 2
    except MediaError as exc:
        raise MediaError(f"{path}: cannot sample frames over time ({exc})") from exc
    except (av.error.FFmpegError, OSError, ValueError, EOFError, RuntimeError) as exc:
        raise MediaError(f"{path}: cannot sample frames over time ({exc})") from exc
    if last is None:
        raise MediaError(f"{path}: no frame with a timestamp, so no time line")
    out.end_s = last + (step if step > 0 else every_s)
    return out


def segment_truth(items: Sequence[BenchItem]) -> list[list[Segment] | None]:
    """Each item's human spans for the segment metrics, or None where it has none to compare.

    Only when some video's label carries spans: a video with spans gives them, an unharmful
    video gives none (no harm anywhere), and a harmful video without spans, or an image, is
    left out (None). Without any labelled span every entry is None.
    """
    if not any(i.kind is Kind.VIDEO and i.segments is not None for i in items):
        return [None] * len(items)
    out: list[list[Segment] | None] = []
    for item in items:
        if item.kind is not Kind.VIDEO:
            out.append(None)
        elif item.segments is not None:
            out.append([s for s in item.segments if s.harmful is True])
        else:
            out.append([] if not item.harmful else None)
    return out


def wants_timeline(item: BenchItem, truth: list[Segment] | None) -> bool:
    """Whether a sample gets frames over time: a video file whose label can be compared in time."""
    return truth is not None and item.kind is Kind.VIDEO and not os.path.isdir(item.path)


def timeline_identity(every_s: float = EVERY_S) -> dict[str, Any]:
    """What segment predictions add to a prediction-cache key (a cached prediction without them is not reused)."""
    return {"timeline_every_s": every_s, "timeline_max_frames": MAX_FRAMES}
