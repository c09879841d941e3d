"""``vhd examples``: write benign example media made from package photos and drawn video."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from vhd.cli.habits import add_json_flag, examples, print_json


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="write benign example media to try vhd on",
        epilog=examples("vhd examples examples/", "vhd examples", "vhd examples demo/ --json"),
    )
    p.add_argument("out", nargs="?", default="examples", help="folder to write (default: examples)")
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.demo import write_examples

    paths = write_examples(Path(args.out))
    if args.json:
        print_json({"out": args.out, "files": paths})
        return 0
    manifests = [p for p in paths if Path(p).suffix == ".csv"]
    media = len(paths) - len(manifests)
    listed = f" and {', '.join(Path(p).name for p in manifests)} (a manifest of them)" if manifests else ""
    print(f"wrote {media} example media file(s){listed} to {args.out}")
    return 0
