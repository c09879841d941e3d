"""From per-frame scores over time to harmful spans: the one thresholding every frame-scoring detector shares.

A detector that judges frames one at a time (NudeNet, Q16, any image classifier) has no notion of
time; scored at frames sampled through a video (each with its timestamp), its scores become spans
by hysteresis: a span opens at a frame scoring at least ``threshold``, stays open while frames
score at least ``low`` (default: ``threshold``), and closes at the first frame below. Each frame
stands for the time until the next sampled frame (the last one until ``end_s``, or one median
step). Spans at most ``merge_gap_s`` apart are then joined, and spans shorter than
``min_duration_s`` dropped. A frame without a score (the detector failed on it) counts as below.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from itertools import pairwise

from vhd.records import Segment

THRESHOLD = 0.5
"""The score at which a frame opens a harmful span."""

MERGE_GAP_S = 1.0
"""Spans at most this many seconds apart are joined (a flicker below the threshold is one event)."""


def spans_from_scores(
    times: Sequence[float],
    scores: Sequence[float | None],
    *,
    threshold: float = THRESHOLD,
    low: float | None = None,
    end_s: float | None = None,
    merge_gap_s: float = MERGE_GAP_S,
    min_duration_s: float = 0.0,
    decided_by: str | None = None,
) -> list[Segment]:
    """The harmful spans of per-frame scores sampled over time.

    Args:
        times: Each scored frame's timestamp in seconds (increasing).
        scores: Each frame's P(harmful) (or 1.0 / 0.0 for a yes/no detector); None: no score.
        threshold: The score that opens a span.
        low: The score a span needs to stay open (hysteresis; default ``threshold``; at most it).
        end_s: Where the video ends (the last frame's time stands until then).
        merge_gap_s: Spans at most this far apart are joined.
        min_duration_s: Shorter spans (after joining) are dropped.
        decided_by: Recorded on each span (e.g. the detector's label).

    Returns:
        The harmful spans in time order, each with ``harmful=True`` and its highest frame score.

    Raises:
        ValueError: ``times`` and ``scores`` differ in length, times go backwards, or ``low`` is
            above ``threshold``.
    """
    if len(times) != len(scores):
        raise ValueError("times and scores must have one entry per frame")
    if any(b < a for a, b in pairwise(times)):
        raise ValueError("frame times must not go backwards")
    stay = threshold if low is None else low
    if stay > threshold:
        raise ValueError(f"low ({stay}) must not be above threshold ({threshold})")
    if not times:
        return []
    steps = [b - a for a, b in pairwise(times) if b > a]
    step = statistics.median(steps) if steps else 1.0
    last_end = max(end_s, times[-1]) if end_s is not None and math.isfinite(end_s) else times[-1] + step
    ends = [*times[1:], last_end]
    raw: list[list[float]] = []  # [start, end, best score]
    open_span = False
    for t, until, s in zip(times, ends, scores, strict=True):
        value = -math.inf if s is None or s != s else float(s)
        if (open_span and value >= stay) or value >= threshold:
            if open_span:
                raw[-1][1], raw[-1][2] = until, max(raw[-1][2], value)
            else:
                raw.append([t, until, value])
            open_span = True
        else:
            open_span = False
    joined: list[list[float]] = []
    for span in raw:
        if joined and span[0] - joined[-1][1] <= merge_gap_s:
            joined[-1][1], joined[-1][2] = span[1], max(joined[-1][2], span[2])
        else:
            joined.append(list(span))
    return [
        Segment(start_s=a, end_s=b, harmful=True, score=min(1.0, max(0.0, best)), decided_by=decided_by)
        for a, b, best in joined
        if b > a and b - a >= min_duration_s
    ]
