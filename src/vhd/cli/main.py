"""Entry point of the ``vhd`` command: a thin layer that parses flags and calls the library."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from vhd.cli.habits import add_habits
from vhd.errors import BackendError, ConfigError, MediaError, StoreWriteError, VhdError
from vhd.fileio import printable
from vhd.version import version

COMMANDS: dict[str, str] = {
    "annotate": "vhd.cli.annotate",
    "show": "vhd.cli.show",
    "export": "vhd.cli.export",
    "examples": "vhd.cli.examples",
    "keywords": "vhd.cli.keywords",
    "crawl": "vhd.cli.crawl",
    "fetch": "vhd.cli.fetch",
    "categorize": "vhd.cli.categorize",
    "stats": "vhd.cli.stats",
    "ingest": "vhd.cli.ingest",
    "frames": "vhd.cli.frames",
    "dedup": "vhd.cli.dedup",
    "split": "vhd.cli.split",
    "remove": "vhd.cli.remove",
    "bench": "vhd.cli.bench",
    "align": "vhd.cli.align",
    "review-queue": "vhd.cli.review_queue",
    "label": "vhd.cli.label",
    "icl": "vhd.cli.icl",
    "compare": "vhd.cli.compare",
    "serve": "vhd.cli.serve",
    "runs": "vhd.cli.runs",
    "config": "vhd.cli.config",
    "completion": "vhd.cli.completion",
    "prompts": "vhd.cli.prompts",
    "policy": "vhd.cli.policy",
    "generate": "vhd.cli.generate",
    "tune": "vhd.cli.tune",
    "table2": "vhd.cli.table2",
}
"""Command name to the module holding its ``add_parser`` and ``run``."""


class _Version(argparse.Action):
    """``--version``: reads the package metadata only when asked (keeps ``vhd --help`` fast)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"vhd {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (every command's module is imported; they are light)."""
    parser = argparse.ArgumentParser(
        prog="vhd",
        description="Build, annotate and benchmark visual-harmfulness datasets.",
    )
    parser.add_argument("--version", action=_Version, help="show the installed version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in COMMANDS.items():
        importlib.import_module(module).add_parser(sub, name)
    for command in sub.choices.values():  # the shared habits, so every command has them
        add_habits(command)
        command.set_defaults(root_parser=parser)  # for `vhd completion`, which reads the whole tree
    return parser


BROKEN_PIPE = 141
"""Exit status when the reader of stdout went away (``vhd show ... | head``): 128 + SIGPIPE, as
standard Unix tools end, so ``set -o pipefail`` scripts can tell the output was cut short."""


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """Exit 2 with the command's own usage, the words it did not know, and the options they look like."""
    import difflib

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command = sub.choices.get(getattr(args, "command", ""), parser)
    known = [s for action in command._actions for s in action.option_strings if s.startswith("--")]
    hints = []
    for word in extra:
        if word.startswith("--"):
            close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.6)
            hints += [f"did you mean {close[0]}?"] if close else []
    command.error("; ".join([f"unrecognized arguments: {' '.join(extra)}", *hints]))


PATH_LISTS = ("inputs", "refs")
"""Destinations of the commands' input paths (annotate, ingest, dedup, frames; remove's samples): ``-`` in
them reads more paths from stdin."""


def stdin_paths(args: argparse.Namespace, stdin: Any = None) -> None:
    r"""Replace ``-`` among a command's input paths with the paths read from stdin, one per line.

    ``ls *.jpg | vhd annotate - --store s.db``, as other Unix tools read ``-``. Blank lines are
    skipped and line ends (``\n``, ``\r\n``) dropped, nothing else: a path may hold spaces. A file
    named ``-`` is ``./-``.

    Raises:
        ConfigError: ``-`` is given more than once, or stdin is a terminal (nothing piped in).
    """
    stdin = sys.stdin if stdin is None else stdin
    for dest in PATH_LISTS:
        values = getattr(args, dest, None)
        if not isinstance(values, list) or "-" not in values:
            continue
        if values.count("-") > 1:
            raise ConfigError("'-' (read paths from stdin) can be given once: drop the others")
        if stdin is None or stdin.isatty():
            raise ConfigError(
                "'-' reads paths from stdin, one per line, but nothing is piped in: "
                "e.g. ls *.jpg | vhd annotate - --store s.db (or name the paths)"
            )
        read = [line.rstrip("\r\n") for line in stdin]
        at = values.index("-")
        values[at : at + 1] = [p for p in read if p.strip()]
        if not values:
            raise ConfigError("'-' read no path from stdin: pipe in one path per line")


def error(message: str) -> None:
    """Print a one-line error to stderr (secrets redacted; control characters escaped: messages quote file names)."""
    from vhd.redaction import redact_text

    print(f"vhd: error: {printable(redact_text(message))}", file=sys.stderr)


def _stdout_gone() -> int:
    """Point stdout at /dev/null so nothing more (the interpreter's final flush included) fails."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the vhd command line and return its exit status.

    Exit codes: 0 success; 1 work remains (errors to retry, or the store could not be written);
    2 usage or configuration error; 130 interrupted; 141 the reader of the output went away
    (``| head``): quietly, like Unix tools.
    """
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not words:  # bare `vhd`: the help, as a question answered, not an error
        parser.print_help()
        return 0
    args, extra = parser.parse_known_args(words)
    if extra:
        _unrecognized(parser, args, extra)
    import logging

    from vhd.cli.logs import configure_logging

    configure_logging(getattr(args, "verbose", 0), getattr(args, "quiet", 0), getattr(args, "log_format", "text"))
    log = logging.getLogger("vhd.cli")
    started = time.perf_counter()
    try:
        stdin_paths(args)
        code: int = args.handler(args)
        sys.stdout.flush()
        log.info("%s finished in %.2f s (exit %d)", args.command, time.perf_counter() - started, code)
    except BrokenPipeError:
        return _stdout_gone()
    except KeyboardInterrupt:
        error("interrupted")
        return 130
    except (BackendError, MediaError, StoreWriteError) as exc:  # the same command resumes
        error(str(exc))
        return 1
    except VhdError as exc:
        error(str(exc))
        return 2
    except Exception as exc:
        from vhd.boundary import disk_full

        full = disk_full(exc)
        if full is None:
            raise
        where = f" writing {printable(full.filename)}" if full.filename else ""
        error(
            f"{args.command} stopped: {full.strerror or 'the disk is full'}{where}; files are written whole or "
            "not at all, so nothing partial was left; free space (or raise the file size limit) and run the "
            "same command again"
        )
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
