"""``vhd show``: one sample's verdict and its whole debate, readable."""

from __future__ import annotations

import argparse
import errno
import json
import re
from typing import Any

from vhd.cli.habits import examples
from vhd.errors import ConfigError
from vhd.fileio import printable


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="show one sample's verdict and full debate",
        epilog=examples(
            "vhd show demo.db examples/coffee.jpg", "vhd show demo.db coffee.jpg", "vhd show demo.db 3f2a9c --json"
        ),
    )
    p.add_argument("store", help="the SQLite store")
    p.add_argument(
        "sample",
        metavar="SAMPLE",
        help="sample id (or a unique prefix of 6+ characters), file path, or a file name only one sample has",
    )
    p.add_argument("--config-hash", help="the configuration to show (default: the latest annotation)")
    p.add_argument("--json", action="store_true", help="print the sample's export record (as in JSONL) as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command.

    Everything shown comes from files and models (a file name, a model's reply): it is printed
    with control characters escaped (`vhd.fileio.printable`) and never read as rich markup.
    """
    from rich.console import Console
    from rich.panel import Panel
    from rich.text import Text

    from vhd.store.sqlite import open_store

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            """Leave a closed pipe to `vhd.cli.main` (rich would exit 1 on its own)."""
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "broken pipe")

    with open_store(args.store) as db:
        samples = db.find_samples(args.sample)
        key = args.sample.strip().lower()
        if not samples and len(key) < 6 and re.fullmatch(r"[0-9a-f]+", key):
            raise ConfigError(
                f"an id prefix needs at least 6 characters and {args.sample!r} has {len(key)}: "
                "give 6 or more (see the ids with `vhd export` or `vhd show STORE PATH`)"
            )
        if not samples:
            samples = db.find_samples_named(args.sample.strip())
            if len(samples) > 1:
                shown = ", ".join(printable(s.path) for s in samples[:3]) + (", ..." if len(samples) > 3 else "")
                raise ConfigError(
                    f"{len(samples)} samples are called {args.sample!r} ({shown}): give the path or an id prefix"
                )
        if not samples:
            raise ConfigError(
                f"no sample matching {args.sample!r} in {args.store}: give its id (or 6+ characters of it), "
                "its file path, or its file name when only one sample has that name"
            )
        if len(samples) > 1:
            need = 1 + max(_shared(a.id, b.id) for a in samples for b in samples if a is not b)
            raise ConfigError(
                f"{args.sample!r} matches {len(samples)} samples: give at least {need} characters of the id"
            )
        sample = samples[0]
        ann = db.get_annotation(sample.id, db.resolve_config_hash(args.config_hash))
    if ann is None:
        raise ConfigError(f"sample {sample.id[:12]} ({sample.path}) has no annotation yet")
    v = ann.verdict
    if args.json:  # the sample's export record: the columns and types of `vhd export --format jsonl`
        from vhd.export.schema import json_default, record

        data = record(sample, ann)
        print(json.dumps(data, indent=2, ensure_ascii=False, default=json_default))
        return 0
    console = _Console(highlight=False)
    decision = {
        True: ("harmful", "bold red"),
        False: ("not harmful", "bold green"),
        None: ("undecided", "bold yellow"),
    }[v.harmful]
    score = f"   score P(yes) {v.score:.3f}" if v.score is not None else ""
    console.print(Text.assemble((printable(sample.path), "bold"), f"  ({sample.kind.value}, id {sample.id[:12]})"))
    console.print(
        Text.assemble(
            decision,
            f": {printable(v.reason or '-')}   status {v.status.value}{' (refusal)' if v.refused else ''}{score}",
        )
    )
    from vhd.media.credentials import credentials_summary

    claim = credentials_summary(sample.meta)
    if claim is not None:  # trust first, in capitals: a claim is not a fact
        style = "green" if claim.startswith("TRUSTED") else "yellow"
        console.print(Text.assemble(("content credentials: ", style), printable(claim)))
    if v.categories:
        console.print(Text("categories: " + "; ".join(printable(c) for c in v.categories)))
    if ann.decided_by is not None:
        from vhd.annotate.segmented import SEGMENTS, WHOLE_VIDEO

        what = "video protocol" if ann.decided_by in (SEGMENTS, WHOLE_VIDEO) else "cascade"
        console.print(Text(f"decided by: {printable(ann.decided_by)} ({what})"))
    if v.segments:
        _timeline(console, v.segments)
    for t in ann.turns:
        reasoning = f" ({t.reasoning_tokens} reasoning)" if t.reasoning_tokens else ""
        title = (
            f"{t.role.value} · round {t.round} · {printable(t.model)} · {t.completion_tokens} tok{reasoning}"
            f" · {t.latency_s:.2f} s"
        )
        if t.finish_reason:
            title += f" · finish {printable(t.finish_reason)}"
        if t.refused:
            title += " · refused"
        body = Text(printable(t.text, multiline=True) if t.text else "(no text)")
        console.print(Panel(body, title=Text(title), title_align="left"))
    u = ann.usage
    console.print(
        Text(f"{u.calls} calls, {u.prompt_tokens:,} + {u.completion_tokens:,} tokens; config {ann.config_hash[:12]}")
    )
    if ann.error:
        console.print(Text.assemble(("error:", "red"), f" {printable(ann.error)}"))
    return 0


def _timeline(console: Any, segments: list[Any]) -> None:
    """A segmented video's time line: one line per segment (span, verdict, reason, who decided)."""
    from rich.text import Text

    from vhd.annotate.segmented import span_text

    console.print(Text(f"time line ({len(segments)} segments):", style="bold"))
    for seg in segments:
        label, style = {True: ("harmful", "red"), False: ("ok", "green"), None: ("undecided", "yellow")}[seg.harmful]
        score = f", P {seg.score:.2f}" if seg.score is not None else ""
        console.print(
            Text.assemble(
                f"  {span_text(seg):>15}  ",
                (f"{label:<9}", style),
                f" {printable(seg.reason or '-')}  ({printable(seg.decided_by or '?')}{score})",
            )
        )


def _shared(a: str, b: str) -> int:
    """How many leading characters two ids share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n
