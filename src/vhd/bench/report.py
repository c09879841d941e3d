"""Write a benchmark report folder: tables, plots, ``results.json``, ``index.html``.

Files: ``table1.{md,csv,tex}`` (the paper's Table 1 layout), ``breakdown.{md,csv,tex}`` (the
same columns for real vs synthetic), ``metrics.csv`` (every number with its interval and
sample count), ``results.json`` (every number, curves and reliability bins included, with the
run's counts, throughput and the problems per row), ``plots/*.png`` (unless plots are off),
``thumbs/`` and ``index.html``. Each file is written atomically.

Every table and ``results.json`` give each detector's coverage (samples answered / samples): a
sample a detector failed on counts as wrong in its numbers (see `vhd.bench.metrics`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.bench.tables import long_csv, segment_csv, segment_markdown, table1, to_csv, to_latex, to_markdown
from vhd.fileio import atomic_write

if TYPE_CHECKING:
    from vhd.bench.calibration import Calibration
    from vhd.bench.evaluate import DetectorResult
    from vhd.bench.runner import BenchRun


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in label)


def _finite(obj: Any) -> Any:
    """NaN and infinities (undefined numbers) become null, so the JSON is standard."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def write_plots(results: Sequence[DetectorResult], codes: Sequence[str], folder: Path) -> list[Path]:
    """Every plot of the report as PNG files in ``folder``."""
    from vhd.bench.plots import (
        binary_figure,
        breakdown_figure,
        category_recall_figure,
        curves_figure,
        multiclass_figure,
        reliability_figure,
    )

    written: list[Path] = []
    for r in results:
        if "all" not in r.groups:
            continue
        g = r.groups["all"]
        path = folder / f"binary_{_slug(r.label)}.png"
        binary_figure(g.binary, path, title=r.label)
        written.append(path)
        if g.multiclass is not None:
            p = folder / f"multiclass_{_slug(r.label)}.png"
            multiclass_figure(g.multiclass, p, title=f"{r.label}: multi-class")
            written.append(p)
    for drawn in (
        curves_figure(results, folder / "roc_pr.png"),
        reliability_figure(results, folder / "reliability.png"),
        category_recall_figure(results, codes, folder / "category_recall.png"),
        breakdown_figure(results, folder / "breakdown.png"),
    ):
        if drawn is not None:
            written.append(drawn)
    return written


def write_report(
    out: str | Path,
    bench_run: BenchRun,
    results: Sequence[DetectorResult],
    *,
    plots: bool = True,
    unblurred: bool = False,
    calibrations: Mapping[str, Calibration] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write the report folder.

    Args:
        out: The folder (created when missing).
        bench_run: The run the results came from (items, problems, per-detector counts).
        results: `vhd.bench.evaluate.evaluate`'s output.
        plots: Draw PNG plots (needs matplotlib).
        unblurred: Also write clear thumbnails, shown when a blurred one is clicked.
        calibrations: Calibrations applied, by detector label (recorded in the JSON).
        extra: More fields for ``results.json`` (e.g. the command's settings).

    Returns:
        The files written.
    """
    from vhd.bench.html import write_index

    folder = Path(out)
    files: list[Path] = []
    table = table1(results)
    md = to_markdown(*table)
    files += [
        atomic_write(folder / "table1.md", md),
        atomic_write(folder / "table1.csv", to_csv(*table)),
        atomic_write(folder / "table1.tex", to_latex(*table)),
    ]
    breakdown = table1(results, (("real", "Real"), ("synthetic", "Synthetic")))
    if breakdown.headers:
        files += [
            atomic_write(folder / "breakdown.md", to_markdown(*breakdown)),
            atomic_write(folder / "breakdown.csv", to_csv(*breakdown)),
            atomic_write(folder / "breakdown.tex", to_latex(*breakdown)),
        ]
    files.append(atomic_write(folder / "metrics.csv", long_csv(results)))
    segments_md = segment_markdown(results)
    if segments_md is not None:  # labels carry spans and some detector placed harm in time
        files += [
            atomic_write(folder / "segments.md", segments_md),
            atomic_write(folder / "segments.csv", segment_csv(results)),
        ]
    bench = bench_run.bench
    problems = [str(p) for p in bench.problems]
    data = {
        "version": 1,
        "labels": str(bench.source),
        "taxonomy": bench.taxonomy.key,
        "samples": len(bench.items),
        "problems": [{"line": p.line, "message": p.message, "used": p.used} for p in bench.problems],
        "detectors": [r.to_dict() for r in results],
        "failures": {
            d.label: {sid: p.error for sid, p in d.predictions.items() if p.harmful is None}
            for d in bench_run.detectors
        },
        "calibration": {k: c.to_dict() for k, c in (calibrations or {}).items()},
        **(extra or {}),
    }
    files.append(atomic_write(folder / "results.json", json.dumps(_finite(data), indent=1, allow_nan=False) + "\n"))
    plot_files = write_plots(results, bench.taxonomy.codes, folder / "plots") if plots else []
    files += plot_files
    files.append(
        write_index(
            folder,
            results,
            bench.items,
            table_md=md,
            plots=plot_files,
            problems=problems,
            unblurred=unblurred,
            segments_md=segments_md,
        )
    )
    return files
