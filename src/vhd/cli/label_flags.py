"""The flags every command that reads a labels file shares (label, bench, icl, compare, split).

``--media``, ``--path-prefix``, ``--duplicates`` and ``--allow-outside-paths``, read into one
`vhd.labels.rules.LabelOptions`; and ``--allow-outside-paths`` alone for the commands
that read manifests (annotate, ingest).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vhd.labels.rules import LabelOptions

DUPLICATES = ("first", "last", "majority", "drop")
"""The choices of ``--duplicates`` (`vhd.labels.rules.DUPLICATE_POLICIES`, kept here so the parser stays light)."""


def add_label_flags(p: Any) -> None:
    """Add ``--media``, ``--path-prefix``, ``--duplicates`` and ``--allow-outside-paths`` to a parser."""
    g = p.add_argument_group("labels file")
    g.add_argument(
        "--media",
        metavar="DIR",
        help="folder the labels' relative paths are under (default: the file's); files not found are also "
        "looked up there by name",
    )
    g.add_argument(
        "--path-prefix",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="read paths starting with folder OLD as under NEW (files written on another machine), repeatable",
    )
    g.add_argument(
        "--duplicates",
        choices=DUPLICATES,
        help="rows giving one sample different answers: keep the first, the last, the majority, or drop them "
        "(default: drop, each row listed; a label its rows disagree on is not ground truth)",
    )
    add_outside_flag(g, "the labels file's folder, --media or a --path-prefix NEW")


def add_outside_flag(p: Any, where: str = "the manifest's folder") -> None:
    """Add ``--allow-outside-paths`` (paths in a file may lead anywhere on disk)."""
    p.add_argument(
        "--allow-outside-paths",
        action="store_true",
        help=f"accept paths in the file that lead outside {where} (absolute, ~ or ../; rows naming samples "
        "already in --store are always accepted)",
    )


def label_options(args: argparse.Namespace) -> LabelOptions:
    """The `LabelOptions` the flags of `add_label_flags` ask for.

    Raises:
        vhd.errors.ConfigError: A ``--path-prefix`` without ``=``, or a ``--media`` that is not a folder.
    """
    from vhd.labels.rules import LabelOptions

    return LabelOptions.from_flags(
        media=args.media,
        path_prefix=args.path_prefix,
        allow_outside_paths=args.allow_outside_paths,
        duplicates=args.duplicates,
    )
