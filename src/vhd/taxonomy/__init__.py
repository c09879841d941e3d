"""Harm categories: the taxonomy, assigning categories to annotations, discovering them, statistics.

Importing this package is cheap; the embedding model, matplotlib and scikit-learn load only
when a function that needs them runs.

Example:
    >>> from vhd.taxonomy import load_taxonomy
    >>> tax = load_taxonomy()
    >>> tax.get("f").name
    'Explicit and Sexual Content'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports
from vhd.taxonomy.taxonomy import (
    DEFAULT_TAXONOMY,
    Category,
    Taxonomy,
    TaxonomyError,
    default_taxonomy,
    load_taxonomy,
    parse_taxonomy,
)

if TYPE_CHECKING:
    from vhd.taxonomy.answer import ParsedAnswer, parse_answer
    from vhd.taxonomy.assign import CategorizeSummary, categorize
    from vhd.taxonomy.discovery import DiscoverResult, discover
    from vhd.taxonomy.stats import Stats, compute_stats, write_stats

_LAZY = {
    "ParsedAnswer": "vhd.taxonomy.answer",
    "parse_answer": "vhd.taxonomy.answer",
    "CategorizeSummary": "vhd.taxonomy.assign",
    "categorize": "vhd.taxonomy.assign",
    "DiscoverResult": "vhd.taxonomy.discovery",
    "discover": "vhd.taxonomy.discovery",
    "Stats": "vhd.taxonomy.stats",
    "compute_stats": "vhd.taxonomy.stats",
    "write_stats": "vhd.taxonomy.stats",
}

__all__ = [
    "DEFAULT_TAXONOMY",
    "CategorizeSummary",
    "Category",
    "DiscoverResult",
    "ParsedAnswer",
    "Stats",
    "Taxonomy",
    "TaxonomyError",
    "categorize",
    "compute_stats",
    "default_taxonomy",
    "discover",
    "load_taxonomy",
    "parse_answer",
    "parse_taxonomy",
    "write_stats",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
