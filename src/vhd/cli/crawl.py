"""``vhd crawl``: search a source for each keyword and write a URL list for `vhd fetch`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from vhd.cli.habits import examples
from vhd.errors import ConfigError
from vhd.registry import Registry, RegistryNames


def _crawl_sources() -> Registry[Any]:
    from vhd.collect.crawl import CRAWL_SOURCES

    return CRAWL_SOURCES


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="search image/video sources per keyword and write a URL list",
        description=(
            "Search a source (pexels, icrawler:ENGINE, ytdlp:SITE) for every keyword and write a URL-list "
            "CSV (url, kind, keyword, source, crawler, page_url, ...) that `vhd fetch` downloads. Running "
            "it again resumes with the keywords not finished yet."
        ),
        epilog=examples(
            "vhd crawl --source pexels --per-keyword 40 --out urls.csv",
            "vhd crawl --source icrawler:bing --keywords kw.txt --per-keyword 100 --out urls.csv",
            "vhd crawl --source ytdlp:youtube --keywords kw.txt --kind video --per-keyword 20 --out urls.csv",
            note="Pexels needs PEXELS_API_KEY in the environment.",
        ),
    )
    source = p.add_argument("--source", required=True, metavar="NAME[:OPTION]", help="%(sources)s")
    # The list is read when help is shown (argparse fills %(sources)s from the action's attributes).
    vars(source).update(sources=RegistryNames(_crawl_sources, describe=True))
    p.add_argument("--per-keyword", type=int, required=True, metavar="N", help="URLs wanted per keyword (and kind)")
    p.add_argument(
        "--keywords",
        action="append",
        metavar="FILE_OR_WORDS",
        help="a keyword file, or comma-separated keywords (repeatable; default: the 45 VHD11K keywords)",
    )
    p.add_argument("--harmful-only", action="store_true", help="skip unharmful keywords")
    p.add_argument(
        "--kind",
        choices=("image", "video", "both"),
        default="both",
        help="what to search for (default: all the source finds)",
    )
    p.add_argument(
        "--out", default="urls.csv", metavar="FILE", help="URL-list CSV to write or extend (default urls.csv)"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a source setting, e.g. base_url=... (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=run)


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """Turn ``KEY=VALUE`` pairs into settings; ``a.b=v`` nests; values are JSON when they parse."""
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {pair!r} must be KEY=VALUE")
        *parents, leaf = key.strip().split(".")
        node = settings
        for parent in parents:
            node = node.setdefault(parent, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {pair!r}: {parent} is already a value")
        node[leaf] = _value(value)
    return settings


def keyword_list(values: list[str] | None, harmful_only: bool) -> list[str]:
    """Resolve ``--keywords`` values (files or comma-separated words) to keyword names."""
    from vhd.collect.keywords import load_keywords

    if not values:
        return [k.name for k in load_keywords() if k.harmful or not harmful_only]
    words: list[str] = []
    for value in values:
        if Path(value).is_file():
            words += [k.name for k in load_keywords(value) if k.harmful or not harmful_only]
        else:
            words += [w.strip() for w in value.split(",") if w.strip()]
    return list(dict.fromkeys(words))


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.collect.crawl import crawl

    def progress(entry: Any) -> None:
        if args.json:
            return
        state = "finished earlier" if entry.skipped else entry.error or f"{entry.found} found, {entry.added} new"
        print(f"{entry.keyword} ({entry.kind}): {state}", file=sys.stderr)

    result = crawl(
        keyword_list(args.keywords, args.harmful_only),
        source=args.source,
        per_keyword=args.per_keyword,
        out=args.out,
        kind=None if args.kind == "both" else args.kind,
        settings=parse_settings(args.set),
        on_keyword=progress,
    )
    if args.json:
        payload = {
            "out": str(result.out),
            "crawler": result.crawler,
            "rows": result.rows,
            "stopped": result.stopped,
            "keywords": [vars(k) for k in result.keywords],
        }
        print(json.dumps(payload, indent=2))
    else:
        print("\n".join(result.describe()))
    return result.exit_code()
