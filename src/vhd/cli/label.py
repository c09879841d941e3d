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
            "vhd label --store run.db --import-labelstudio export.json --set people",
            "vhd label --store run.db --push-labelstudio http://127.0.0.1:8080 --project vhd --media-root /data",
            "vhd label --store run.db --pull-labelstudio http://127.0.0.1:8080 --project vhd --media-root /data",
        ),
    )
    p.add_argument("labels", nargs="?", metavar="LABELS", help="labels CSV or VHD11K annotation file to import")
    p.add_argument("--store", default="vhd.db", help="SQLite store (default: vhd.db)")
    p.add_argument("--set", dest="set_name", metavar="NAME", help="labelled set (default: the file's stem)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--export-labelstudio", metavar="OUT.json", help="write Label Studio tasks + OUT.xml config")
    mode.add_argument(
        "--import-labelstudio", metavar="EXPORT.json", help="read a Label Studio export (JSON or JSON-MIN)"
    )
    mode.add_argument("--push-labelstudio", metavar="URL", help="send tasks to this Label Studio server (--project)")
    mode.add_argument(
        "--pull-labelstudio",
        metavar="URL",
        help="import the decisions of --project (and of its 'NAME (videos)' project) from this server",
    )
    p.add_argument("--project", metavar="NAME", help="Label Studio project title for --push/--pull-labelstudio")
    p.add_argument(
        "--only-new",
        action="store_true",
        help="--push-labelstudio: add new samples only (default: also update the data and vhd's prediction of "
        "tasks already pushed; people's annotations are always kept)",
    )
    p.add_argument(
        "--export-type", choices=("JSON", "JSON_MIN"), default="JSON", help="--pull-labelstudio: export format"
    )
    p.add_argument("--save-export", metavar="FILE", help="--pull-labelstudio: keep the downloaded export here")
    p.add_argument("--media-root", default="/", help="folder media URLs are relative to (Label Studio's document root)")
    p.add_argument("--url-prefix", default=None, help="media URL prefix (default /data/local-files/?d=)")
    p.add_argument("--config-hash", metavar="HASH", help="export verdicts of this configuration (default: latest)")
    add_json_flag(p)
    add_label_flags(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.errors import ConfigError
    from vhd.labels.labelstudio.convert import LOCAL_FILES, LabelStudioImport, export_labelstudio, import_labelstudio

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
    if args.push_labelstudio:
        return _push(args)
    if args.import_labelstudio or args.pull_labelstudio:
        got: LabelStudioImport
        notes: list[str] = []
        if args.pull_labelstudio:
            from vhd.labels.labelstudio.api import pull_labelstudio

            got = pulled = pull_labelstudio(
                args.pull_labelstudio,
                _project(args),
                store=args.store,
                name=args.set_name or "labelstudio",
                media_root=args.media_root,
                export_type=args.export_type,
                save_to=args.save_export,
            )
            notes = [f"pulled project {title!r}" for title in pulled.projects]
            notes += [f"no project {title!r} on the server: nothing pulled from it" for title in pulled.missing]
        else:
            got = import_labelstudio(
                args.import_labelstudio,
                store=args.store,
                name=args.set_name or "labelstudio",
                media_root=args.media_root,
            )
        if args.json:
            print_json(got)
            return 1 if got.skipped else 0
        for note in notes:
            print(printable(note))
        for task in got.skipped[:20]:
            print(printable(f"{task.name}: {task.reason}"))
        if len(got.skipped) > 20:
            print(f"... and {len(got.skipped) - 20} more task(s) left out")
        if got.decided > got.samples:
            print(
                f"{got.decided - got.samples} task(s) named a sample another task named too: the newest decision counts"
            )
        if got.undecided:
            print(
                f"{len(got.undecided)} task(s) not decided in Label Studio (no submitted annotation, or skipped "
                f"there): not labelled, e.g. {got.undecided[0].name}"
            )
        print(
            f"{got.tasks} task{'s' * (got.tasks != 1)} -> {got.samples} sample(s) ({got.harmful} harmful) "
            f"in set {got.name!r} of {args.store}; {len(got.skipped)} task(s) left out"
        )
        return 1 if got.skipped else 0
    if not args.labels:
        raise ConfigError(
            "give a LABELS file, --export-labelstudio OUT.json, --import-labelstudio EXPORT.json, "
            "--push-labelstudio URL or --pull-labelstudio URL"
        )
    from vhd.labels.sets import import_labels

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


def _project(args: argparse.Namespace) -> str:
    from vhd.errors import ConfigError

    if not args.project:
        raise ConfigError("--push-labelstudio / --pull-labelstudio need --project NAME (the project's title)")
    return str(args.project)


def _push(args: argparse.Namespace) -> int:
    from vhd.labels.labelstudio.api import push_labelstudio

    res = push_labelstudio(
        args.push_labelstudio,
        _project(args),
        store=args.store,
        name=args.set_name,
        config_hash=args.config_hash,
        media_root=args.media_root,
        only_new=args.only_new,
    )
    if args.json:
        print_json(res)
        return 0
    for title, pid in res.projects.items():
        state = "created" if title in res.created else "existing"
        print(printable(f"project {title!r} ({state}, id {pid}) at {args.push_labelstudio}/projects/{pid}"))
    print(
        f"{res.tasks} new task(s) added ({res.with_predictions} with the annotator's verdict as a pre-annotation), "
        f"{res.updated} already pushed updated, {res.unchanged} left as they were; "
        f"local storage {', '.join(res.storages)}"
    )
    return 0
