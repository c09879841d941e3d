"""``vhd review-queue``: list the samples people should review, most uncertain first."""

from __future__ import annotations

import argparse
from typing import Any

from vhd.cli.habits import add_json_flag, examples, print_json
from vhd.fileio import printable


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="list contested samples for human review (uncertain judge, disagreeing runs or detectors)",
        description=(
            "List samples whose judge score is near 0.5, whose reply was unreadable, on which another "
            "configuration in the store decided otherwise, or on which a detector of a `vhd bench` report "
            "disagrees; ordered by the score's distance from 0.5, then by disagreement."
        ),
        epilog=examples(
            "vhd review-queue --store run.db --top 50 --out queue.csv",
            "vhd review-queue --store run.db --export-labelstudio queue.json --media-root /data",
            "vhd review-queue --store run.db --json",
        ),
    )
    p.add_argument("--store", default="vhd.db", help="SQLite store (default: vhd.db)")
    p.add_argument("--config-hash", metavar="H", help="the judge's configuration (prefix; default: the newest)")
    p.add_argument(
        "--detector-report",
        action="append",
        default=[],
        metavar="DIR",
        help="a `vhd bench` report folder whose detectors vote too (repeatable)",
    )
    p.add_argument("--margin", type=float, default=0.15, help="scores within this of 0.5 are uncertain (default 0.15)")
    p.add_argument("--top", type=int, metavar="N", help="keep the first N (default: all)")
    p.add_argument("--out", metavar="CSV", help="write the queue as CSV")
    p.add_argument("--export-labelstudio", metavar="JSON", help="write the queue as Label Studio tasks (+ .xml config)")
    p.add_argument("--media-root", default="/", metavar="DIR", help="Label Studio's local-files root (default /)")
    p.add_argument("--url-prefix", metavar="URL", help="media URL prefix (default /data/local-files/?d=)")
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.compare.review_queue import build_queue, export_review_labelstudio

    queue = build_queue(
        args.store,
        config_hash=args.config_hash,
        detector_reports=args.detector_report,
        margin=args.margin,
        top=args.top,
    )
    written: list[str] = []
    if args.out:
        written.append(str(queue.write_csv(args.out)))
    if args.export_labelstudio:
        path = export_review_labelstudio(
            queue, args.export_labelstudio, media_root=args.media_root, url_prefix=args.url_prefix
        )
        written += [str(path), str(path.with_suffix(".xml"))]
    if args.json:
        print_json(
            {
                "store": queue.store,
                "config_hash": queue.config_hash,
                "other_configs": queue.other_configs,
                "detectors": queue.detectors,
                "candidates": queue.candidates,
                "total": queue.total,
                "items": [item.row(rank) for rank, item in enumerate(queue.items, start=1)],
                "files": written,
            }
        )
        return 0
    sources = ", ".join(queue.other_configs + queue.detectors) or "none"
    print(
        f"{queue.total} of {queue.candidates} sample(s) under configuration {queue.config_hash[:12]} need review; "
        f"showing {len(queue.items)}; other voters: {sources}"
    )
    for rank, item in enumerate(queue.items[:20], start=1):
        score = "  -  " if item.score is None else f"{item.score:.2f}"
        decision = {True: "yes", False: "no", None: "?"}[item.harmful]
        print(printable(f"{rank:>4}  {score}  {decision:<3}  {item.path}  ({'; '.join(item.reasons)})"))
    if len(queue.items) > 20:
        print(f"... {len(queue.items) - 20} more" + (" in the CSV" if args.out else " (write them with --out)"))
    if args.out:
        print(f"wrote {written[0]}")
    if args.export_labelstudio:
        print(f"wrote {written[-2]} and {written[-1]} (import the tasks into Label Studio with that config)")
    return 0
