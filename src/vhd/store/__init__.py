"""Where results live: the SQLite store, exports, human-label import, and side caches.

Every SQL statement of vhd lives in this package: `Store` and the modules beside it
(`vhd.store.categories`, `vhd.store.curation`) for the store, `vhd.store.cache` for the small
SQLite caches kept next to a command's output.

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
from vhd.store.rows import RunInfo, SkipInfo, VerdictRow
from vhd.store.sqlite import Store, open_store

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
    "VerdictRow",
    "export",
    "normalize_category",
    "open_store",
    "read_labels",
]
