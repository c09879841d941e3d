"""``vhd keywords``: print the keyword taxonomy (the packaged VHD11K keywords or a user file)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from vhd.cli.habits import examples


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="print the search keywords (45 of VHD11K, or your own file)",
        description=(
            "Print the keyword taxonomy used to crawl and to write prompts: the 45 keywords of VHD11K "
            "(42 harmful, 3 unharmful near misses), or the keywords of a file you give."
        ),
        epilog=examples(
            "vhd keywords", "vhd keywords --format csv --harmful", "vhd keywords --keywords my.yaml --format json"
        ),
    )
    p.add_argument("--keywords", metavar="FILE", help="use this file instead (.yaml, .json, .csv or .txt)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format (default table)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--harmful", action="store_true", help="only the harmful keywords")
    which.add_argument("--unharmful", action="store_true", help="only the unharmful keywords")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.collect.keywords import format_keywords, load_keywords

    words = load_keywords(args.keywords)
    if args.harmful:
        words = [w for w in words if w.harmful]
    elif args.unharmful:
        words = [w for w in words if not w.harmful]
    if not words:
        print("no keywords match", file=sys.stderr)
        return 1
    sys.stdout.write(format_keywords(words, args.format))
    return 0
