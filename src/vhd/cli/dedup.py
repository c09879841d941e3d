"""``vhd dedup``: find exact and near-duplicate media, report them, mark them in a store."""

from __future__ import annotations

import argparse
import json
from typing import Any

from vhd.cli.executor_flags import add_executor_flags, executor_options
from vhd.cli.habits import examples
from vhd.cli.label_flags import add_outside_flag
from vhd.fileio import printable


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="find exact and near-duplicate images and videos (pHash)",
        description=(
            "Cluster exact duplicates (same decoded pixels) and near duplicates (perceptual hashes within "
            "--threshold bits), keep one file per cluster, report every file, and check that no cluster spans "
            "two splits. Files are never deleted; --apply marks duplicates in the store."
        ),
        epilog=examples(
            "vhd dedup photos/ --report clusters.csv",
            "vhd dedup run.db --threshold 10 --keep largest --apply",
            note="Exit codes: 0 done; 1 a cluster spans two splits (leakage); 2 usage error.",
        ),
    )
    p.add_argument("inputs", nargs="+", metavar="PATH_OR_STORE", help="files, folders, manifests, or one vhd store")
    p.add_argument("--threshold", type=int, default=10, help="largest pHash Hamming distance of 64 bits (default 10)")
    p.add_argument(
        "--keep",
        choices=("largest", "first", "quality"),
        default="largest",
        help="file kept per cluster (default largest)",
    )
    p.add_argument("--report", metavar="FILE", help="write one row per file: clusters.csv or clusters.json")
    p.add_argument("--apply", action="store_true", help="mark duplicates in --store (never deletes anything)")
    p.add_argument("--store", help="store for sample ids and splits, and where --apply writes")
    p.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: all CPUs)")
    p.add_argument("--frame-folders", action="store_true", help="treat folders of numbered frames as videos")
    add_outside_flag(p)
    p.add_argument("--n", type=int, default=5, help="frames hashed per video (default 5)")
    p.add_argument("--first", type=int, default=4000, help="video frames sampled from (default 4000)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_executor_flags(p, ship_media=False)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from contextlib import ExitStack

    from vhd.curate.dedup import apply_marks, describe, find_duplicates, is_store_file
    from vhd.errors import ConfigError
    from vhd.progress import bar
    from vhd.store.sqlite import Store

    store_path = args.store
    if store_path is None and len(args.inputs) == 1 and is_store_file(args.inputs[0]):
        store_path = args.inputs[0]
    options = executor_options(args)
    if args.apply and store_path is None:
        raise ConfigError("--apply needs a store: add --store run.db (or give the store as the input)")
    with ExitStack() as stack:
        store = stack.enter_context(Store(store_path, create=True)) if store_path else None
        on_progress = stack.enter_context(bar("dedup", not (args.no_progress or args.json)))
        result = find_duplicates(
            args.inputs,
            threshold=args.threshold,
            keep=args.keep,
            store=store,
            jobs=args.jobs,
            frame_folders=args.frame_folders,
            n_frames=args.n,
            first_frames=args.first,
            progress=on_progress,
            allow_outside_paths=args.allow_outside_paths,
            executor=args.executor,
            executor_options=options,
        )
        marked = missing = 0
        if args.apply and store is not None:
            marked, missing = apply_marks(result, store)
    if args.report:
        result.write_report(args.report)
    if args.json:
        summary = {"threshold": result.threshold, "keep": result.keep, **result.counts()}
        if args.apply:
            summary.update(marked=marked, not_in_store=missing)
        print(json.dumps(summary, indent=2))
    else:
        lines = describe(result)
        if args.apply:
            lines.append(f"marked {marked} sample(s) in {store_path}; {missing} file(s) are not samples of it")
        if args.report:
            lines.append(f"report: {args.report}")
        print("\n".join(printable(line) for line in lines))
    code = 1 if result.leaks or result.rows_left_out else 0
    result.close()  # the scratch file of the fingerprints
    return code
