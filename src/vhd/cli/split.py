"""``vhd split``: assign a store's samples to train and test, balanced and leak-free."""

from __future__ import annotations

import argparse
import json
from typing import Any

from vhd.cli.habits import examples
from vhd.cli.label_flags import add_label_flags, label_options
from vhd.fileio import printable


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="split samples into train/test, balanced over harmful x real/synthetic",
        description=(
            "Assign every sample of a store to train or test with the same test fraction in each stratum "
            "(harmful/unharmful x real/synthetic), keeping each duplicate cluster (vhd dedup --apply) on one "
            "side. Deterministic for a seed. --out writes id,path,split,harmful, which reads back with vhd label. "
            "Exit 1 when rows of --labels were left out (each is listed)."
        ),
        epilog=examples(
            "vhd split --store run.db --test 0.2 --seed 13 --out splits.csv",
            "vhd split --store run.db --dry-run --json",
        ),
    )
    p.add_argument("--store", required=True, help="the SQLite store")
    p.add_argument("--test", type=float, default=0.2, help="fraction of each stratum in test (default 0.2)")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--labels", metavar="CSV", help="labels CSV taking precedence over the store's annotations")
    p.add_argument("--out", metavar="CSV", help="also write id,path,split,harmful")
    p.add_argument("--dry-run", action="store_true", help="show the split without writing it to the store")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_label_flags(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.curate.split import split_store, write_split_csv
    from vhd.store.sqlite import open_store

    options = label_options(args)
    with open_store(args.store) as store:
        result = split_store(
            store, test=args.test, seed=args.seed, labels=args.labels, dry_run=args.dry_run, label_options=options
        )
        if args.out:
            write_split_csv(store, result, args.out)
    if args.json:
        data = {
            "strata": result.strata,
            "units": result.units,
            "labels_from": result.labels_from,
            "written": result.written,
            "label_problems": result.label_problems,
        }
        print(json.dumps(data, indent=2))
        return 1 if result.rows_left_out else 0
    for line in result.label_problems[:20]:
        print(printable(f"{args.labels} {line}"))
    if len(result.label_problems) > 20:
        print(f"... and {len(result.label_problems) - 20} more row(s) of {args.labels}")
    print("\n".join(result.table()))
    origin = ", ".join(f"{v} from {k}" for k, v in sorted(result.labels_from.items()))
    where = "written to the store" if result.written else "not written (dry run)"
    print(f"{len(result.assignments)} sample(s) in {result.units} unit(s); labels: {origin}; {where}")
    if result.rows_left_out:
        print(f"{result.rows_left_out} row(s) of {args.labels} left out (listed above)")
    return 1 if result.rows_left_out else 0
