"""``vhd icl``: search the judge's in-context examples on a human-labelled validation set."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from vhd.cli.habits import add_json_flag, examples, print_json
from vhd.cli.label_flags import add_label_flags, label_options
from vhd.cli.model_flags import add_model_flags, model_overrides
from vhd.fileio import printable
from vhd.registry import Registry, RegistryNames


def _icl_metrics() -> Registry[Any]:
    from vhd.icl.metrics import ICL_METRICS

    return ICL_METRICS


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="choose the judge's in-context examples on human-labelled samples",
        description=(
            "The paper's iterative search: annotate the validation samples without examples, then add "
            "misclassified samples as examples a few at a time (false negatives and false positives in "
            "turn, most confident first), keep the best-scoring set, and report it like Table 4. Sets are "
            "scored on the samples that are not their examples; --holdout keeps a share for a final "
            "estimate. Resumable: run the same command again."
        ),
        epilog=examples(
            "vhd icl --validation labels.csv --model openai:gpt-4o --out icl/",
            "vhd icl --validation validation --store run.db --model openai:gpt-4o --out icl/ --max-cost 5",
        ),
    )
    p.add_argument("--validation", required=True, metavar="LABELS_OR_SET", help="labels CSV or labelled set name")
    add_model_flags(p, roles=(), icl=False, concurrency=False, model_help="BACKEND:MODEL for every role")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (rounds, best/, report.md)")
    p.add_argument("--max-rounds", type=int, default=5, metavar="K", help="rounds after round 0 (default 5)")
    p.add_argument("--per-round", type=int, default=3, metavar="N", help="examples added a round, 2-4 (default 3)")
    metric = p.add_argument("--metric", default="f1", help="ranking metric")
    metric.choices = RegistryNames(_icl_metrics)  # set after add_argument: read only when used
    p.add_argument("--patience", type=int, default=2, metavar="P", help="rounds without improvement (default 2)")
    p.add_argument("--holdout", type=float, default=0.2, metavar="SHARE", help="held-out share (default 0.2)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split and tie-breaks (default 0)")
    p.add_argument("--max-calls", type=int, metavar="N", help="stop cleanly before exceeding N model calls")
    p.add_argument("--max-cost", type=float, metavar="USD", help="stop cleanly at this spend (needs [prices])")
    p.add_argument("--store", metavar="FILE", help="SQLite store (default: OUT/icl.db)")
    p.add_argument("--config", metavar="FILE", help="TOML or YAML config file")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_json_flag(p)
    add_label_flags(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.annotate.options import RunOptions
    from vhd.icl.search import search_icl
    from vhd.progress import bar

    with bar("annotating", not (args.no_progress or args.json), unit="samples") as on_progress:
        result = search_icl(
            args.validation,
            out=args.out,
            **model_overrides(args),
            config=args.config,
            store=args.store,
            max_rounds=args.max_rounds,
            per_round=args.per_round,
            metric=args.metric,
            patience=args.patience,
            holdout=args.holdout,
            seed=args.seed,
            max_calls=args.max_calls,
            options=RunOptions(max_cost=args.max_cost),
            progress=on_progress,
            on_event=lambda m: print(printable(m), file=sys.stderr),
            label_options=label_options(args),
        )
    if args.json:
        print_json(result)
        return result.exit_code()
    if result.best_examples is not None:
        print(f"best: round {result.best_round} ({result.best_examples}); use it with --icl {result.best_examples}")
    print(f"report: {result.out / 'report.md'}; stopped: {result.stopped}")
    return result.exit_code()
