"""Harmful spans of a video in Label Studio: the ``TimelineLabels`` control and its frame ranges.

vhd's video labeling config has a ``TimelineLabels`` control named ``spans`` on the ``Video``
(``frameRate="$fps"``) with one label, ``Harmful``. A region of it is a result

    {"from_name": "spans", "to_name": "media", "type": "timelinelabels",
     "value": {"ranges": [{"start": 11, "end": 20}], "timelinelabels": ["Harmful"]}}

whose ``start`` and ``end`` are frame numbers: the first frame is 1 and ``end`` is the last frame
of the span (Label Studio's timeline shows a region's duration as ``end - start + 1``), counted at
the task's frame rate (``data.fps``; Label Studio's default, `FRAME_RATE`, when the task has none).
So frames ``s..e`` are the seconds ``[(s - 1) / fps, e / fps)``, and a span of seconds becomes the
frames that start inside it. vhd pushes a video's predicted harmful segments as such regions of its
prediction, and reads the regions a person drew back as the video's human spans: every region but
one labelled ``Not harmful`` counts, and regions that overlap (Label Studio lets them) are joined.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from vhd.labels.spans import check_spans
from vhd.records import Segment

SPANS = "spans"
"""The name of the ``TimelineLabels`` control (a result's ``from_name``)."""

TIMELINE_TYPE = "timelinelabels"
"""A ``TimelineLabels`` result's ``type`` (and its value's label key)."""

SPAN_LABEL = "Harmful"
"""The label of a harmful span."""

FRAME_RATE = 24.0
"""Label Studio's ``Video`` frame rate when the task gives none (its documented default)."""

_EPS = 1e-9


def frames_from_seconds(start_s: float, end_s: float, fps: float) -> tuple[int, int]:
    """The frame range (first frame 1, ``end`` inclusive) of the frames that start in ``[start_s, end_s)``.

    A span shorter than a frame still gets the frame it starts in.
    """
    start = math.floor(start_s * fps + _EPS) + 1
    end = max(start, math.ceil(end_s * fps - _EPS))
    return start, end


def seconds_from_frames(start: int, end: int, fps: float) -> tuple[float, float]:
    """The seconds ``[(start - 1) / fps, end / fps)`` frames ``start..end`` cover."""
    return (start - 1) / fps, end / fps


def span_regions(segments: Sequence[Segment], fps: float = FRAME_RATE) -> list[dict[str, Any]]:
    """``TimelineLabels`` results for the harmful ones of ``segments`` (a prediction's spans).

    Adjacent or overlapping harmful segments are joined into one region first (two harmful shots
    in a row are one span to review).
    """
    merged: list[list[float]] = []
    for seg in sorted((s for s in segments if s.harmful is True), key=lambda s: s.start_s):
        if merged and seg.start_s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], seg.end_s)
        else:
            merged.append([seg.start_s, seg.end_s])
    out = []
    for index, (a, b) in enumerate(merged):
        start, end = frames_from_seconds(a, b, fps)
        out.append(
            {
                "id": f"vhd-span-{index}",
                "from_name": SPANS,
                "to_name": "media",
                "type": TIMELINE_TYPE,
                "value": {"ranges": [{"start": start, "end": end}], TIMELINE_TYPE: [SPAN_LABEL]},
            }
        )
    return out


def task_fps(value: Any) -> float | str:
    """A task's ``data.fps`` (`FRAME_RATE` when missing), or why it cannot be one."""
    if value is None or value == "":
        return FRAME_RATE
    try:
        fps = float(value)
    except (TypeError, ValueError):
        return f"data.fps {str(value)[:20]!r} is not a frame rate: fix the task or leave fps out"
    if not math.isfinite(fps) or fps <= 0:
        return f"data.fps {value!r} is not a positive frame rate: fix the task or leave fps out"
    return fps


def region_spans(regions: Sequence[tuple[Any, Any]], fps_value: Any = None) -> list[Segment] | str | None:
    """A person's spans from an annotation's ``TimelineLabels`` regions, or why they cannot be read.

    Args:
        regions: ``(ranges, timelinelabels)`` of each region's ``value``, as the export holds them.
        fps_value: The task's ``data.fps`` (None: `FRAME_RATE`).

    Returns:
        The spans (see `spans_from_ranges`), None when no region marks a harmful span, or a
        one-line reason.
    """
    fps = task_fps(fps_value)
    if isinstance(fps, str):
        return fps
    ranges: list[tuple[Any, Any, str | None]] = []
    for region_ranges, labels in regions:
        label = labels[0] if isinstance(labels, list) and labels and isinstance(labels[0], str) else None
        if not isinstance(region_ranges, list):
            return "a TimelineLabels region has no list of ranges: fix it in Label Studio"
        for r in region_ranges:
            if not isinstance(r, dict):
                return "a TimelineLabels range is not an object: fix it in Label Studio"
            ranges.append((r.get("start"), r.get("end"), label))
    spans = spans_from_ranges(ranges, fps)
    return spans if isinstance(spans, str) or spans else None


def spans_from_ranges(ranges: Sequence[tuple[Any, Any, str | None]], fps: float) -> list[Segment] | str:
    """Human spans from a person's ``TimelineLabels`` regions, or why they cannot be read.

    Args:
        ranges: ``(start, end, label)`` per range (``end`` None: a single frame; a region marked
            ``Not harmful`` is left out).
        fps: The task's frame rate.

    Returns:
        The spans in time order (overlapping regions joined), or a one-line reason.
    """
    pairs: list[list[float]] = []
    for start, end, label in ranges:
        if label is not None and label.strip().lower() == "not harmful":
            continue
        last = start if end is None else end
        ok = all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (start, last))
        if not ok or start < 1 or last < start:
            return f"a TimelineLabels range {start}-{last} is not frames first <= last from 1: fix it in Label Studio"
        pairs.append(list(seconds_from_frames(start, last, fps)))
    joined: list[list[float]] = []
    for a, b in sorted(pairs):
        if joined and a <= joined[-1][1]:
            joined[-1][1] = max(joined[-1][1], b)
        else:
            joined.append([a, b])
    try:
        return check_spans([(a, b) for a, b in joined])
    except ValueError as exc:  # cannot happen after the checks above; kept as the one rule
        return str(exc)
