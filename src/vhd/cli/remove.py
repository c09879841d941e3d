"""``vhd remove``: take samples out of a store on request, and log the removal."""

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
        help="take samples out (takedown requests); logged with who, when and why",
        description=(
            "Remove samples from a store: they leave exports, dedup, split and later ingests, and the removal "
            "is logged. The media files are deleted only with --delete-files."
        ),
        epilog=examples(
            "vhd remove 3fa9c2e1 --store run.db --reason takedown",
            "vhd remove photos/bad.jpg --store run.db --delete-files",
        ),
    )
    p.add_argument("refs", nargs="+", metavar="ID_OR_PATH", help="sample id, id prefix (6+ characters) or file path")
    p.add_argument("--store", required=True, help="the SQLite store")
    p.add_argument("--reason", default="", help="why (e.g. the takedown request), kept in the log")
    p.add_argument("--by", metavar="WHO", help="who asked (default: the current user)")
    p.add_argument("--delete-files", action="store_true", help="also delete the media files")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from dataclasses import asdict

    from vhd.curate.remove import remove_samples
    from vhd.store.sqlite import open_store

    with open_store(args.store) as store:
        result = remove_samples(
            store, args.refs, reason=args.reason, requested_by=args.by, delete_files=args.delete_files
        )
    if args.json:
        data = {
            "removed": [asdict(r) for r in result.removed],
            "not_found": [{"ref": ref, "reason": why} for ref, why in result.not_found],
        }
        print(json.dumps(data, indent=2))
    else:
        for r in result.removed:
            state = "already removed" if r.already else "removed"
            files = f"; deleted {len(r.deleted)} file(s)" if r.deleted else ""
            print(printable(f"{state} {r.sample_id[:12]} ({r.path}){files}"))
            for problem in r.problems:
                print(printable(f"  could not delete {problem}"))
        for ref, why in result.not_found:
            print(printable(f"not found {ref}: {why}"))
    failed = result.not_found or any(r.problems for r in result.removed)
    return 1 if failed else 0
