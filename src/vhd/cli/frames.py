"""``vhd frames``: write the frames that represent each video as PNG files."""

from __future__ import annotations

import argparse
import json
from typing import Any

from vhd.cli.habits import examples
from vhd.fileio import printable


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="extract each video's sampled frames as <stem>_<k:04d>.png",
        description=(
            "Write N frames per video, taken at round(linspace(0, T - 1, N)) with T = min(frame count, FIRST), "
            "as <video stem>_<k:04d>.png. Resumable: videos already written are skipped."
        ),
        epilog=examples("vhd frames clips/ --out frames/", "vhd frames clips/ --n 5 --first 4000 --out frames/ --json"),
    )
    p.add_argument("inputs", nargs="+", metavar="VIDEO_OR_DIR", help="video files and folders (recursive)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--n", type=int, default=5, help="frames per video (default 5)")
    p.add_argument("--first", type=int, default=4000, help="sample from the first FIRST frames only (default 4000)")
    p.add_argument(
        "--layout",
        choices=("folders", "flat"),
        default="folders",
        help="folders: OUT/<stem>/<stem>_0000.png (default); flat: OUT/<stem>_0000.png",
    )
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="videos decoded at once (default 1)")
    p.add_argument(
        "--decode-all", action="store_true", help="decode every frame up to the last wanted one instead of seeking"
    )
    p.add_argument("--report", metavar="FILE", help="also write one row per video (.csv or .json)")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=run)


def _rows(result: Any) -> list[dict[str, Any]]:
    return [
        {
            "video": v.path,
            "status": v.status,
            "indices": " ".join(map(str, v.indices)),
            "total_frames": v.total_frames,
            "files": " ".join(v.files),
            "reason": v.reason,
        }
        for v in result.videos
    ] + [
        {"video": path, "status": "skipped", "indices": "", "total_frames": 0, "files": "", "reason": reason}
        for path, reason in result.skipped
    ]


def _write_report(path: str, rows: list[dict[str, Any]]) -> None:
    import csv

    from vhd.errors import ConfigError
    from vhd.fileio import atomic_write, escape_cell

    if path.lower().endswith(".json"):
        atomic_write(path, lambda fh: json.dump(rows, fh, indent=2))
    elif path.lower().endswith(".csv"):

        def write(fh: Any) -> None:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["video"], lineterminator="\n")
            writer.writeheader()
            writer.writerows({k: escape_cell(v) for k, v in row.items()} for row in rows)

        atomic_write(path, write)
    else:
        raise ConfigError(f"unknown report format for {path}: name it .csv or .json")


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.curate.frames import extract_frames
    from vhd.progress import bar

    with bar("frames", not (args.no_progress or args.json)) as on_progress:
        result = extract_frames(
            args.inputs,
            args.out,
            n=args.n,
            first=args.first,
            layout=args.layout,
            jobs=args.jobs,
            strategy="decode" if args.decode_all else "auto",
            on_progress=on_progress,
        )
    rows = _rows(result)
    if args.report:
        _write_report(args.report, rows)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(
            f"{result.count('written')} video(s) written, {result.count('done')} already done, "
            f"{result.count('failed')} failed, {len(result.skipped)} input(s) skipped, {result.images} image(s) "
            f"left alone ({result.elapsed_s:.1f} s); frames in {args.out}"
        )
        problems = [("failed", v.path, v.reason) for v in result.videos if v.status == "failed"]
        problems += [("skipped", path, reason) for path, reason in result.skipped]
        for what, path, reason in problems[:20]:
            print(printable(f"{what} {path}: {reason}"))
        if len(problems) > 20:
            print(f"... {len(problems) - 20} more (use --report FILE for all)")
    return 1 if result.count("failed") else 0
