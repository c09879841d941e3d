"""``vhd bench``: benchmark harmfulness detectors on a labelled set and write a report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from vhd.cli.executor_flags import add_executor_flags, executor_options
from vhd.cli.habits import add_json_flag, examples, print_json
from vhd.cli.label_flags import add_label_flags, label_options
from vhd.registry import Registry, RegistryNames


def _calibration_methods() -> Registry[Any]:
    from vhd.bench.calibration import CALIBRATION_METHODS

    return CALIBRATION_METHODS


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="benchmark harmfulness detectors on a labelled set (tables, plots, HTML report)",
        description=(
            "Run detectors over a labelled set (labels CSV or VHD11K annotation file), cache every prediction, "
            "and write tables laid out like the paper's Table 1 (Markdown, CSV, LaTeX), plots, results.json and "
            "index.html. Detector specs are [LABEL=]NAME[:MODEL]; options via --set LABEL.key=value or the "
            "config file's [detectors.LABEL] tables. --store (or --labels pointing at a store) labels each "
            "sample by its latest annotation; --labels FILE --store DB reads the labels file, and its rows may "
            "name the store's samples wherever they are (by path or id). Exit status: 0 done; 1 a detector failed "
            "on some sample (run again to retry those); 2 usage or configuration error; 130 interrupted "
            "(predictions so far are cached: run the same command again to resume)."
        ),
        epilog=examples(
            "vhd bench --labels labels.csv --detector nudenet --out report/",
            "vhd bench --labels labels.csv --detector debate:openai:gpt-4o --config bench.toml --out report/",
            "vhd bench --store run.db --detector nudenet --json",
        ),
    )
    p.add_argument("--labels", metavar="FILE", help="labels CSV, VHD11K annotation CSV/JSON, or a vhd store (.db) file")
    p.add_argument(
        "--store",
        metavar="FILE",
        help="vhd store: alone, each sample's latest annotation is its label; with --labels, the store the "
        "labels' rows may name (by path or id) wherever its samples are",
    )
    p.add_argument("--detector", action="append", default=[], metavar="SPEC", help="[LABEL=]NAME[:MODEL], repeatable")
    p.add_argument("--set", action="append", default=[], metavar="LABEL.KEY=VALUE", help="detector option, repeatable")
    p.add_argument("--config", metavar="FILE", help="TOML file with [detectors.LABEL] option tables")
    p.add_argument(
        "--out", default="report", metavar="DIR", help="report folder and prediction cache (default: report)"
    )
    p.add_argument("--concurrency", type=int, default=4, metavar="N", help="detector calls in flight (default 4)")
    p.add_argument("--frames", type=int, default=5, metavar="N", help="frames judged per video (default 5)")
    p.add_argument("--max-side", type=int, default=1024, metavar="PX", help="longest image side sent (default 1024)")
    p.add_argument("--taxonomy", metavar="FILE", help="taxonomy file of the labels' categories (default VHD11K's)")
    p.add_argument("--crosswalk", metavar="FILE", help="category crosswalk file (default: the packaged one)")
    p.add_argument("--calibrate", metavar="SPLIT", help="fit calibration + threshold on this split; report on the rest")
    method = p.add_argument("--calibration-method", default="temperature", help="(default temperature)")
    method.choices = RegistryNames(_calibration_methods)  # set after add_argument: read only when used
    p.add_argument("--calibration", metavar="FILE", help="apply a calibration.json written by an earlier --calibrate")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="bootstrap resamples (default 1000; 0 off)")
    p.add_argument(
        "--segment-iou",
        type=float,
        default=0.5,
        metavar="X",
        help="IoU a predicted span needs to match a human span, when labels carry spans (default 0.5)",
    )
    p.add_argument("--no-plots", action="store_true", help="tables, JSON and HTML only (no matplotlib needed)")
    p.add_argument("--unblurred-previews", action="store_true", help="also include clear thumbnails, shown on click")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it only shows on a terminal anyway)")
    add_json_flag(p)
    add_label_flags(p)
    add_executor_flags(p, ship_media=False)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.bench.cache import CACHE_FILE, cached_count
    from vhd.bench.pipeline import benchmark, build_detectors
    from vhd.bench.tables import segment_markdown, table1, to_markdown
    from vhd.errors import ConfigError
    from vhd.media.load import MediaSettings
    from vhd.progress import bar

    if not args.labels and not args.store:
        raise ConfigError("give --labels FILE (a labels file or a vhd store) or --store FILE")
    options = label_options(args)
    detectors = build_detectors(args.detector, sets=args.set, config=args.config)
    try:
        with bar("benchmarking", not (args.no_progress or args.json), unit="samples") as on_progress:
            report = benchmark(
                args.labels or args.store,
                detectors,
                args.out,
                media=args.media,
                label_options=options,
                store=args.store if args.labels else None,
                taxonomy=args.taxonomy,
                crosswalk=args.crosswalk,
                settings=MediaSettings(n_frames=args.frames, max_side=args.max_side),
                concurrency=args.concurrency,
                calibrate_split=args.calibrate,
                calibration_method=args.calibration_method,
                calibration_file=args.calibration,
                resamples=args.bootstrap,
                plots=not args.no_plots,
                unblurred=args.unblurred_previews,
                progress=on_progress,
                executor=args.executor,
                executor_options=executor_options(args),
                segment_iou=args.segment_iou,
            )
    except KeyboardInterrupt:  # the bar is down by now
        cached = cached_count(Path(args.out))
        print(
            f"vhd: interrupted: {cached} prediction(s) are cached in {args.out}/{CACHE_FILE}; "
            "run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    bench = report.run.bench
    if args.json:
        print_json(
            {
                "samples": len(bench.items),
                "problems": len(bench.problems),
                "detectors": [
                    {
                        "label": d.label,
                        "cached": d.cached,
                        "computed": d.computed,
                        "failed": d.failed,
                        "samples_per_s": d.samples_per_s,
                    }
                    for d in report.run.detectors
                ],
                "results": report.results,
                "files": report.files,
            }
        )
        return 1 if any(d.failed for d in report.run.detectors) else 0
    print(f"{len(bench.items)} sample(s); {len(bench.problems)} row(s) with problems (see index.html)")
    for d in report.run.detectors:
        speed = "" if d.samples_per_s is None else f", {d.samples_per_s:.2f} samples/s"
        wrong = " (counted wrong; run again to retry)" if d.failed else ""
        print(f"{d.label}: {d.cached} cached, {d.computed} run, {d.failed} failed{wrong}{speed}")
    print(to_markdown(*table1(report.results)), end="")
    segments = segment_markdown(report.results)
    if segments is not None:
        print("Where in the video (segments; 95% intervals over videos):")
        print(segments, end="")
    print(f"wrote {len(report.files)} file(s) to {args.out}/ (index.html, results.json, table1.*)")
    return 1 if any(d.failed for d in report.run.detectors) else 0
