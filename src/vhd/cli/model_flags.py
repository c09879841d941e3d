"""The model flags every judging command shares: ``--model``, the roles' models, ``--icl``, ``--concurrency``.

``vhd annotate``, ``vhd align``, ``vhd icl`` and ``vhd compare`` take the same flags for the same
settings (`vhd.config.ModelOverrides`); `add_model_flags` adds the ones a command has and
`model_overrides` hands them to the library call as keyword arguments.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from vhd.config import ModelOverrides

ROLES = ("affirmative", "negative", "debaters", "judge")
"""The role flags, in the order they are listed."""

_ROLE_HELP = {
    "affirmative": "model of the affirmative debater",
    "negative": "model of the negative debater",
    "debaters": "model of both debaters",
    "judge": "model of the judge",
}
_FLAGS = "_model_flags"
"""Where a parser records which of the flags it has (read by `model_overrides`)."""


def add_model_flags(
    p: argparse.ArgumentParser,
    *,
    roles: Sequence[str] = ROLES,
    icl: bool = True,
    concurrency: bool = True,
    model_help: str = "BACKEND:MODEL for every role, e.g. openai:gpt-4o",
    help_of: Mapping[str, str] | None = None,
) -> None:
    """Add ``--model``, the ``roles``' flags, and (when asked) ``--icl`` and ``--concurrency`` to ``p``.

    Args:
        p: The command's parser.
        roles: Which role flags the command takes (`ROLES` order kept).
        icl: Add ``--icl PATH``.
        concurrency: Add ``--concurrency N``.
        model_help: The help of ``--model``.
        help_of: Other help texts for some flags, by setting name (``judge``, ``icl``, ...).
    """
    helps = {**_ROLE_HELP, "icl": "in-context examples for the judge (file or folder)"} | dict(help_of or {})
    p.add_argument("--model", help=model_help)
    names = ["model"]
    for role in ROLES:
        if role in roles:
            p.add_argument(f"--{role}", metavar="SPEC", help=helps[role])
            names.append(role)
    if icl:
        p.add_argument("--icl", metavar="PATH", help=helps["icl"])
        names.append("icl")
    if concurrency:
        p.add_argument("--concurrency", type=int, metavar="N", help="samples in flight (default 16)")
        names.append("concurrency")
    p.set_defaults(**{_FLAGS: tuple(names)})


def model_overrides(args: argparse.Namespace) -> ModelOverrides:
    """The model settings the command line gave (`add_model_flags`'s flags), as keyword arguments."""
    values: dict[str, Any] = {name: getattr(args, name) for name in getattr(args, _FLAGS, ())}
    return cast("ModelOverrides", values)
