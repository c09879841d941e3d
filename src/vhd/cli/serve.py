"""``vhd serve``: the review app over a store (blurred previews, the debate, labels into a labelled set)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from vhd.fileio import printable
from vhd.serve.settings import DEFAULT_PREVIEW_MEMORY_MB

EXAMPLES = """examples:
  vhd serve run.db
  vhd serve run.db --port 9000 --labelled-set review --reviewer alice --preview-memory 1024
  vhd serve run.db --queue review.csv --reviews-per-sample 2
  vhd serve run.db --host 0.0.0.0 --auth-token-env VHD_SERVE_TOKEN
"""


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="review samples in a local web app; labels go into a labelled set of the store",
        description=(
            "Serve the review app at http://HOST:PORT/ (it opens no browser). Previews hide shape (made on the "
            "server, grayscale by default); the clear image comes only after a click per sample (never with "
            "--no-reveal), and every reveal is recorded with the reviewer. Labels are "
            "saved at once, with reviewer and time, into the labelled set (default 'review') that "
            "`vhd icl --validation review --store STORE` and the other commands read."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("store", metavar="STORE", help="the SQLite store to review")
    p.add_argument("--port", type=int, default=8765, metavar="N", help="port (default 8765)")
    p.add_argument("--host", default="127.0.0.1", metavar="H", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--labelled-set", default="review", metavar="NAME", help="labelled set to write (default review)")
    p.add_argument("--reviewer", metavar="NAME", help="your name in the labels (default: the OS user)")
    p.add_argument("--queue", metavar="FILE", help="a `vhd review-queue --out` CSV: its order, most uncertain first")
    p.add_argument("--no-reveal", action="store_true", help="never send a clear (unblurred) image")
    p.add_argument(
        "--auth-token-env", metavar="VAR", help="environment variable holding the access token (needed off loopback)"
    )
    p.add_argument(
        "--reviews-per-sample", type=int, default=1, metavar="K", help="different reviewers per sample (default 1)"
    )
    p.add_argument(
        "--preview-cache",
        metavar="DIR",
        help="folder where previews are kept once made (default: STORE.previews beside the store)",
    )
    p.add_argument(
        "--preview-memory",
        type=int,
        default=DEFAULT_PREVIEW_MEMORY_MB,
        metavar="MIB",
        help="memory budget of image decodes for previews; more large images at once wait (default 768)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.serve.run import serve
    from vhd.serve.settings import ServeSettings, check_bind, default_reviewer
    from vhd.serve.thumbs import map_large_allocations

    token = check_bind(args.host, args.auth_token_env)
    settings = ServeSettings(
        store=args.store,
        host=args.host,
        port=args.port,
        set_name=args.labelled_set,
        reviewer=args.reviewer or default_reviewer(),
        queue=args.queue,
        no_reveal=args.no_reveal,
        token=token,
        reviews_per_sample=args.reviews_per_sample,
        preview_cache=args.preview_cache,
        preview_memory_mb=args.preview_memory,
    )
    map_large_allocations()  # this process only: the command owns it (see the function's docstring)
    serve(settings, on_event=lambda m: print(printable(m), file=sys.stderr, flush=True))
    return 0
