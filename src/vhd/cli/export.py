"""``vhd export``: write a store's annotations as VHD11K CSV, JSONL or Parquet."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from vhd.registry import Registry, RegistryNames


def _export_formats() -> Registry[Any]:
    from vhd.store.export import EXPORT_FORMATS

    return EXPORT_FORMATS


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(name, help="export annotations (VHD11K CSV, JSONL, Parquet)")
    p.add_argument("store", help="the SQLite store")
    fmt = p.add_argument("--format", default="vhd11k-csv", help="output format (default vhd11k-csv)")
    fmt.choices = RegistryNames(_export_formats)  # set after add_argument: read only when used
    p.add_argument("-o", "--out", required=True, help="output file")
    p.add_argument("--config-hash", help="only annotations made under this configuration (prefix ok)")
    p.add_argument("--include-unparsed", action="store_true", help="JSONL/Parquet: keep unparsed and error rows")
    p.add_argument("--kind", choices=("image", "video"), help="only images or only videos")
    p.add_argument("--relative-to", metavar="DIR", help="write paths relative to this folder")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.store.export import export
    from vhd.store.sqlite import open_store

    with open_store(args.store) as db:
        result = export(
            db,
            args.format,
            Path(args.out),
            config_hash=db.resolve_config_hash(args.config_hash),
            include_unparsed=args.include_unparsed,
            kind=args.kind,
            relative_to=args.relative_to,
        )
    files = ", ".join(str(f) for f in result.files) or "no file"
    print(f"wrote {result.written} annotation(s) to {files}")
    for why, count in sorted(result.left_out_counts.items()):
        print(f"left out {count}: {why}")
    return 0
