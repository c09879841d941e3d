"""``vhd export``: write a store's annotations as VHD11K CSV, JSONL or Parquet."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from vhd.cli.habits import add_json_flag, examples, print_json
from vhd.registry import Registry, RegistryNames


def _export_formats() -> Registry[Any]:
    from vhd.export import EXPORT_FORMATS

    return EXPORT_FORMATS


STDOUT = "-"
TEXT_FORMATS = ("jsonl", "csv", "vhd11k-csv")
"""The formats ``-o -`` writes to stdout."""


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="export annotations (VHD11K CSV, JSONL, Parquet, a Hugging Face or FiftyOne dataset)",
        description="Write a store's annotations as the VHD11K release CSV, JSON Lines or Parquet. The VHD11K CSV "
        "keeps the authors' split: when the store holds images and videos, -o X.csv becomes two files, "
        "X_images.csv and X_videos.csv (the summary names them); --kind image or --kind video writes exactly "
        "X.csv. --format hf writes a folder that datasets.load_from_disk opens (one split per vhd split, images "
        "and videos in one schema, a dataset card README.md); --push-to-hub REPO also sends it to the hub. "
        "--format fiftyone writes FiftyOne's dataset folder (samples.json, metadata.json, the media in data/) "
        "that fo.Dataset.from_dir(DIR, dataset_type=fo.types.FiftyOneDataset) loads. Sample "
        "paths are written relative to the deepest folder holding every exported sample (or to --relative-to DIR), "
        "so a shared file names no local folder or user; --absolute-paths writes them as stored (never with "
        "--push-to-hub).",
        epilog=examples(
            "vhd export demo.db --relative-to ~/data -o vhd11k.csv",
            "vhd export demo.db --format hf -o vhd_dataset/",
            "vhd export demo.db --format fiftyone -o vhd_fiftyone/",
            "vhd export demo.db --absolute-paths --format jsonl -o local.jsonl",
        ),
    )
    p.add_argument("store", help="the SQLite store")
    fmt = p.add_argument("--format", default="vhd11k-csv", help="output format (default vhd11k-csv)")
    fmt.choices = RegistryNames(_export_formats)  # set after add_argument: read only when used
    p.add_argument(
        "-o",
        "--out",
        required=True,
        help="output file (VHD11K CSV with images and videos: X_images.csv + X_videos.csv); "
        "- writes JSONL or CSV to stdout (the summary goes to stderr)",
    )
    p.add_argument("--config-hash", help="only annotations made under this configuration (prefix ok)")
    p.add_argument("--include-unparsed", action="store_true", help="JSONL/Parquet: keep unparsed and error rows")
    p.add_argument("--kind", choices=("image", "video"), help="only images or only videos (one CSV, exactly --out)")
    paths = p.add_mutually_exclusive_group()
    paths.add_argument(
        "--relative-to", metavar="DIR", help="write paths relative to this folder (default: the samples' common folder)"
    )
    paths.add_argument(
        "--absolute-paths", action="store_true", help="write absolute local paths, as stored (not with --push-to-hub)"
    )
    hub = p.add_argument_group("--format hf")
    hub.add_argument("--push-to-hub", metavar="REPO", help="also push the dataset to this hub repo (token: $HF_TOKEN)")
    hub.add_argument("--public", action="store_true", help="make the pushed repository public (default: private)")
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.export import export
    from vhd.store.sqlite import open_store

    to_stdout = args.out == STDOUT
    if to_stdout and args.format not in TEXT_FORMATS:
        from vhd.errors import ConfigError

        raise ConfigError(f"-o - writes {' or '.join(TEXT_FORMATS)} to stdout; give --format {args.format} a file name")
    with open_store(args.store) as db, tempfile.TemporaryDirectory(prefix="vhd-export-") as spool:
        result = export(
            db,
            args.format,
            Path(spool) / f"stdout.{args.format}" if to_stdout else Path(args.out),
            config_hash=db.resolve_config_hash(args.config_hash),
            include_unparsed=args.include_unparsed,
            kind=args.kind,
            relative_to=args.relative_to,
            absolute_paths=args.absolute_paths,
            push_to_hub=args.push_to_hub,
            public=args.public,
        )
        if to_stdout:
            _copy_to_stdout(result.files)
    split = len(result.files) > 1 and Path(args.out) not in result.files and not to_stdout
    report = sys.stderr if to_stdout else sys.stdout
    if args.json:
        summary: dict[str, Any] = {
            "written": result.written,
            "split_by_kind": split,
            "left_out": result.left_out_counts,
        }
        files_out: Any = ["-"] if to_stdout else result.files
        summary |= {"notes": result.notes, **result.details}
        print_json({**summary, "files": files_out, "paths_relative_to": result.root}, file=report)
        return 0
    files = "stdout" if to_stdout else ", ".join(str(f) for f in result.files) or "no file"
    print(f"wrote {result.written} annotation(s) to {files}", file=report)
    if result.root is not None and result.written:
        print(f"sample paths are relative to {result.root} (--absolute-paths writes them as stored)", file=report)
    if split:
        print(
            f"images and videos went to separate files, as VHD11K ships them (not {args.out}); "
            "--kind image or --kind video writes one file with exactly that name",
            file=report,
        )
    for why, count in sorted(result.left_out_counts.items()):
        print(f"left out {count}: {why}", file=report)
    for note in result.notes:
        print(note, file=report)
    return 0


def _copy_to_stdout(files: list[Path]) -> None:
    """Copy the one file written to stdout (the VHD11K CSV of images and videos is two: refused)."""
    if len(files) > 1:
        from vhd.errors import ConfigError

        raise ConfigError(
            "the store holds images and videos, which the VHD11K CSV keeps in two files: "
            "add --kind image or --kind video to write one to stdout, or give -o a file name"
        )
    sys.stdout.flush()
    with open(files[0], "rb") as f:
        shutil.copyfileobj(f, sys.stdout.buffer)
    sys.stdout.buffer.flush()
