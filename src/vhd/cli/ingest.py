"""``vhd ingest``: register media files, folders and manifests as samples of a store."""

from __future__ import annotations

import argparse
import json
from typing import Any

from vhd.cli.habits import examples
from vhd.cli.label_flags import add_outside_flag
from vhd.fileio import printable
from vhd.records import Source

WHERE = {
    "invalid": "all are in the store's skips table",
    "blocked": "all are in the store's quarantine table",
    "refused": "all are in the store's removals table",
}


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="register media as samples of a store (validated, resumable)",
        description=(
            "Register images, videos, folders and manifests as samples of a store: each file is hashed "
            "(id = sha256 of its bytes), validated as the annotator does, and upserted; invalid files are "
            "listed with their reason and skipped. Running it again only adds what is new."
        ),
        epilog=examples(
            "vhd ingest crawl/ --store run.db --source real --keyword-from-folder",
            "vhd ingest sdxl_out/ --store run.db --source synthetic --generator sdxl",
        ),
    )
    p.add_argument("inputs", nargs="+", metavar="PATH", help="image/video files, folders, manifests")
    p.add_argument("--store", default="vhd.db", help="SQLite store (default: vhd.db)")
    p.add_argument(
        "--source", choices=tuple(s.value for s in Source), help="source of samples whose manifest gives none"
    )
    p.add_argument("--keyword", help="keyword of samples whose manifest gives none")
    p.add_argument(
        "--keyword-from-folder",
        action="store_true",
        help="use each file's folder name as its keyword (when none given)",
    )
    p.add_argument("--generator", help="generative model of synthetic samples (implies --source synthetic)")
    p.add_argument("--prompt", help="prompt of synthetic samples, kept in their metadata")
    p.add_argument("--block-hashes", metavar="FILE", help="hash block list: matching files are quarantined, not added")
    p.add_argument("--quarantine", metavar="DIR", help="move blocked files here as <sha256>.blocked")
    p.add_argument(
        "--frame-folders", action="store_true", help="treat folders of numbered frames (<stem>_0000.png ...) as videos"
    )
    p.add_argument(
        "--rehash",
        action="store_true",
        help="read and hash every file again (default: files with an unchanged stat are not re-read)",
    )
    add_outside_flag(p)
    p.add_argument("--jobs", type=int, default=2, metavar="N", help="files validated at once (default 2)")
    p.add_argument("--strict", action="store_true", help="exit 1 when any file was invalid or blocked")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.curate.ingest import IngestDefaults, ingest
    from vhd.progress import bar
    from vhd.store.sqlite import Store

    defaults = IngestDefaults(
        source=args.source,
        keyword=args.keyword,
        keyword_from_folder=args.keyword_from_folder,
        generator=args.generator,
        prompt=args.prompt,
    )
    with Store(args.store, create=True) as store, bar("ingesting", not (args.no_progress or args.json)) as on_progress:
        result = ingest(
            args.inputs,
            store,
            defaults=defaults,
            block_list=args.block_hashes,
            quarantine_dir=args.quarantine,
            frame_folders=args.frame_folders,
            jobs=args.jobs,
            rehash=args.rehash,
            progress=on_progress,
            allow_outside_paths=args.allow_outside_paths,
        )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(
            f"{result.count('added')} sample(s) added, {result.count('updated')} updated, "
            f"{result.count('unchanged')} already there, {result.count('invalid')} invalid, "
            f"{result.count('blocked')} blocked, {result.count('refused')} removed earlier "
            f"({result.elapsed_s:.1f} s); store: {args.store}"
        )
        for label, entries in (("invalid", result.invalid), ("blocked", result.blocked), ("refused", result.refused)):
            for path, reason in entries[:20]:
                print(printable(f"{label} {path}: {reason}"))
            if result.count(label) > 20:
                print(f"... {result.count(label) - 20} more {label} ({WHERE[label]})")
        if result.rows_left_out:
            print(f"{result.rows_left_out} manifest row(s) could not be read and were left out (listed above)")
    bad = result.problems
    return 1 if result.rows_left_out or (args.strict and bad) else 0
