"""The installed vhd version, read from the package metadata (no import of `vhd` itself)."""

from __future__ import annotations

import functools


@functools.cache
def version() -> str:
    """The installed distribution's version, or ``0+unknown`` when vhd runs from a bare source tree."""
    from importlib import metadata  # about 20 ms: only when a version is asked for

    try:
        return metadata.version("vhd")
    except metadata.PackageNotFoundError:
        return "0+unknown"
