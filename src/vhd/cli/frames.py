"""``vhd frames``: write the frames that represent each video as PNG files."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Iterator
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


def _video_row(v: Any) -> dict[str, Any]:
    return {
        "video": v.path,
        "status": v.status,
        "indices": " ".join(map(str, v.indices)),
        "total_frames": v.total_frames,
        "files": " ".join(v.files),
        "reason": v.reason,
    }


def _skip_row(path: str, reason: str) -> dict[str, Any]:
    return {"video": path, "status": "skipped", "indices": "", "total_frames": 0, "files": "", "reason": reason}


class _Rows:
    """One row per video, then one per skipped input, spooled to temporary files as they come.

    The report and ``--json`` list every video: the rows wait on disk, not in a list, and are
    written out at the end in the order they always had (videos first).
    """

    def __init__(self) -> None:
        import tempfile

        self.videos = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 (closed by close())
        self.skipped = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115

    def video(self, outcome: Any) -> None:
        self.videos.write(json.dumps(_video_row(outcome), ensure_ascii=False) + "\n")

    def skip(self, path: str, reason: str) -> None:
        self.skipped.write(json.dumps(_skip_row(path, reason), ensure_ascii=False) + "\n")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for spool in (self.videos, self.skipped):
            spool.seek(0)
            for line in spool:
                yield dict(json.loads(line))

    def close(self) -> None:
        self.videos.close()
        self.skipped.close()


def _write_json(fh: Any, rows: Iterable[dict[str, Any]]) -> None:
    """Rows as ``json.dump(list(rows), fh, indent=2)`` writes them, one row at a time."""
    sep = "[\n  "
    for row in rows:
        fh.write(sep + json.dumps(row, indent=2).replace("\n", "\n  "))
        sep = ",\n  "
    fh.write("[]" if sep.startswith("[") else "\n]")


def _write_report(path: str, rows: Iterable[dict[str, Any]]) -> None:
    import csv

    from vhd.errors import ConfigError
    from vhd.fileio import atomic_write, escape_cell

    if path.lower().endswith(".json"):
        atomic_write(path, lambda fh: _write_json(fh, rows))
    elif path.lower().endswith(".csv"):

        def write(fh: Any) -> None:
            it = iter(rows)
            first = next(it, None)
            writer = csv.DictWriter(fh, fieldnames=list(first) if first else ["video"], lineterminator="\n")
            writer.writeheader()
            for row in [first] if first else []:
                writer.writerow({k: escape_cell(v) for k, v in row.items()})
            writer.writerows({k: escape_cell(v) for k, v in row.items()} for row in it)

        atomic_write(path, write)
    else:
        raise ConfigError(f"unknown report format for {path}: name it .csv or .json")


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    import sys

    from vhd.curate.frames import extract_frames
    from vhd.progress import bar

    rows = _Rows()
    failed: list[tuple[str, str]] = []  # the first 20 failures, for the terminal

    def outcome(v: Any) -> None:
        rows.video(v)
        if v.status == "failed" and len(failed) < 20:
            failed.append((v.path, v.reason))

    try:
        drawn = not (args.no_progress or args.json) and sys.stderr.isatty()  # else no counting walk for a bar
        with bar("frames", drawn) as on_progress:
            result = extract_frames(
                args.inputs,
                args.out,
                n=args.n,
                first=args.first,
                layout=args.layout,
                jobs=args.jobs,
                strategy="decode" if args.decode_all else "auto",
                progress=on_progress if drawn else None,
                on_outcome=outcome,
                on_skip=rows.skip,
            )
        if args.report:
            _write_report(args.report, rows)
        if args.json:
            _write_json(sys.stdout, rows)
            print()
        else:
            print(
                f"{result.count('written')} video(s) written, {result.count('done')} already done, "
                f"{result.count('failed')} failed, {result.skipped_count} input(s) skipped, {result.images} "
                f"image(s) left alone ({result.elapsed_s:.1f} s); frames in {args.out}"
            )
            problems = [("failed", path, reason) for path, reason in failed]
            problems += [("skipped", path, reason) for path, reason in result.skipped[: 20 - len(problems)]]
            for what, path, reason in problems[:20]:
                print(printable(f"{what} {path}: {reason}"))
            more = result.count("failed") + result.skipped_count - 20
            if more > 0:
                print(f"... {more} more (use --report FILE for all)")
    finally:
        rows.close()
    return 1 if result.count("failed") else 0
