"""``vhd fetch``: download a URL list safely and resumably, and report dead or rejected links."""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING, Any

from vhd.cli.habits import examples
from vhd.fileio import printable

if TYPE_CHECKING:
    from vhd.progress import ProgressFn


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="download a URL list (safely, resumably) and report dead links",
        description=(
            "Download the images and videos of a URL list (CSV with a url column, JSONL, JSON or one URL a "
            "line) into OUT as <sha256>.<ext>, checking every URL and redirect (http/https only, no private "
            "addresses), sniffing content (only images and videos are kept) and capping sizes mid-stream. "
            "Running it again fetches only what is missing; OUT/fetch-report.csv lists every failure."
        ),
        epilog=examples(
            "vhd fetch urls.csv --out media/ --store run.db",
            "vhd fetch urls.csv --out media/ --concurrency 8 --report fetch.csv",
            note=(
                "Exit codes: 0 every URL has a final outcome; 1 retryable failures remain (or any failure with "
                "--strict); 2 usage error; 130 interrupted."
            ),
        ),
    )
    p.add_argument("urls", metavar="URLS", help="URL list: .csv (url column), .jsonl, .json or text")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the files, the log and the report")
    p.add_argument("--store", metavar="FILE", help="validate fetched files and register them as samples in this store")
    p.add_argument("--concurrency", type=int, default=32, metavar="N", help="downloads at once (default 32)")
    p.add_argument("--per-host", type=int, default=4, metavar="N", help="downloads at once per host (default 4)")
    p.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="connect / between-reads timeout (default 30)"
    )
    p.add_argument("--max-time", type=float, default=900.0, metavar="S", help="limit for one download (default 900)")
    p.add_argument("--retries", type=int, default=3, metavar="N", help="retries on timeouts, 429, 5xx (default 3)")
    p.add_argument("--backoff", type=float, default=0.5, metavar="S", help="first retry delay, doubled each time")
    p.add_argument("--max-image-size", default="50MB", metavar="SIZE", help="largest image (default 50MB)")
    p.add_argument("--max-video-size", default="2GB", metavar="SIZE", help="largest video (default 2GB)")
    p.add_argument("--max-redirects", type=int, default=5, metavar="N", help="redirects followed per URL (default 5)")
    p.add_argument("--allow-private", action="store_true", help="also fetch from loopback/private/link-local addresses")
    p.add_argument(
        "--allow-network",
        action="append",
        default=[],
        metavar="CIDR",
        help="allow this non-public network (repeatable)",
    )
    p.add_argument("--block-hashes", metavar="FILE", help="quarantine files whose sha256/md5/sha1/PDQ hash is listed")
    p.add_argument("--pdq-distance", type=int, default=31, metavar="D", help="PDQ match distance (default 31 of 256)")
    p.add_argument("--quarantine", metavar="DIR", help="where blocked files go (default OUT/.quarantine)")
    p.add_argument("--recheck", action="store_true", help="fetch every URL again (link-liveness check)")
    p.add_argument("--report", metavar="FILE", help="also write the report here (.csv or .json)")
    p.add_argument("--user-agent", metavar="TEXT", help="User-Agent header")
    p.add_argument("--strict", action="store_true", help="exit 1 when any URL is not fetched")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=run)


class _Counts:
    """Outcomes so far, reported to a progress callback as one line (``ok 3  failed 1 ...``)."""

    def __init__(self, on_progress: ProgressFn) -> None:
        self.on_progress = on_progress
        self.counts = {"ok": 0, "failed": 0, "rejected": 0, "blocked": 0}
        self.start = time.perf_counter()

    def update(self, outcome: Any) -> None:
        self.counts[outcome.status] = self.counts.get(outcome.status, 0) + 1
        rate = self.counts["ok"] / max(time.perf_counter() - self.start, 1e-9)
        info = "  ".join(f"{k} {v}" for k, v in self.counts.items()) + f"  {rate:.1f} files/s"
        self.on_progress(sum(self.counts.values()), None, info=info)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.collect.blocklist import BlockList
    from vhd.collect.fetch import fetch
    from vhd.collect.fetch_settings import FetchSettings, parse_size
    from vhd.progress import bar

    options: dict[str, Any] = {
        "concurrency": args.concurrency,
        "per_host": args.per_host,
        "timeout": args.timeout,
        "max_time": args.max_time,
        "retries": args.retries,
        "backoff": args.backoff,
        "max_image_bytes": parse_size(args.max_image_size),
        "max_video_bytes": parse_size(args.max_video_size),
        "max_redirects": args.max_redirects,
        "allow_private": args.allow_private,
        "allow_networks": tuple(args.allow_network),
        "recheck": args.recheck,
    }
    if args.user_agent:
        options["user_agent"] = args.user_agent
    settings = FetchSettings(**options)
    blocks = BlockList.load(args.block_hashes, pdq_distance=args.pdq_distance) if args.block_hashes else None
    with bar("fetching", not args.no_progress and not args.json) as on_progress:
        report = fetch(
            args.urls,
            args.out,
            settings=settings,
            store=args.store,
            block_list=blocks,
            quarantine=args.quarantine,
            report=args.report,
            on_outcome=_Counts(on_progress).update,
        )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(printable(line) for line in report.describe()))
    return report.exit_code(strict=args.strict)
