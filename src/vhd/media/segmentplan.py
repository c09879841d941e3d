"""How a video is cut into segments, and how many segments that can make (`vhd.media.segments`).

`SegmentSettings` holds the cutting rules; `segment_bound` and `fewest_segments` count, from a
video's header, the most and fewest segments those rules cut it into. The run
(`vhd.media.segments.segments_from_frames`) and the dry run (`vhd.annotate.estimate`) both use
them, so the dry run's range holds what the run does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from vhd.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_SEGMENTS",
    "DETECT",
    "HEADER_SLACK",
    "MIN_AVERAGE_S",
    "SegmentSettings",
    "fewest_segments",
    "segment_bound",
]

DETECT = ("shots", "windows")
"""How segments are cut: ``shots`` (hard cuts, bounded by min/max length) or ``windows`` (fixed)."""

DEFAULT_MAX_SEGMENTS = 500
"""Most segments one video is cut into by default (``[video] max_segments_per_video``)."""

MIN_AVERAGE_S = 1.0
"""Seconds a segment lasts at least on average, whatever ``min_s`` (down to 0) allows for one cut."""

HEADER_SLACK = 0.02
"""How far (a share of its length, at least 1 s) a video may run past its header's duration before
its segments stop there (`segment_bound`)."""


@dataclass(frozen=True)
class SegmentSettings:
    """How a video is cut into segments.

    Attributes:
        detect: ``shots`` (hard cuts, bounded by ``min_s`` and ``max_s``) or ``windows``
            (fixed windows of ``window_s``).
        min_s: Shortest segment in seconds: a cut sooner than this after the last is ignored.
        max_s: Longest segment in seconds: a longer shot is split every ``max_s``.
        window_s: Window length for ``detect="windows"``.
        threshold: Histogram difference (``[0, 1]``) between two frames that counts as a cut.
        frames: Frames kept to represent each segment.
        max_segments: Most segments one video is cut into (None: no bound but the length's, see
            `segment_bound`). Past half of it, every length above doubles (and again past each
            half of what is left), so a long video is still covered to its end with coarser
            segments; the video is never cut into more.
        keep_side: Longest side in pixels of the frames kept (None: as decoded). Frames are
            scaled down as they are kept (`vhd.media.image.fit_image`, what the encoder does), so
            what a segment holds does not grow with the video's frame size.
    """

    detect: str = "shots"
    min_s: float = 1.0
    max_s: float = 20.0
    window_s: float = 10.0
    threshold: float = 0.3
    frames: int = 3
    max_segments: int | None = DEFAULT_MAX_SEGMENTS
    keep_side: int | None = None

    def __post_init__(self) -> None:
        if self.detect not in DETECT:
            raise ConfigError(f"unknown segment detection {self.detect!r}: choose one of {', '.join(DETECT)}")
        if not 0 <= self.min_s < self.max_s:
            raise ConfigError(
                f"segment lengths must satisfy 0 <= min < max, got min {self.min_s} s and max {self.max_s} s"
            )
        if self.window_s <= 0:
            raise ConfigError(f"the segment window must be positive, got {self.window_s} s")
        if not 0 < self.threshold <= 1:
            raise ConfigError(f"the cut threshold must be in (0, 1], got {self.threshold}")
        if self.frames < 1:
            raise ConfigError(f"frames per segment must be at least 1, got {self.frames}")
        if self.max_segments is not None and self.max_segments < 1:
            raise ConfigError(f"the segments per video must be at least 1, got {self.max_segments}")
        if self.keep_side is not None and self.keep_side < 16:
            raise ConfigError(f"the side of the frames kept must be at least 16 pixels, got {self.keep_side}")

    @property
    def floor_s(self) -> float:
        """The shortest a segment may be on average (`segment_bound`): ``min_s``, at least 1 s (or ``max_s``)."""
        if self.detect == "windows":
            return self.window_s
        return max(self.min_s, min(MIN_AVERAGE_S, self.max_s))

    def floor_for(self, seconds: float | None) -> float:
        """`floor_s` for a video whose header says it lasts ``seconds``: spread so half the bound covers it.

        A long video's cuts are thinned out to one per ``seconds / (max_segments / 2)`` on
        average, never to fewer than one per ``max_s`` (so a header that claims a longer video
        than there is can only make the segments as coarse as a long shot's); windows keep their
        length. The doubling past half the bound (`scale`) covers what the header did not say.
        """
        floor = self.floor_s
        if self.detect == "windows" or self.max_segments is None or seconds is None:
            return floor
        if not math.isfinite(seconds) or seconds <= 0:
            return floor
        return max(floor, min(self.max_s, seconds / max(1, self.max_segments // 2)))

    def scale(self, index: int) -> int:
        """How much the lengths of segment ``index`` are stretched: 1, then 2, 4... as ``max_segments`` fills.

        The first half of the bound's segments have the lengths as set; each half of what is left
        after that doubles them again (with 500: 250 segments as set, 125 twice as long, 63 four
        times, ...), so however long the video, its segments reach its end within the bound.
        """
        n, i = self.max_segments, 0
        if n is None:
            return 1
        while index >= n - (n >> (i + 1)) and n >> (i + 1):
            i += 1
        return 1 << i

    def identity(self) -> dict[str, Any]:
        """The settings that change what the models are shown (for configuration hashes)."""
        return {
            "detect": self.detect,
            "min_s": self.min_s,
            "max_s": self.max_s,
            "window_s": self.window_s,
            "threshold": self.threshold,
            "frames": self.frames,
            "max_segments": self.max_segments,
        }


def _slack(seconds: float) -> float:
    return max(1.0, HEADER_SLACK * seconds)


def segment_bound(settings: SegmentSettings, seconds: float | None) -> int | None:
    """The most segments a video whose header says it lasts ``seconds`` is cut into (None: no bound).

    Segment ``k`` starts at least ``floor_for(seconds) x scale(j)`` summed over the segments ``j``
    before it after the first frame (a cut sooner than that is ignored; ``max_s`` and ``window_s`` are at
    least ``floor_s``), so a video of ``seconds`` has at most one start per such step, and never
    more than ``max_segments``. The run stops a video there (the rest is not judged, and it says
    so) also when the frames go on longer than the header said (by more than `HEADER_SLACK`), so
    the dry run's figure from the same header bounds what the run does.
    """
    n = settings.max_segments
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return n
    span = seconds + _slack(seconds)
    floor = settings.floor_for(seconds)
    if n is None:
        return 1 + math.floor(span / floor) if span / floor < 2**62 else None
    budget, count = 0.0, 1
    while count < n:
        budget += floor * settings.scale(count - 1)
        if budget > span:
            break
        count += 1
    return count


def fewest_segments(settings: SegmentSettings, seconds: float | None, frame_s: float | None) -> int:
    """The fewest segments a video whose header says it lasts ``seconds`` is cut into (an estimate's low end).

    No segment lasts longer than its ``max_s`` (or ``window_s``), stretched as `SegmentSettings.scale`
    says, plus one frame (``frame_s``, from the header's frame rate; 1 s when unknown), so a video of
    ``seconds`` (less `HEADER_SLACK`) needs at least this many; every video has one.
    """
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return 1
    longest = settings.window_s if settings.detect == "windows" else settings.max_s
    step = frame_s if frame_s is not None and math.isfinite(frame_s) and frame_s > 0 else 1.0
    span = seconds - _slack(seconds)
    count, covered = 1, longest + step
    limit = settings.max_segments
    while covered < span and (limit is None or count < limit):
        if limit is None:  # no stretching: the rest at once
            return count + math.ceil((span - covered) / (longest + step))
        covered += longest * settings.scale(count) + step
        count += 1
    return count
