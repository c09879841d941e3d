"""``vhd align``: agreement of the annotator with human moral ratings (SMID norms or any CSV)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from vhd.cli.habits import examples
from vhd.cli.model_flags import add_model_flags, model_overrides


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="score the annotator against human ratings (SMID)",
        description=(
            "Turn mean human ratings into labels (strictly below --harmful-below: harmful; strictly above "
            "--unharmful-above: unharmful; the rest left out as neutral), annotate the labelled images by "
            "debate (resumable, into --store) and report accuracy, TPR, TNR and Cohen's kappa with 95% "
            "bootstrap intervals."
        ),
        epilog=examples(
            "vhd align --ratings SMID_norms.csv --media smid/ --model openai:gpt-4o --out align.json",
            "vhd align --ratings SMID_norms.csv --media smid/ --model scripted:demo --json",
            note=(
                "Reads SMID's norms file as published (img_name and moral_mean columns, or the image name in an "
                "unnamed first column); images are found under --media by name with any image extension."
            ),
        ),
    )
    p.add_argument("--ratings", required=True, metavar="CSV", help="ratings file (SMID norms or any CSV)")
    p.add_argument("--media", required=True, metavar="DIR", help="folder holding the rated images")
    add_model_flags(p, roles=("debaters", "judge"))
    p.add_argument("--store", default="vhd.db", help="SQLite store (default: vhd.db)")
    p.add_argument("--config", metavar="FILE", help="TOML or YAML config file")
    p.add_argument("--out", metavar="JSON", help="write the full result (per-image rows included) as JSON")
    p.add_argument("--harmful-below", type=float, default=2.5, metavar="X", help="harmful below this (default 2.5)")
    p.add_argument("--unharmful-above", type=float, default=3.5, metavar="X", help="unharmful above this (default 3.5)")
    p.add_argument("--id-column", metavar="C", help="image-name column (default img_name)")
    p.add_argument("--rating-column", metavar="C", help="mean-rating column (default moral_mean)")
    p.add_argument("--max-cost", type=float, metavar="USD", help="stop the annotation at this spend (needs [prices])")
    p.add_argument("--resamples", type=int, default=1000, metavar="N", help="bootstrap resamples (default 1000)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of the summary")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.align.smid import align_ratings
    from vhd.annotate.options import RunOptions
    from vhd.progress import bar

    with bar("annotating", not args.no_progress and not args.json, unit="samples") as on_progress:
        result = align_ratings(
            args.ratings,
            args.media,
            store=args.store,
            config=args.config,
            harmful_below=args.harmful_below,
            unharmful_above=args.unharmful_above,
            id_column=args.id_column,
            rating_column=args.rating_column,
            **model_overrides(args),
            options=RunOptions(max_cost=args.max_cost, command=shlex.join(["vhd", "align", *sys.argv[2:]])),
            resamples=args.resamples,
            progress=on_progress,
        )
    if args.out:
        result.write_json(args.out)
    if args.json:
        print(json.dumps(result.to_dict(), indent=1, default=str))
    else:
        print("\n".join(result.lines()))
        if args.out:
            print(f"wrote {args.out}")
    store_error = (result.run or {}).get("store_error")
    if store_error:
        print(f"vhd: error: {store_error}", file=sys.stderr)
    elif result.exit_code == 1:
        print("vhd: some images have no verdict yet; run the same command again to retry them", file=sys.stderr)
    return result.exit_code
