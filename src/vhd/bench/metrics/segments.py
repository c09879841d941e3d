"""Segment metrics: where in a video the harm is, scored against human spans, with bootstrap intervals.

A video's truth is the list of its harmful spans (a human label's `vhd.records.Segment` list, or
``(start_s, end_s)`` pairs; an unharmful video has none); a detector's answer is the list of
segments it returned, of which the ``harmful`` ones count. Spans of one side that overlap or
touch (a gap of at most ``merge_gap_s``) are merged first: two adjacent harmful shots are one
event. Then, pooled over videos:

- **segment-level** precision, recall and F1: each predicted span is matched to at most one true
  span and the other way round, a pair counting only at an intersection-over-union of at least
  ``iou`` (0.5 by default); the matching has the most pairs possible (augmenting paths, a
  higher IoU preferred). Precision is matched / predicted spans, recall matched / true spans,
  F1 ``2 matched / (predicted + true)``.
- **duration-weighted** precision, recall and F1: seconds predicted harmful that are harmful
  (the overlap) over seconds predicted harmful, over seconds harmful, and
  ``2 overlap / (predicted + true seconds)``.
- **median boundary error** (seconds): the median of ``|start - start|`` and ``|end - end|`` over
  every matched pair's two boundaries.

Every number has a 95% bootstrap interval from resampling *videos* with replacement (a video
brings all its spans), the same percentile method and fixed seed as `vhd.bench.metrics.values`.
An undefined number is None: precision without a predicted span, recall and F1 without a true
span (as `binary_from_counts` leaves F1 undefined without a harmful sample), a boundary error
without a matched pair. A video the detector gave no answer for (None) predicts nothing, so its
true spans count as missed, and ``coverage`` says how many videos were answered.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vhd.bench.metrics.values import (
    BOOTSTRAP,
    COVERAGE,
    Value,
    bootstrap,
    clean,
    numpy,
    pandas_module,
    percentile_interval,
    resample_blocks,
    safe_div,
)
from vhd.records import Segment

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

SpanLike = Segment | tuple[float, float]
"""A span: a `Segment` (only harmful ones count on the predicted side) or ``(start_s, end_s)``."""

IOU = 0.5
"""The default intersection-over-union a predicted span needs with a true span to match it."""

SEGMENT_METRICS = ("segment_precision", "segment_recall", "segment_f1")
"""Span counts matched one-to-one at the IoU threshold."""

DURATION_METRICS = ("duration_precision", "duration_recall", "duration_f1")
"""Seconds of overlap between predicted-harmful and human-harmful time."""

BOUNDARY_ERROR = "boundary_error_s"
"""Median seconds between the boundaries of matched spans."""

Span = tuple[float, float]


def _pair(span: SpanLike) -> Span:
    if isinstance(span, Segment):
        return float(span.start_s), float(span.end_s)
    start, end = span
    return float(start), float(end)


def harmful_spans(spans: Sequence[SpanLike] | None) -> list[Span]:
    """The ``(start_s, end_s)`` of the harmful spans: every pair, and every `Segment` whose ``harmful`` is True.

    Spans that are empty (``end_s <= start_s``) or not finite are left out.
    """
    out: list[Span] = []
    for span in spans or ():
        if isinstance(span, Segment) and span.harmful is not True:
            continue
        start, end = _pair(span)
        if math.isfinite(start) and math.isfinite(end) and end > start:
            out.append((start, end))
    return out


def merge_spans(spans: Sequence[SpanLike], gap_s: float = 0.0) -> list[Span]:
    """Harmful spans sorted, with those that overlap or are at most ``gap_s`` apart joined into one."""
    merged: list[list[float]] = []
    for start, end in sorted(harmful_spans(spans)):
        if merged and start - merged[-1][1] <= gap_s:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def span_iou(a: Span, b: Span) -> float:
    """Intersection over union of two spans (0 when they do not overlap)."""
    inter = min(a[1], b[1]) - max(a[0], b[0])
    if inter <= 0:
        return 0.0
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else 0.0


def match_spans(truth: Sequence[Span], predicted: Sequence[Span], iou: float = IOU) -> list[tuple[int, int]]:
    """One-to-one pairs ``(truth index, predicted index)`` with IoU >= ``iou``, as many as possible.

    A maximum bipartite matching (augmenting paths); each predicted span tries its candidates in
    order of decreasing IoU, so among matchings of the same size a closer pair is preferred.
    """
    options = [
        sorted((j for j, t in enumerate(truth) if span_iou(t, p) >= iou), key=lambda j: -span_iou(truth[j], p))
        for p in predicted
    ]
    owner: dict[int, int] = {}  # truth index -> predicted index

    def augment(i: int, seen: set[int]) -> bool:
        for j in options[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(predicted)):
        augment(i, set())
    return sorted((j, i) for j, i in owner.items())


def overlap_seconds(a: Sequence[Span], b: Sequence[Span]) -> float:
    """Seconds covered by both lists of spans (each list already merged: no overlaps within one)."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return total


@dataclass(frozen=True)
class VideoSpans:
    """One video's comparison, the unit the bootstrap resamples.

    Attributes:
        matched: True spans matched by a predicted span.
        n_true: True (human-harmful) spans after merging.
        n_pred: Predicted harmful spans after merging.
        true_s: Seconds labelled harmful.
        pred_s: Seconds predicted harmful.
        overlap_s: Seconds both.
        errors: Boundary errors (seconds) of the matched pairs, two per pair.
        answered: Whether the detector gave an answer for the video.
    """

    matched: int
    n_true: int
    n_pred: int
    true_s: float
    pred_s: float
    overlap_s: float
    errors: tuple[float, ...] = ()
    answered: bool = True


def compare_video(
    truth: Sequence[SpanLike],
    predicted: Sequence[SpanLike] | None,
    *,
    iou: float = IOU,
    merge_gap_s: float = 0.0,
) -> VideoSpans:
    """Compare one video's predicted spans with its true spans (``predicted`` None: no answer)."""
    t = merge_spans(truth, merge_gap_s)
    p = merge_spans(predicted or (), merge_gap_s)
    pairs = match_spans(t, p, iou)
    errors = tuple(e for j, i in pairs for e in (abs(t[j][0] - p[i][0]), abs(t[j][1] - p[i][1])))
    return VideoSpans(
        matched=len(pairs),
        n_true=len(t),
        n_pred=len(p),
        true_s=sum(b - a for a, b in t),
        pred_s=sum(b - a for a, b in p),
        overlap_s=overlap_seconds(t, p),
        errors=errors,
        answered=predicted is not None,
    )


def _from_sums(matched: Any, n_true: Any, n_pred: Any, true_s: Any, pred_s: Any, overlap: Any) -> dict[str, Any]:
    """Every count-based metric from summed columns (arrays allowed; NaN where undefined)."""
    np = numpy()
    n_true, true_s = np.asarray(n_true, dtype=float), np.asarray(true_s, dtype=float)
    return {
        "segment_precision": safe_div(matched, n_pred),
        "segment_recall": safe_div(matched, n_true),
        "segment_f1": np.where(n_true > 0, safe_div(2 * np.asarray(matched, dtype=float), n_true + n_pred), np.nan),
        "duration_precision": safe_div(overlap, pred_s),
        "duration_recall": safe_div(overlap, true_s),
        "duration_f1": np.where(true_s > 0, safe_div(2 * np.asarray(overlap, dtype=float), true_s + pred_s), np.nan),
    }


@dataclass
class SegmentResult:
    """Segment metrics of one detector over the videos whose labels carry spans.

    Attributes:
        values: Metric name -> `Value` (`SEGMENT_METRICS`, `DURATION_METRICS`, `BOUNDARY_ERROR`,
            ``coverage``), each with its interval over resampled videos.
        n_videos: Videos compared.
        n_true: True spans (merged), over every video.
        n_pred: Predicted harmful spans (merged).
        matched: Matched pairs.
        true_s: Seconds labelled harmful; pred_s predicted harmful; overlap_s both.
        iou: The IoU a pair needed.
        n_answered: Videos the detector answered.
    """

    values: dict[str, Value]
    n_videos: int
    n_true: int
    n_pred: int
    matched: int
    true_s: float
    pred_s: float
    overlap_s: float
    iou: float = IOU
    n_answered: int = -1

    def __post_init__(self) -> None:
        if self.n_answered < 0:
            self.n_answered = self.n_videos

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "videos": self.n_videos,
            "answered": self.n_answered,
            "iou": self.iou,
            "true_spans": self.n_true,
            "predicted_spans": self.n_pred,
            "matched": self.matched,
            "true_s": self.true_s,
            "predicted_s": self.pred_s,
            "overlap_s": self.overlap_s,
            "metrics": {k: v.to_dict() for k, v in self.values.items()},
        }

    def to_rows(self) -> list[dict[str, Any]]:
        """One row per metric: metric, value, low, high, n."""
        return [{"metric": k, **v.to_dict()} for k, v in self.values.items()]

    def to_pandas(self) -> Any:
        """`to_rows` as a pandas DataFrame (needs pandas)."""
        return pandas_module().DataFrame(self.to_rows())


def segment_result_from(
    videos: Sequence[VideoSpans], *, iou: float = IOU, resamples: int = BOOTSTRAP, seed: int = 0
) -> SegmentResult:
    """The metrics of compared videos (`compare_video`), with bootstrap intervals over videos."""
    np = numpy()
    n = len(videos)
    cols = np.asarray(
        [[v.matched, v.n_true, v.n_pred, v.true_s, v.pred_s, v.overlap_s, float(v.answered)] for v in videos],
        dtype=float,
    ).reshape(n, 7)
    sums = cols.sum(axis=0)
    point = _from_sums(*sums[:6])
    point[COVERAGE] = sums[6] / n if n else np.nan
    errors = [np.asarray(v.errors, dtype=float) for v in videos]
    all_errors = np.concatenate(errors) if errors else np.zeros(0)
    keys = (*SEGMENT_METRICS, *DURATION_METRICS, COVERAGE)
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    err_low = err_high = None
    if n and resamples > 0:
        boots: list[dict[str, Any]] = []
        for idx in resample_blocks(n, resamples, seed):
            s = cols[idx].sum(axis=1)  # (rows, 7)
            b = _from_sums(*(s[:, k] for k in range(6)))
            b[COVERAGE] = s[:, 6] / n
            boots.append(b)
        for k in keys:
            lows[k], highs[k] = percentile_interval(np.concatenate([b[k] for b in boots]))
        if all_errors.size:

            def median(idx: Any) -> float | None:
                drawn = [errors[i] for i in idx if errors[i].size]
                return float(np.median(np.concatenate(drawn))) if drawn else None

            err_low, err_high = bootstrap(n, median, resamples=resamples, seed=seed)
    matched, n_true, n_pred = (int(x) for x in sums[:3])
    sizes = {
        "segment_precision": n_pred,
        "segment_recall": n_true,
        "segment_f1": n_true + n_pred,
    }
    values = {k: Value(clean(point[k]), lows.get(k), highs.get(k), sizes.get(k, n)) for k in keys}
    values[BOUNDARY_ERROR] = Value(
        float(np.median(all_errors)) if all_errors.size else None, err_low, err_high, int(all_errors.size)
    )
    return SegmentResult(
        values=values,
        n_videos=n,
        n_true=n_true,
        n_pred=n_pred,
        matched=matched,
        true_s=float(sums[3]),
        pred_s=float(sums[4]),
        overlap_s=float(sums[5]),
        iou=iou,
        n_answered=int(sums[6]),
    )


def segment_result(
    truth: Sequence[Sequence[SpanLike]],
    predicted: Sequence[Sequence[SpanLike] | None],
    *,
    iou: float = IOU,
    merge_gap_s: float = 0.0,
    resamples: int = BOOTSTRAP,
    seed: int = 0,
) -> SegmentResult:
    """Segment-level, duration-weighted and boundary metrics over videos, with bootstrap intervals.

    Args:
        truth: Per video, its human-harmful spans (empty for an unharmful video).
        predicted: Per video, the detector's segments (only harmful ones count), or None where
            it gave no answer (its true spans count as missed).
        iou: The IoU a predicted span needs with a true span to match it (0 < iou <= 1).
        merge_gap_s: Spans of one side at most this many seconds apart are joined first.
        resamples: Bootstrap resamples (0: no intervals).
        seed: Bootstrap seed.

    Returns:
        A `SegmentResult`.

    Raises:
        ValueError: ``truth`` and ``predicted`` differ in length, or ``iou`` is outside (0, 1].
    """
    if len(truth) != len(predicted):
        raise ValueError("truth and predicted must have one entry per video")
    if not 0 < iou <= 1:
        raise ValueError(f"iou must be in (0, 1], got {iou}")
    videos = [compare_video(t, p, iou=iou, merge_gap_s=merge_gap_s) for t, p in zip(truth, predicted, strict=True)]
    return segment_result_from(videos, iou=iou, resamples=resamples, seed=seed)


@dataclass
class SegmentMetrics:
    """Accumulates videos (true spans, predicted segments) and computes `SegmentResult`.

    Args:
        iou: The IoU a pair needs (default 0.5).
        merge_gap_s: Spans at most this far apart are joined before matching.
        resamples: Bootstrap resamples (0: no intervals).
        seed: Bootstrap seed.
    """

    iou: float = IOU
    merge_gap_s: float = 0.0
    resamples: int = BOOTSTRAP
    seed: int = 0
    videos: list[VideoSpans] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.iou <= 1:
            raise ValueError(f"iou must be in (0, 1], got {self.iou}")

    def update(self, truth: Sequence[SpanLike], predicted: Sequence[SpanLike] | None) -> SegmentMetrics:
        """Add one video: its true harmful spans and the detector's segments (None: no answer)."""
        self.videos.append(compare_video(truth, predicted, iou=self.iou, merge_gap_s=self.merge_gap_s))
        return self

    def compute(self) -> SegmentResult:
        """The metrics with their intervals."""
        return segment_result_from(self.videos, iou=self.iou, resamples=self.resamples, seed=self.seed)
