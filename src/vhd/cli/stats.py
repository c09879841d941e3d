"""``vhd stats``: the category chart (the paper's figure 3), tables and counts of a store."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from vhd.cli.habits import examples


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="category chart and tables: harmful samples per category, share per keyword and source",
        description=(
            "Write the harmful samples per category (real vs synthetic, images and videos) as a PNG chart and "
            "CSV/Markdown tables, with the harmful share per keyword and per source, the most frequent reasons, "
            "and refusal, unparsed and error counts."
        ),
        epilog=examples(
            "vhd stats --store run.db --out stats/", "vhd stats --store run.db --out stats/ --no-plot --json"
        ),
    )
    p.add_argument("--store", default="vhd.db", help="SQLite store (default: vhd.db)")
    p.add_argument("--out", default="stats", metavar="DIR", help="output folder (default: stats)")
    p.add_argument("--taxonomy", metavar="FILE", help="taxonomy file (YAML/TOML); default VHD11K's")
    p.add_argument(
        "--method", metavar="NAME", help="count this method's stored categories (embed/llm), not the verdicts'"
    )
    p.add_argument("--config-hash", help="only annotations under this configuration (default: each sample's latest)")
    p.add_argument("--top", type=int, default=20, metavar="N", help="reasons to list (default 20)")
    p.add_argument("--no-plot", action="store_true", help="tables only (no matplotlib needed)")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.categorize.stats import compute_stats
    from vhd.categorize.stats_files import category_table, to_markdown, write_stats

    stats = compute_stats(
        args.store, taxonomy=args.taxonomy, method=args.method, config_hash=args.config_hash, top_reasons=args.top
    )
    files = write_stats(stats, args.out, plot=not args.no_plot)
    if args.json:
        print(json.dumps(stats.to_dict(), indent=2, ensure_ascii=False))
        return 0
    t = stats.totals
    print(
        f"{t['annotations']} annotation(s): {t['harmful']} harmful ({t['refused']} by refusal), {t['unharmful']} "
        f"unharmful, {t['unparsed']} unparsed, "
        + (f"{t['truncated']} truncated, " if t.get("truncated") else "")
        + f"{t['errors']} error(s); {t['harmful_uncategorized']} harmful without "
        "a category"
    )
    if stats.decided_by:
        print("decided by (cascade): " + ", ".join(f"{label} {n}" for label, n in stats.decided_by.items()))
    print(to_markdown(*category_table(stats)), end="")
    names = ", ".join(sorted(Path(f).name for f in files))
    print(f"wrote {len(files)} file(s) to {args.out}/: {names}")
    return 0
