"""Entry point of the ``vhd`` command."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the vhd command line."""
    raise SystemExit("vhd: not yet implemented")
