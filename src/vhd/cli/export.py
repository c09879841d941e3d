"""``vhd export``: write a store's annotations as VHD11K CSV, JSONL or Parquet."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from vhd.cli.habits import add_json_flag, examples, print_json
from vhd.registry import Registry, RegistryNames


def _export_formats() -> Registry[Any]:
    from vhd.store.export import EXPORT_FORMATS

    return EXPORT_FORMATS


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="export annotations (VHD11K CSV, JSONL, Parquet)",
        description="Write a store's annotations as the VHD11K release CSV, JSON Lines or Parquet. The VHD11K CSV "
        "keeps the authors' split: when the store holds images and videos, -o X.csv becomes two files, "
        "X_images.csv and X_videos.csv (the summary names them); --kind image or --kind video writes exactly "
        "X.csv.",
        epilog=examples(
            "vhd export demo.db -o vhd11k.csv",
            "vhd export demo.db --kind image -o images.csv",
            "vhd export demo.db --format jsonl -o annotations.jsonl",
        ),
    )
    p.add_argument("store", help="the SQLite store")
    fmt = p.add_argument("--format", default="vhd11k-csv", help="output format (default vhd11k-csv)")
    fmt.choices = RegistryNames(_export_formats)  # set after add_argument: read only when used
    p.add_argument(
        "-o",
        "--out",
        required=True,
        help="output file (VHD11K CSV with images and videos: X_images.csv + X_videos.csv)",
    )
    p.add_argument("--config-hash", help="only annotations made under this configuration (prefix ok)")
    p.add_argument("--include-unparsed", action="store_true", help="JSONL/Parquet: keep unparsed and error rows")
    p.add_argument("--kind", choices=("image", "video"), help="only images or only videos (one CSV, exactly --out)")
    p.add_argument("--relative-to", metavar="DIR", help="write paths relative to this folder")
    add_json_flag(p)
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
    split = len(result.files) > 1 and Path(args.out) not in result.files
    if args.json:
        print_json(
            {
                "written": result.written,
                "files": result.files,
                "split_by_kind": split,
                "left_out": result.left_out_counts,
            }
        )
        return 0
    files = ", ".join(str(f) for f in result.files) or "no file"
    print(f"wrote {result.written} annotation(s) to {files}")
    if split:
        print(
            f"images and videos went to separate files, as VHD11K ships them (not {args.out}); "
            "--kind image or --kind video writes one file with exactly that name"
        )
    for why, count in sorted(result.left_out_counts.items()):
        print(f"left out {count}: {why}")
    return 0
