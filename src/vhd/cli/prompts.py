"""``vhd prompts``: expand keywords into distinct one-sentence scene prompts with a chat model."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from vhd.cli.habits import examples

EXAMPLES = examples(
    "vhd prompts --per-keyword 100 --model openai:llama3.1-8b --out prompts.csv",
    'vhd prompts --keywords "knife in hand,toy" --per-keyword 20 --model hf:Qwen/Qwen2.5-1.5B-Instruct --out p.csv',
    "vhd prompts --keywords keywords.txt --per-keyword 50 --model openai:gpt-4o-mini --similarity 0.85 --json",
)


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="expand keywords into scene prompts for `vhd generate`",
        description=(
            "Ask a chat model (text only) for N distinct one-sentence scene descriptions per keyword and write "
            "prompt,keyword,id,model,template rows to a CSV. Refusals, the safety floor (minors with sexual "
            "content: always refused) and duplicates (exact, then by sentence-embedding similarity) are counted "
            "per keyword. Running it again asks only for the prompts still missing."
        ),
        epilog=EXAMPLES,
    )
    p.add_argument("--model", required=True, metavar="BACKEND:MODEL", help="the chat model (openai:..., hf:...)")
    p.add_argument(
        "--keywords",
        action="append",
        metavar="FILE_OR_WORDS",
        help="a keyword file, or comma-separated keywords (repeatable; default: the 45 VHD11K keywords)",
    )
    p.add_argument("--harmful-only", action="store_true", help="skip unharmful keywords")
    p.add_argument("--per-keyword", type=int, default=100, metavar="N", help="distinct prompts per keyword (100)")
    p.add_argument("--out", default="prompts.csv", metavar="FILE", help="CSV to write or extend (prompts.csv)")
    p.add_argument("--template", metavar="FILE_OR_TEXT", help="request template with {keyword} and {n}")
    p.add_argument("--batch", type=int, default=20, metavar="N", help="prompts asked for per request (20)")
    p.add_argument("--max-requests", type=int, metavar="N", help="request budget per keyword")
    p.add_argument(
        "--similarity", type=float, default=0.9, metavar="T", help="near-duplicate cosine threshold (0.9; 1 = off)"
    )
    p.add_argument("--embed-model", metavar="NAME", help="sentence-transformers model (default all-MiniLM-L6-v2)")
    p.add_argument("--concurrency", type=int, default=4, metavar="N", help="keywords asked at once (4)")
    p.add_argument("--config", metavar="FILE", help="TOML or YAML config file ([backends.*])")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.cli.crawl import keyword_list
    from vhd.synth.prompts import prompts

    def progress(report: Any) -> None:
        if not args.json:
            note = f", {report.short} short" if report.short else ""
            print(
                f"{report.keyword}: {report.had + report.added}/{report.wanted} ({report.added} new, "
                f"{report.refusals} refusals, {report.floor_refused} floor{note})",
                file=sys.stderr,
            )

    result = prompts(
        keyword_list(args.keywords, args.harmful_only),
        args.per_keyword,
        args.out,
        model=args.model,
        config=args.config,
        template=args.template,
        similarity=args.similarity,
        embed_model=args.embed_model,
        batch=args.batch,
        max_requests=args.max_requests,
        concurrency=args.concurrency,
        on_keyword=progress,
    )
    summary = result.to_dict()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"{summary['added']} new prompts in {result.out} ({summary['requests']} requests, "
            f"{summary['refusals']} refusals, {summary['floor_refused']} refused by the safety floor, "
            f"{summary['exact_duplicates'] + summary['near_duplicates']} duplicates)"
        )
        if summary["short"]:
            print(f"{summary['short']} prompts short: run again (or raise --max-requests)")
    return 1 if summary["short"] else 0
