"""`benchmark`: the whole of ``vhd bench`` as one call — load, run, calibrate, evaluate, report."""

from __future__ import annotations

import contextlib
import json
import os
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.errors import ConfigError
from vhd.progress import ProgressFn, renamed_on_progress

if TYPE_CHECKING:
    from vhd.bench.calibration import Calibration
    from vhd.bench.evaluate import DetectorResult
    from vhd.bench.metrics.severity import SeverityScale
    from vhd.bench.runner import BenchRun, DetectorRun
    from vhd.bench.subsets import SubsetResult
    from vhd.detectors.base import Detector
    from vhd.execution import Executor, ExecutorOptions
    from vhd.labels.rules import LabelOptions
    from vhd.media.load import MediaSettings


@dataclass
class BenchReport:
    """What `benchmark` produced.

    Attributes:
        run: The predictions (with counts and throughput).
        results: The numbers per detector.
        calibrations: Calibrations applied, by detector label.
        files: The report files written.
        subsets: The ``--subset`` false-positive rates, in the order given.
    """

    run: BenchRun
    results: list[DetectorResult]
    calibrations: dict[str, Calibration]
    files: list[Path]
    subsets: list[SubsetResult] = field(default_factory=list)

    def to_pandas(self) -> Any:
        """Every number as a pandas ``DataFrame``: one row per detector x group x metric.

        Columns: ``detector``, ``group`` (``all``, ``image``, ``video``, ``real``, ``synthetic``),
        ``metric`` (``accuracy``, ``f1``, ``roc_auc``, per-class recalls, ``ece``...), ``value``,
        ``low`` and ``high`` (the 95% bootstrap interval; NaN where undefined or not resampled)
        and ``n`` (samples the number stands on): the rows of ``metrics.csv``. Needs pandas.
        """
        from vhd.bench.metrics.values import pandas_module
        from vhd.bench.tables import long_rows

        return pandas_module().DataFrame(long_rows(self.results), columns=list(REPORT_COLUMNS))

    def _headline(self) -> list[tuple[str, str, list[str]]]:
        """Per detector (at most `REPR_DETECTORS`): label, coverage, the headline numbers of group ``all``."""
        from vhd.bench.metrics.values import fmt

        out = []
        for r in self.results[:REPR_DETECTORS]:
            values = r.groups["all"].binary.values if "all" in r.groups else {}
            cells = []
            for name in HEADLINE_METRICS:
                v = values.get(name)
                interval = "" if v is None or v.low is None else f" [{fmt(v.low)}, {fmt(v.high)}]"
                cells.append("\u2014" if v is None else f"{fmt(v.value)}{interval}")
            answered, total = r.coverage
            out.append((r.label, f"{answered}/{total}", cells))
        return out

    def _folder(self) -> str:
        return os.path.commonpath([str(f.parent) for f in self.files]) if self.files else "(no files)"

    def __repr__(self) -> str:
        """A few lines: detectors, samples, the headline numbers with intervals, where the report is."""
        n = len(self.run.bench.items)
        lines = [f"BenchReport: {len(self.results)} detector(s) on {n} sample(s), report in {self._folder()}"]
        for label, coverage, cells in self._headline():
            numbers = ", ".join(f"{m} {c}" for m, c in zip(HEADLINE_METRICS, cells, strict=True))
            lines.append(f"  {label}: {numbers}, answered {coverage}")
        if len(self.results) > REPR_DETECTORS:
            lines.append(f"  ... {len(self.results) - REPR_DETECTORS} more: .to_pandas() has every number")
        else:
            lines.append("  (.to_pandas(): every number by detector, group and metric)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The same as an HTML table, for a notebook cell."""
        import html

        head = "".join(f"<th>{html.escape(m)}</th>" for m in ("detector", *HEADLINE_METRICS, "answered"))
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in (label, *cells, coverage)) + "</tr>"
            for label, coverage, cells in self._headline()
        )
        n = len(self.run.bench.items)
        caption = html.escape(f"{len(self.results)} detector(s) on {n} sample(s); report in {self._folder()}")
        return (
            f'<table class="vhd-bench"><caption>BenchReport: {caption}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            "<p><code>.to_pandas()</code>: every number by detector, group and metric, with intervals.</p>"
        )


REPORT_COLUMNS = ("detector", "group", "metric", "value", "low", "high", "n")
"""The columns of `BenchReport.to_pandas` (and of ``metrics.csv``)."""

HEADLINE_METRICS = ("accuracy", "f1", "balanced_acc", "roc_auc")
"""The numbers a report's repr shows per detector (group ``all``, with their intervals)."""

REPR_DETECTORS = 12
"""Most detectors a report's repr lists."""


def parse_value(text: str) -> Any:
    """A ``--set`` value: JSON (numbers, true/false, lists, quoted strings) or else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_sets(values: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``LABEL.key=value`` strings to ``{label: {key: value}}``.

    Raises:
        ConfigError: A malformed entry.
    """
    out: dict[str, dict[str, Any]] = {}
    for entry in values:
        target, eq, value = entry.partition("=")
        label, dot, key = target.partition(".")
        if not eq or not dot or not label.strip() or not key.strip():
            raise ConfigError(f"--set {entry!r} must be LABEL.key=value, e.g. long.prompt=long")
        out.setdefault(label.strip(), {})[key.strip()] = parse_value(value)
    return out


def read_detector_options(path: str | os.PathLike[str] | None) -> dict[str, dict[str, Any]]:
    """The ``[detectors.LABEL]`` tables of a TOML config file (empty without a file).

    Raises:
        ConfigError: Unreadable TOML, or ``detectors`` not a table of tables.
    """
    if path is None:
        return {}
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}; check the path") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config {path} is not valid TOML ({exc}); fix the file") from exc
    tables = data.get("detectors", {})
    if not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values()):
        raise ConfigError(f"config {path}: [detectors] must hold one [detectors.LABEL] table per detector")
    return {str(k): dict(v) for k, v in tables.items()}


def build_detectors(
    specs: Sequence[str], *, sets: Sequence[str] = (), config: str | os.PathLike[str] | None = None
) -> list[Detector]:
    """Detectors from specs, with options from the config file, then ``--set`` (which wins).

    Raises:
        ConfigError: Bad spec, unknown detector, or options for a label no spec has.
    """
    from vhd.detectors.registry import DetectorSpec, create_detector

    parsed = [DetectorSpec.parse(s) for s in specs]
    if not parsed:
        raise ConfigError("no detector given: add --detector NAME (e.g. --detector nudenet)")
    file_opts, set_opts = read_detector_options(config), parse_sets(sets)
    labels = {p.label for p in parsed}
    unknown = sorted(set(set_opts) - labels)
    if unknown:
        raise ConfigError(
            f"--set names label {unknown[0]!r}, which no --detector has; labels: {', '.join(sorted(labels))}"
        )
    return [create_detector(p, {**file_opts.get(p.label, {}), **set_opts.get(p.label, {})}) for p in parsed]


def calibrated(run: DetectorRun, cal: Calibration) -> DetectorRun:
    """A copy of a detector's predictions re-decided by a calibration (predictions without a score kept).

    The copy is a `vhd.bench.predictions.PredictionLog` filled as the predictions are read (one
    at a time): no dict of every prediction.
    """
    from vhd.bench.predictions import PredictionLog

    preds = PredictionLog()
    for sid, p in run.predictions.items():
        if p.harmful is None or p.score is None:
            preds.put(sid, p)
            continue
        score = cal(p.score)
        preds.put(sid, replace(p, score=score, harmful=bool(score >= cal.threshold)))
    return replace(run, predictions=preds)


def _calibrate(
    bench_run: BenchRun, split: str | None, method: str, saved: Mapping[str, Calibration], out: Path
) -> dict[str, Calibration]:
    from vhd.bench.calibration import fit_calibration, save_calibrations

    cals = dict(saved)
    if split is not None:
        fit = [i for i in bench_run.bench.items if i.split == split]
        if not fit:
            raise ConfigError(
                f"no sample has split {split!r}: add a split column to the labels or choose another split"
            )
        for run in bench_run.detectors:  # the fit split's (truth, score) pairs: two numbers a sample
            ys: list[bool] = []
            scores: list[float] = []
            for item in fit:
                p = run.predictions.get(item.id)
                if p is not None and p.score is not None:
                    ys.append(item.harmful)
                    scores.append(float(p.score))
            if ys:
                cals[run.label] = fit_calibration(ys, scores, method=method, detector_key=run.key)
        save_calibrations(out / "calibration.json", cals)
        bench_run.bench.items = [i for i in bench_run.bench.items if i.split != split]
    for k, run in enumerate(bench_run.detectors):
        if run.label in cals:
            bench_run.detectors[k] = calibrated(run, cals[run.label])
    return {k: v for k, v in cals.items() if any(r.label == k for r in bench_run.detectors)}


@renamed_on_progress
def benchmark(
    labels: str | os.PathLike[str],
    detectors: Sequence[Detector],
    out: str | os.PathLike[str],
    *,
    media: str | os.PathLike[str] | None = None,
    taxonomy: str | os.PathLike[str] | None = None,
    crosswalk: str | os.PathLike[str] | None = None,
    settings: MediaSettings | None = None,
    concurrency: int = 4,
    calibrate_split: str | None = None,
    calibration_method: str = "temperature",
    calibration_file: str | os.PathLike[str] | None = None,
    resamples: int = 1000,
    plots: bool = True,
    unblurred: bool = False,
    progress: ProgressFn | None = None,
    label_options: LabelOptions | None = None,
    store: str | os.PathLike[str] | None = None,
    executor: str | Executor = "local",
    executor_options: ExecutorOptions | None = None,
    segment_iou: float = 0.5,
    subsets: Sequence[str] = (),
    severity_scale: SeverityScale | None = None,
) -> BenchReport:
    """Benchmark detectors on a labelled set and write the report folder.

    Predictions are cached in ``out/predictions.sqlite``: a re-run, or a run adding a detector,
    computes only what is missing.

    Args:
        labels: Labels CSV, VHD11K annotation file, or a vhd store (each sample's latest annotation).
        detectors: Built detectors (`build_detectors`), distinct labels.
        out: Report folder.
        media: Folder relative media paths are under (default: the labels file's folder).
        taxonomy: Taxonomy file (default VHD11K's ten categories).
        crosswalk: Crosswalk file (default the packaged one).
        settings: How media is prepared (frames per video, image size).
        concurrency: Detector calls in flight at once, across detectors.
        calibrate_split: Fit a calibration per detector (with scores) on this split, save it to
            ``out/calibration.json``, and report on the other samples with it applied.
        calibration_method: ``temperature`` or ``platt``.
        calibration_file: Apply calibrations saved by an earlier ``--calibrate``.
        resamples: Bootstrap resamples per confidence interval.
        plots: Draw PNG plots (needs matplotlib).
        unblurred: Also include clear thumbnails behind a click.
        progress: Called with (samples done, samples to do).
        label_options: ``--path-prefix``, ``--allow-outside-paths`` and ``--duplicates`` of a
            labels file (`vhd.labels.rules.LabelOptions`).
        store: With a labels file: the vhd store its rows may name (by path or id) wherever
            its samples are.
        executor: Where detectors run: ``local`` or ``ray`` (see `vhd.bench.runner.run_bench`).
        executor_options: Workers, Ray address, CPUs/GPUs per worker.
        segment_iou: The intersection over union a predicted span needs to match a human span in
            the segment numbers (reported when the labels carry spans; `vhd.bench.metrics.segments`).
        subsets: ``NAME=FILE`` labelled subsets (e.g. content the policy allows) whose samples
            are judged too and get their false-positive rate reported on their own
            (`vhd.bench.subsets`).
        severity_scale: The policy's severity scale the labels' ``severity`` levels are on
            (default: inferred from the levels, `vhd.bench.metrics.infer_scale`).

    Returns:
        The run, the numbers and the files written.
    """
    from vhd.bench.cache import CACHE_FILE, PredictionCache
    from vhd.bench.calibration import load_calibrations
    from vhd.bench.data import load_bench_set
    from vhd.bench.evaluate import evaluate
    from vhd.bench.levels import apply_scale
    from vhd.bench.report import write_report
    from vhd.bench.runner import run_bench
    from vhd.bench.store_source import is_store_file, load_bench_set_from_store
    from vhd.bench.subsets import evaluate_subsets, load_subsets, parse_subset, with_subsets
    from vhd.taxonomy.crosswalk import load_crosswalk
    from vhd.taxonomy.taxonomy import load_taxonomy

    if not 0 < segment_iou <= 1:
        raise ConfigError(f"--segment-iou must be above 0 and at most 1, got {segment_iou}")
    folder = Path(out)
    for spec in subsets:  # a malformed --subset fails before any file is read
        parse_subset(spec)
    if is_store_file(labels):
        if media is not None:
            raise ConfigError("--media applies to a labels file; a store's samples carry their own paths: drop --media")
        if store is not None:
            raise ConfigError(f"--labels {labels} is itself a store: drop --store, or give a labels file to --labels")
        bench = load_bench_set_from_store(labels, taxonomy=load_taxonomy(taxonomy))
    else:
        tax = load_taxonomy(taxonomy)
        bench = load_bench_set(labels, media=media, taxonomy=tax, options=label_options, store=store)
    apply_scale(bench, severity_scale)
    parts = load_subsets(subsets, taxonomy=bench.taxonomy, options=label_options, store=store)
    cw = load_crosswalk(crosswalk)
    saved = load_calibrations(calibration_file) if calibration_file is not None else {}
    made = [p for p in (folder, folder / CACHE_FILE) if not p.exists()]  # removed again if nothing is computed
    with PredictionCache(folder / CACHE_FILE) as cache, _unmade_on_failure(made, cache):
        bench_run = run_bench(
            with_subsets(bench, parts),
            detectors,
            cache=cache,
            settings=settings,
            concurrency=concurrency,
            progress=progress,
            executor=executor,
            executor_options=executor_options,
        )
    bench_run.bench = bench  # the subsets' extra samples count only in their own numbers
    cals = _calibrate(bench_run, calibrate_split, calibration_method, saved, folder)
    results = evaluate(bench_run, crosswalk=cw, resamples=resamples, iou=segment_iou)
    subset_results = evaluate_subsets(bench_run, parts, resamples=resamples)
    extra = {"crosswalk_version": cw.version, "calibrate_split": calibrate_split}
    files = write_report(
        folder,
        bench_run,
        results,
        plots=plots,
        unblurred=unblurred,
        calibrations=cals,
        extra=extra,
        subsets=subset_results,
    )
    return BenchReport(run=bench_run, results=results, calibrations=cals, files=files, subsets=subset_results)


@contextlib.contextmanager
def _unmade_on_failure(made: list[Path], cache: Any) -> Iterator[None]:
    """Remove the cache file and report folder a run created when it fails before caching anything.

    A missing extra or a detector that cannot load then leaves nothing behind.
    """
    try:
        yield
    except BaseException:
        if made and cache.count() == 0:
            cache.close()
            for path in reversed(made):
                if path.is_dir():
                    with contextlib.suppress(OSError):
                        path.rmdir()  # only when empty
                else:
                    for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
                        leftover.unlink(missing_ok=True)
        raise
