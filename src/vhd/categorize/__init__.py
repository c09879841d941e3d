"""The category workflow: assign harm categories to annotations, discover a taxonomy, statistics.

Importing this package is cheap; the embedding model, matplotlib and scikit-learn load only
when a function that needs them runs. The taxonomy itself (codes, names, definitions) is the
lower `vhd.taxonomy` room.

Example:
    >>> from vhd.categorize import categorize
    >>> summary = categorize("run.db", method="embed")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.categorize.assign import CategorizeSummary, categorize
    from vhd.categorize.discovery import DiscoverResult, discover
    from vhd.categorize.stats import Stats, compute_stats
    from vhd.categorize.stats_files import write_stats

_LAZY = {
    "CategorizeSummary": "vhd.categorize.assign",
    "categorize": "vhd.categorize.assign",
    "DiscoverResult": "vhd.categorize.discovery",
    "discover": "vhd.categorize.discovery",
    "Stats": "vhd.categorize.stats",
    "compute_stats": "vhd.categorize.stats",
    "write_stats": "vhd.categorize.stats_files",
}

__all__ = ["CategorizeSummary", "DiscoverResult", "Stats", "categorize", "compute_stats", "discover", "write_stats"]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
