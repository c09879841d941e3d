"""In-context examples chosen against human labels: `vhd icl`.

`search_icl` (`vhd.icl.search`) grows the judge's example set round by round from the mistakes it
makes on a labelled validation set, keeping a round only when a ranking metric
(`vhd.icl.metrics.ICL_METRICS`, pluggable) improves on held-out samples; `vhd.icl.result` holds
what a search found and `vhd.icl.files` writes it (examples folder, JSON, report).

Example:
    >>> from vhd.icl import search_icl
    >>> result = search_icl("validation", store="run.db", out="icl/")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.icl.metrics import ICL_METRICS
    from vhd.icl.result import SearchResult
    from vhd.icl.search import search_icl

_LAZY = {
    "search_icl": "vhd.icl.search",
    "SearchResult": "vhd.icl.result",
    "ICL_METRICS": "vhd.icl.metrics",
}

__all__ = [
    "ICL_METRICS",
    "SearchResult",
    "search_icl",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
