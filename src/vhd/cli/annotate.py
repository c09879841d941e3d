"""``vhd annotate``: debate-annotate images, videos, frame folders and manifests."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from vhd.cli.label_flags import add_outside_flag
from vhd.config import DEFAULT_MODEL, MODEL_ENV
from vhd.fileio import printable


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="annotate media by a debate of vision-language models",
        description=(
            "Annotate images, videos, frame folders and manifests (CSV/JSONL with a path column) "
            "by a debate of vision-language models; results go to a SQLite store and the run "
            "resumes where it stopped."
        ),
        epilog=(
            f"Model specs are BACKEND:MODEL (backends: openai, hf, scripted). Without --model, "
            f"${MODEL_ENV} or a config file, every role uses {DEFAULT_MODEL}. Endpoints and keys "
            "go in the config file: [backends.openai] base_url = ..., api_key_env = ..."
        ),
    )
    p.add_argument("inputs", nargs="+", metavar="PATH", help="image/video files, folders, manifests")
    p.add_argument("--model", help="BACKEND:MODEL for every role, e.g. openai:gpt-4o")
    p.add_argument("--affirmative", metavar="SPEC", help="model of the affirmative debater")
    p.add_argument("--negative", metavar="SPEC", help="model of the negative debater")
    p.add_argument("--debaters", metavar="SPEC", help="model of both debaters")
    p.add_argument("--judge", metavar="SPEC", help="model of the judge")
    p.add_argument("--store", default="vhd.db", help="SQLite store (default: vhd.db)")
    p.add_argument("--config", metavar="FILE", help="TOML or YAML config file")
    p.add_argument("--concurrency", type=int, metavar="N", help="samples in flight (default 16)")
    p.add_argument("--icl", metavar="PATH", help="in-context examples for the judge (file or folder)")
    p.add_argument("--rounds", type=int, metavar="R", help="debate rounds (default 2)")
    p.add_argument("--retry-unparsed", action="store_true", help="ask again where the judge's reply was unreadable")
    p.add_argument(
        "--rehash",
        action="store_true",
        help="read and hash every file again (default: files with an unchanged stat are not re-read)",
    )
    p.add_argument(
        "--frame-folders", action="store_true", help="treat folders of numbered frames (<stem>_0000.png ...) as videos"
    )
    p.add_argument(
        "--include-duplicates", action="store_true", help="also annotate duplicates marked by `vhd dedup --apply`"
    )
    add_outside_flag(p)
    p.add_argument("--dry-run", action="store_true", help="count samples and estimate calls, tokens and cost")
    p.add_argument("--max-cost", type=float, metavar="USD", help="stop cleanly at this spend (needs [prices])")
    p.add_argument("--strict", action="store_true", help="exit 1 when any input file was skipped")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=run)


def _fmt_summary(s: Any) -> list[str]:
    u = s.usage
    rate = s.annotated / s.elapsed_s if s.elapsed_s > 0 else 0.0
    lines = [
        f"annotated {s.annotated} sample(s) in {s.elapsed_s:.1f} s ({rate:.2f}/s): "
        f"{s.harmful} harmful, {s.unharmful} unharmful, {s.refused} decided by refusal, {s.unparsed} unparsed",
        f"{s.already_done} already done, {s.errors} error(s), {s.skipped} skipped file(s), "
        f"{s.duplicates} repeated input(s), {s.excluded} excluded (removed, quarantined or marked duplicate), "
        f"{s.remaining} not attempted",
        f"{u.calls} calls, {u.prompt_tokens:,} prompt + {u.completion_tokens:,} completion tokens"
        + (f", ${u.cost:.4f}" if u.cost else ""),
    ]
    if s.leased:
        pending = (
            f"{s.leased_unfinished} not finished there yet: run the same command again once it ends"
            if s.leased_unfinished
            else "all finished there"
        )
        lines.append(f"{s.leased} leased by another run on this store ({pending})")
    for path, reason in s.skip_reasons[:10]:
        lines.append(f"skipped {path}: {reason}")
    if len(s.skip_reasons) > 10:
        lines.append(f"... {len(s.skip_reasons) - 10} more skipped (see the store's skips)")
    if s.errors:
        lines.append("samples with errors are retried when you run the same command again")
    lines.append(f"store: {s.store}; see one sample with `vhd show {s.store} PATH`")
    return lines


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.annotate.api import annotate

    def event(message: str) -> None:
        print(f"vhd: {printable(message)}", file=sys.stderr)

    summary = annotate(
        args.inputs,
        model=args.model,
        affirmative=args.affirmative,
        negative=args.negative,
        debaters=args.debaters,
        judge=args.judge,
        store=args.store,
        config=args.config,
        concurrency=args.concurrency,
        icl=args.icl,
        rounds=args.rounds,
        retry_unparsed=args.retry_unparsed,
        rehash=args.rehash,
        frame_folders=args.frame_folders,
        include_duplicates=args.include_duplicates,
        allow_outside_paths=args.allow_outside_paths,
        dry_run=args.dry_run,
        max_cost=args.max_cost,
        progress=not args.no_progress and not args.json,
        command=shlex.join(["vhd", "annotate", *sys.argv[2:]]),
        on_event=event,
    )
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2, default=str))
    elif summary.dry_run and summary.estimate is not None:
        e = summary.estimate
        cost = (
            "unknown (add [prices] to the config)" if e["cost_max_usd"] is None else f"at most ${e['cost_max_usd']:.2f}"
        )
        print(
            f"{e['samples']} sample(s) ({e['images']} images, {e['videos']} videos), {e['already_done']} already done, "
            f"{e['unreadable']} unreadable; {e['to_annotate']} to annotate with {e['calls']} calls, "
            f"at most {e['prompt_tokens_max']:,} prompt + {e['completion_tokens_max']:,} completion tokens; cost {cost}"
        )
    else:
        print("\n".join(printable(line) for line in _fmt_summary(summary)))
    if summary.store_error:
        print(f"vhd: error: {printable(summary.store_error)}", file=sys.stderr)
    return summary.exit_code(strict=args.strict)
