"""Harm categories as a model: codes, names, definitions, the crosswalk and category answers.

This is the lean, low room of the house: the category *workflow* (assigning categories to
annotations, discovering a taxonomy, statistics) lives in `vhd.categorize`.

Example:
    >>> from vhd.taxonomy import load_taxonomy
    >>> tax = load_taxonomy()
    >>> tax.get("f").name
    'Explicit and Sexual Content'
"""

from __future__ import annotations

from vhd.taxonomy.answer import ParsedAnswer, parse_answer
from vhd.taxonomy.taxonomy import (
    DEFAULT_TAXONOMY,
    Category,
    Taxonomy,
    TaxonomyError,
    default_taxonomy,
    load_taxonomy,
    parse_taxonomy,
)

__all__ = [
    "DEFAULT_TAXONOMY",
    "Category",
    "ParsedAnswer",
    "Taxonomy",
    "TaxonomyError",
    "default_taxonomy",
    "load_taxonomy",
    "parse_answer",
    "parse_taxonomy",
]
