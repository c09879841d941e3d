"""The habits every ``vhd`` command shares, applied once in `vhd.cli.main.build_parser`.

- ``-v/--verbose`` (repeatable), ``-q/--quiet`` (repeatable) and ``--log-format text|json`` on each
  command's own parser, wired to Python logging (`configure_logging`): warnings (retries, skipped
  files) by default, ``-v`` adds progress notes and timings, ``-vv`` debug detail, ``-q`` errors only
  (`vhd.cli.logs`, imported only once a command runs, so ``vhd --help`` stays light).
- Defaults for common flags from the environment (`ENV_FLAGS`): ``VHD_STORE`` for ``--store``,
  ``VHD_CONFIG`` for ``--config``, ``VHD_CONCURRENCY`` for ``--concurrency``. A flag beats the
  variable; the variable beats the config files (it arrives as a flag would).
- One help layout (`HelpFormatter`): prose is wrapped, indented lines are kept as written, so an
  epilog built by `examples` ends with its examples, one per line.

A new command gets all of this by being listed in ``COMMANDS``; it only writes its examples.
"""

from __future__ import annotations

import argparse
import json
import os
import textwrap
from typing import Any

ENV_FLAGS: dict[str, str] = {
    "--store": "VHD_STORE",
    "--config": "VHD_CONFIG",
    "--concurrency": "VHD_CONCURRENCY",
}
"""Flag to the environment variable that gives its default (the model's, ``VHD_MODEL``, is read by
`vhd.config`, since it sets every role)."""

LOG_FORMATS = ("text", "json")


class HelpFormatter(argparse.HelpFormatter):
    """Wraps prose paragraphs; keeps indented lines (examples, tables) exactly as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        for block in text.split("\n\n"):
            lines = block.split("\n")
            if any(line.startswith(" ") for line in lines):
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(textwrap.fill(" ".join(lines), width, initial_indent=indent, subsequent_indent=indent))
        return "\n\n".join(out)


def examples(*lines: str, note: str = "") -> str:
    """An epilog: an optional note, then ``examples:`` and one indented ``vhd ...`` line each.

    Args:
        *lines: 2-4 complete commands, each beginning ``vhd <command> `` (a test parses them).
        note: Prose shown before the examples.
    """
    body = "examples:\n" + "\n".join(f"  {line}" for line in lines)
    return f"{note}\n\n{body}" if note else body


def add_habits(p: argparse.ArgumentParser) -> None:
    """Give one command's parser the shared flags, environment defaults and help layout."""
    p.formatter_class = HelpFormatter
    taken = set(p._option_string_actions)
    g = p.add_argument_group("output and logging (every command)")

    def add(flags: tuple[str, ...], **kwargs: Any) -> None:
        free = [f for f in flags if f not in taken]
        if free and free[-1] == flags[-1]:  # the long flag is free: add it (with the short one if free)
            g.add_argument(*free, **kwargs)

    add(("-v", "--verbose"), action="count", default=0, help="say more: -v notes and timings, -vv debug detail")
    add(("-q", "--quiet"), action="count", default=0, help="say less: errors only")
    add(("--log-format",), choices=LOG_FORMATS, default="text", help="log lines as text or as one JSON object each")
    for action in p._actions:
        for flag in action.option_strings:
            env = ENV_FLAGS.get(flag)
            if env and os.environ.get(env):
                action.default = os.environ[env]
                action.help = f"{action.help or ''} [env {env}={os.environ[env]}]".strip()


def jsonable(value: Any) -> Any:
    """A value as plain JSON data.

    ``to_dict()`` where a result has one, dataclasses field by field, paths and other objects as text.
    """
    import dataclasses
    import enum
    from pathlib import PurePath

    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return jsonable(value.to_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, PurePath):
        return str(value)
    return str(value)


def print_json(value: Any, file: Any = None) -> None:
    """Print ``value`` (see `jsonable`) as indented JSON on stdout (or ``file``): the ``--json`` of every command."""
    print(json.dumps(jsonable(value), indent=2, ensure_ascii=False), file=file)


def add_json_flag(p: Any) -> None:
    """The ``--json`` flag of a command that prints a summary."""
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of text")
