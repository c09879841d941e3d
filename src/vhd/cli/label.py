"""``vhd label``: import human labels as a labelled set; Label Studio export and import."""

from __future__ import annotations

import argparse
from typing import Any

from vhd.cli.habits import add_json_flag, examples, print_json
from vhd.cli.label_flags import add_label_flags, label_options
from vhd.fileio import printable


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="import human labels into the store; round-trip them through Label Studio",
        description=(
            "Import a labels CSV (path or id, harmful, optional reason/categories) or a VHD11K file (the "
            "release CSV/JSON, or the authors' judge.csv with a response column) into the store as a named "
            "labelled set, write Label Studio tasks with the annotator's verdicts as pre-annotations, or read "
            "Label Studio's JSON export back into a labelled set. Rows that cannot be used are listed with "
            "their row numbers and the rest are imported (exit 1 when any row was left out)."
        ),
        epilog=examples(
            "vhd label labels.csv --store run.db --set people",
            "vhd label --store run.db --export-labelstudio tasks.json --media-root /data",
            "vhd label --store run.db --import-labelstudio export.json --set people",
        ),
    )
    p.add_argument("labels", nargs="?", metavar="LABELS", help="labels CSV or VHD11K annotation file to import")
    p.add_argument("--store", default="vhd.db", help="SQLite store (default: vhd.db)")
    p.add_argument("--set", dest="set_name", metavar="NAME", help="labelled set (default: the file's stem)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--export-labelstudio", metavar="OUT.json", help="write Label Studio tasks + OUT.xml config")
    mode.add_argument("--import-labelstudio", metavar="EXPORT.json", help="read a Label Studio JSON export")
    p.add_argument("--media-root", default="/", help="folder media URLs are relative to (Label Studio's document root)")
    p.add_argument("--url-prefix", default=None, help="media URL prefix (default /data/local-files/?d=)")
    p.add_argument("--config-hash", metavar="HASH", help="export verdicts of this configuration (default: latest)")
    add_json_flag(p)
    add_label_flags(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.align.labelstudio import LOCAL_FILES, export_labelstudio, import_labelstudio
    from vhd.errors import ConfigError

    if args.export_labelstudio:
        res = export_labelstudio(
            args.export_labelstudio,
            store=args.store,
            name=args.set_name,
            config_hash=args.config_hash,
            media_root=args.media_root,
            url_prefix=args.url_prefix or LOCAL_FILES,
        )
        if args.json:
            print_json(res)
            return 0
        for f in res.files:
            print(f"wrote {f} and {f.with_suffix('.xml')}")
        print(f"{res.tasks} task(s), {res.with_predictions} with the annotator's verdict as a pre-annotation")
        return 0
    if args.import_labelstudio:
        got = import_labelstudio(args.import_labelstudio, store=args.store, name=args.set_name or "labelstudio")
        if args.json:
            print_json(got)
            return 1 if got.skipped else 0
        for task in got.skipped[:20]:
            print(printable(f"{task.name}: {task.reason}"))
        if len(got.skipped) > 20:
            print(f"... and {len(got.skipped) - 20} more task(s) left out")
        if got.decided > got.samples:
            print(
                f"{got.decided - got.samples} task(s) named a sample another task named too: the newest decision counts"
            )
        print(
            f"{got.tasks} task{'s' * (got.tasks != 1)} -> {got.samples} sample(s) ({got.harmful} harmful) "
            f"in set {got.name!r} of {args.store}; {len(got.skipped)} task(s) left out"
        )
        return 1 if got.skipped else 0
    if not args.labels:
        raise ConfigError("give a LABELS file, --export-labelstudio OUT.json or --import-labelstudio EXPORT.json")
    from vhd.align.labels import import_labels

    imp = import_labels(args.labels, store=args.store, name=args.set_name, options=label_options(args))
    if args.json:
        print_json(imp)
        return 1 if imp.skipped else 0
    listed = sorted([*imp.skipped, *imp.notes])
    for line, why in listed[:20]:
        print(printable(f"row {line}: {why}"))
    if len(listed) > 20:
        print(f"... and {len(listed) - 20} more row(s)")
    merged = f", {len(imp.notes)} merged into another row of their sample" if imp.notes else ""
    print(
        f"imported {imp.imported} label(s) ({imp.harmful} harmful) into set {imp.name!r} of {args.store}; "
        f"{len(imp.skipped)} row(s) left out{merged}"
    )
    return 1 if imp.skipped else 0
