"""Where results live: the SQLite store, exports, and human-label import.

Example:
    >>> from vhd.store import Store, export, read_labels
    >>> with Store("run.db") as store:  # doctest: +SKIP
    ...     export(store, "jsonl", "annotations.jsonl")
"""

from __future__ import annotations

from vhd.records import LabelRow
from vhd.store.export import FORMATS, ExportResult, export
from vhd.store.labels import (
    CATEGORIES,
    LabelError,
    LabelSet,
    normalize_category,
    read_labels,
)
from vhd.store.rows import RunInfo, SkipInfo
from vhd.store.sqlite import Store

__all__ = [
    "CATEGORIES",
    "FORMATS",
    "ExportResult",
    "LabelError",
    "LabelRow",
    "LabelSet",
    "RunInfo",
    "SkipInfo",
    "Store",
    "export",
    "normalize_category",
    "read_labels",
]
