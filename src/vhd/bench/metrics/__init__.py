"""Metrics: binary, multi-class and agreement, each with bootstrap confidence intervals.

One package for every number ``vhd bench``, ``vhd compare``, ``vhd icl`` and ``vhd align`` report:
`vhd.bench.metrics.values` (a value with its interval, resampling, curves, how an undefined number
prints), `vhd.bench.metrics.binary` (`BinaryMetrics`), `vhd.bench.metrics.multiclass`
(`MulticlassMetrics`), `vhd.bench.metrics.agreement` (Cohen's kappa, across runs too) and
`vhd.bench.metrics.segments` (`SegmentMetrics`: where in a video, against human spans). Every name
is importable from here. The package needs only numpy, loaded when a metric is computed.
"""

from __future__ import annotations

from vhd.bench.metrics.agreement import (
    cohen_kappa,
    kappa_runs,
    kappa_value,
)
from vhd.bench.metrics.binary import (
    BinaryMetrics,
    BinaryResult,
    binary_result,
)
from vhd.bench.metrics.multiclass import (
    MulticlassMetrics,
    MulticlassResult,
)
from vhd.bench.metrics.segments import (
    BOUNDARY_ERROR,
    DURATION_METRICS,
    IOU,
    SEGMENT_METRICS,
    SegmentMetrics,
    SegmentResult,
    SpanLike,
    VideoSpans,
    compare_video,
    harmful_spans,
    match_spans,
    merge_spans,
    overlap_seconds,
    segment_result,
    segment_result_from,
    span_iou,
)
from vhd.bench.metrics.values import (
    BINARY_METRICS,
    BLOCK_CELLS,
    BOOTSTRAP,
    COVERAGE,
    SCORE_METRICS,
    UNDEFINED,
    UNDEFINED_CSV,
    Value,
    average_precision,
    binary_from_counts,
    bootstrap,
    clean,
    counted_wrong,
    fmt,
    mean_value,
    numpy,
    pandas_module,
    pr_curve,
    resample_blocks,
    roc_auc,
    roc_curve,
    safe_div,
    trapezoid,
)

__all__ = [
    "BINARY_METRICS",
    "BLOCK_CELLS",
    "BOOTSTRAP",
    "BOUNDARY_ERROR",
    "COVERAGE",
    "DURATION_METRICS",
    "IOU",
    "SCORE_METRICS",
    "SEGMENT_METRICS",
    "UNDEFINED",
    "UNDEFINED_CSV",
    "BinaryMetrics",
    "BinaryResult",
    "MulticlassMetrics",
    "MulticlassResult",
    "SegmentMetrics",
    "SegmentResult",
    "SpanLike",
    "Value",
    "VideoSpans",
    "average_precision",
    "binary_from_counts",
    "binary_result",
    "bootstrap",
    "clean",
    "cohen_kappa",
    "compare_video",
    "counted_wrong",
    "fmt",
    "harmful_spans",
    "kappa_runs",
    "kappa_value",
    "match_spans",
    "mean_value",
    "merge_spans",
    "numpy",
    "overlap_seconds",
    "pandas_module",
    "pr_curve",
    "resample_blocks",
    "roc_auc",
    "roc_curve",
    "safe_div",
    "segment_result",
    "segment_result_from",
    "span_iou",
    "trapezoid",
]
