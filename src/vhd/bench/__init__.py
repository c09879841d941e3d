"""Benchmark harmfulness detectors on a labelled set: `vhd bench` as a library.

Example:
    >>> from vhd.bench import benchmark, build_detectors          # doctest: +SKIP
    >>> report = benchmark("labels.csv", build_detectors(["nudenet"]), "report/")  # doctest: +SKIP
    >>> report.results[0].groups["all"].binary.values["harmful_acc"].value  # doctest: +SKIP

Importing this package is cheap: numpy, matplotlib and the detectors load when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.bench.cache import PredictionCache
    from vhd.bench.calibration import Calibration, fit_calibration, reliability
    from vhd.bench.data import BenchItem, BenchSet, load_bench_set
    from vhd.bench.evaluate import DetectorResult, evaluate
    from vhd.bench.metrics import BinaryMetrics, MulticlassMetrics
    from vhd.bench.original import load_original, wants_original
    from vhd.bench.pipeline import BenchReport, benchmark, build_detectors
    from vhd.bench.report import write_report
    from vhd.bench.runner import BenchRun, run_bench
    from vhd.bench.store_source import load_bench_set_from_store
    from vhd.taxonomy.crosswalk import Crosswalk, load_crosswalk

_LAZY = {
    "PredictionCache": "vhd.bench.cache",
    "Calibration": "vhd.bench.calibration",
    "fit_calibration": "vhd.bench.calibration",
    "reliability": "vhd.bench.calibration",
    "Crosswalk": "vhd.taxonomy.crosswalk",
    "load_crosswalk": "vhd.taxonomy.crosswalk",
    "BenchItem": "vhd.bench.data",
    "BenchSet": "vhd.bench.data",
    "load_bench_set": "vhd.bench.data",
    "DetectorResult": "vhd.bench.evaluate",
    "evaluate": "vhd.bench.evaluate",
    "BinaryMetrics": "vhd.bench.metrics",
    "MulticlassMetrics": "vhd.bench.metrics",
    "BenchReport": "vhd.bench.pipeline",
    "benchmark": "vhd.bench.pipeline",
    "build_detectors": "vhd.bench.pipeline",
    "load_original": "vhd.bench.original",
    "wants_original": "vhd.bench.original",
    "load_bench_set_from_store": "vhd.bench.store_source",
    "write_report": "vhd.bench.report",
    "BenchRun": "vhd.bench.runner",
    "run_bench": "vhd.bench.runner",
}

__all__ = [
    "BenchItem",
    "BenchReport",
    "BenchRun",
    "BenchSet",
    "BinaryMetrics",
    "Calibration",
    "Crosswalk",
    "DetectorResult",
    "MulticlassMetrics",
    "PredictionCache",
    "benchmark",
    "build_detectors",
    "evaluate",
    "fit_calibration",
    "load_bench_set",
    "load_bench_set_from_store",
    "load_crosswalk",
    "load_original",
    "reliability",
    "run_bench",
    "wants_original",
    "write_report",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
