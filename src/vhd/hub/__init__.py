"""Sharing a dataset with the tools users already run: Hugging Face ``datasets`` and the hub.

Importing this package is cheap; `vhd.hub.hf` loads ``datasets`` only when an export runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.hub.hf import export_hf, features
    from vhd.hub.result import HfExport

_LAZY = {"export_hf": "vhd.hub.hf", "features": "vhd.hub.hf", "HfExport": "vhd.hub.result"}

__all__ = ["HfExport", "export_hf", "features"]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
