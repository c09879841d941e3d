"""``vhd split``: assign a store's samples to train and test, balanced and leak-free."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="split samples into train/test, balanced over harmful x real/synthetic",
        description=(
            "Assign every sample of a store to train or test with the same test fraction in each stratum "
            "(harmful/unharmful x real/synthetic), keeping each duplicate cluster (vhd dedup --apply) on one "
            "side. Deterministic for a seed."
        ),
    )
    p.add_argument("--store", required=True, help="the SQLite store")
    p.add_argument("--test", type=float, default=0.2, help="fraction of each stratum in test (default 0.2)")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--labels", metavar="CSV", help="labels CSV taking precedence over the store's annotations")
    p.add_argument("--out", metavar="CSV", help="also write id,path,split")
    p.add_argument("--dry-run", action="store_true", help="show the split without writing it to the store")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.curate.split import split_store, write_split_csv
    from vhd.store.sqlite import open_store

    with open_store(args.store) as store:
        result = split_store(store, test=args.test, seed=args.seed, labels=args.labels, dry_run=args.dry_run)
        if args.out:
            write_split_csv(store, result, args.out)
    if args.json:
        data = {
            "strata": result.strata,
            "units": result.units,
            "labels_from": result.labels_from,
            "written": result.written,
        }
        print(json.dumps(data, indent=2))
        return 0
    print("\n".join(result.table()))
    origin = ", ".join(f"{v} from {k}" for k, v in sorted(result.labels_from.items()))
    where = "written to the store" if result.written else "not written (dry run)"
    print(f"{len(result.assignments)} sample(s) in {result.units} unit(s); labels: {origin}; {where}")
    return 0
