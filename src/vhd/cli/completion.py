"""``vhd completion``: a shell completion script (bash, zsh, fish) generated from the parser."""

from __future__ import annotations

import argparse
import re
from typing import Any

from vhd.cli.habits import examples

SHELLS = ("bash", "zsh", "fish")


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="print a shell completion script (bash, zsh, fish)",
        description="Print a completion script for vhd's commands and flags, generated from vhd's own argument "
        "parser with shtab (pip install 'vhd[completion]'). Load it from your shell's start-up file.",
        epilog=examples(
            "vhd completion bash",
            "vhd completion zsh",
            "vhd completion fish",
            note='bash: add  eval "$(vhd completion bash)"  to ~/.bashrc. zsh: vhd completion zsh > '
            "~/.zfunc/_vhd (with ~/.zfunc on fpath). fish: vhd completion fish > "
            "~/.config/fish/completions/vhd.fish",
        ),
    )
    p.add_argument("shell", choices=SHELLS, help="the shell")
    p.set_defaults(handler=run)


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of ``parser`` for ``shell``.

    Raises:
        vhd.errors.ConfigError: shtab is not installed, or the shell is not one of `SHELLS`.
    """
    from vhd.errors import ConfigError, pip_install

    if shell not in SHELLS:
        raise ConfigError(f"no completion for {shell!r}: choose one of {', '.join(SHELLS)}")
    try:
        import shtab
    except ImportError:
        raise ConfigError(f"shell completion needs shtab: {pip_install(repr('vhd[completion]'))}") from None
    for action in _actions(parser):
        kind = path_kind(action)
        if kind is not None and getattr(action, "complete", None) is None:
            action.complete = shtab.DIRECTORY if kind == "dir" else shtab.FILE  # type: ignore[attr-defined]
    return str(shtab.complete(parser, shell=shell))


_FILE_WORDS = frozenset(
    {"PATH", "FILE", "CSV", "JSON", "DB", "STORE", "LABELS", "VIDEO", "SAMPLE", "URLS", "EXPORT", "OUT", "TSV"}
)
"""Words of a metavar (``PATH_OR_STORE``, ``OUT.json``) that say the value can be a file."""
_FILE_DESTS = frozenset({"store", "out", "inputs", "config", "labels", "refs", "sample"})
"""Destinations whose value is a file (or a folder) when the flag has no metavar."""


def path_kind(action: argparse.Action) -> str | None:
    """Whether a flag or positional takes a path: ``"dir"`` (a folder), ``"file"`` (a file or folder) or None.

    Read from what the parser already says: a metavar of ``DIR`` is a folder; one naming a file
    (``PATH``, ``FILE``, ``CSV``, ``STORE``, ``OUT.json``, ``PATH_OR_STORE``, ...) or, without a
    metavar, a destination such as ``store`` or ``out`` is a file. Flags with choices, numbers and
    switches take no path.
    """
    if action.nargs == 0 or action.choices is not None or action.type in (int, float):
        return None
    if action.dest in ("help", "version", "log_format"):
        return None
    metavar = action.metavar if isinstance(action.metavar, str) else None
    if metavar is None:
        return "file" if action.dest in _FILE_DESTS else None
    words = {w.upper() for w in re.split(r"[^A-Za-z]+", metavar) if w}
    if words == {"DIR"}:
        return "dir"
    return "file" if words & (_FILE_WORDS | {"DIR"}) else None


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every action of a parser and of its sub-commands' parsers."""
    out: list[argparse.Action] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                out.extend(_actions(sub))
        else:
            out.append(action)
    return out


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    print(completion_script(args.root_parser, args.shell), end="")
    return 0
