"""``vhd completion``: a shell completion script (bash, zsh, fish) generated from the parser."""

from __future__ import annotations

import argparse
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
    return str(shtab.complete(parser, shell=shell))


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    print(completion_script(args.root_parser, args.shell), end="")
    return 0
