"""``vhd runs``: the annotation runs of a store and their configurations; diff two."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from vhd.cli.habits import examples
from vhd.fileio import printable


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="list the runs and configurations in a store; diff two runs",
        description="List every annotation run of a store (id, when, models, configuration hash, samples "
        "annotated, command), or show what differs between two runs' configurations.",
        epilog=examples(
            "vhd runs vhd.db",
            "vhd runs vhd.db --diff 1 2",
            "vhd runs vhd.db --diff 3f2a9c 81be07 --json",
            note="A run is named by its number in the list (1 = oldest) or by a prefix of its id.",
        ),
    )
    p.add_argument("store", help="the SQLite store")
    p.add_argument("--diff", nargs=2, metavar=("A", "B"), help="show how run B's configuration differs from run A's")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(handler=run)


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t is not None else "-"


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.annotate.runs import diff_runs, list_runs

    if args.diff:
        d = diff_runs(args.store, args.diff[0], args.diff[1])
        if args.json:
            print(json.dumps(d.to_dict(), indent=2, default=str))
            return 0
        same = "the same configuration hash" if d.same_config else "different configuration hashes"
        print(f"run {d.a[:12]} -> run {d.b[:12]}: {same}, {len(d.changed)} key(s) differ")
        for key, (va, vb) in d.changed.items():
            print(printable(f"  {key}: {json.dumps(va, default=str)} -> {json.dumps(vb, default=str)}"))
        return 0
    rows = list_runs(args.store)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2, default=str))
        return 0
    if not rows:
        print(f"no runs in {args.store} yet")
        return 0
    for n, r in enumerate(rows, 1):
        state = "running or stopped" if r.finished_at is None else f"finished {_when(r.finished_at)}"
        models = ", ".join(f"{role}={spec}" for role, spec in sorted(r.models.items()))
        done = "?" if r.annotated is None else str(r.annotated)
        print(
            printable(
                f"{n:>3}  {r.id[:12]}  started {_when(r.started_at)}, {state}; config {r.config_hash[:12]}; "
                f"{done} annotated; {models}; vhd {r.vhd_version}" + (f"; policy {r.policy}" if r.policy else "")
            )
        )
        if r.command:
            print(printable(f"     {r.command}"))
    return 0
