"""Metrics: binary, multi-class and agreement, each with bootstrap confidence intervals.

One package for every number ``vhd bench``, ``vhd compare``, ``vhd icl`` and ``vhd align`` report:
`vhd.bench.metrics.values` (a value with its interval, resampling, curves, how an undefined number
prints), `vhd.bench.metrics.binary` (`BinaryMetrics`), `vhd.bench.metrics.multiclass`
(`MulticlassMetrics`), `vhd.bench.metrics.agreement` (Cohen's kappa, across runs too, and weighted for
ordinal levels) and `vhd.bench.metrics.severity` (`SeverityMetrics`: levels of a severity scale). Every name
is importable from here. The package needs only numpy, loaded when a metric is computed.
"""

from __future__ import annotations

from vhd.bench.metrics.agreement import (
    cohen_kappa,
    kappa_runs,
    kappa_value,
    weighted_kappa_value,
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
from vhd.bench.metrics.severity import (
    NO_LEVEL,
    NOT_HARMFUL,
    SeverityMetrics,
    SeverityResult,
    SeverityScale,
    infer_scale,
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
    "COVERAGE",
    "NOT_HARMFUL",
    "NO_LEVEL",
    "SCORE_METRICS",
    "UNDEFINED",
    "UNDEFINED_CSV",
    "BinaryMetrics",
    "BinaryResult",
    "MulticlassMetrics",
    "MulticlassResult",
    "SeverityMetrics",
    "SeverityResult",
    "SeverityScale",
    "Value",
    "average_precision",
    "binary_from_counts",
    "binary_result",
    "bootstrap",
    "clean",
    "cohen_kappa",
    "counted_wrong",
    "fmt",
    "infer_scale",
    "kappa_runs",
    "kappa_value",
    "mean_value",
    "numpy",
    "pandas_module",
    "pr_curve",
    "resample_blocks",
    "roc_auc",
    "roc_curve",
    "safe_div",
    "trapezoid",
    "weighted_kappa_value",
]
