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

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.records import LabelRow
    from vhd.store.export import FORMATS, ExportResult, export, read_table
    from vhd.store.labels import (
        CATEGORIES,
        LabelError,
        LabelSet,
        normalize_category,
        read_labels,
    )
    from vhd.store.rows import RunInfo, SkipInfo, VerdictRow
    from vhd.store.sqlite import Store, StoreLike, open_store, store_path

# Loaded on first use: a command that only opens the store (a resumed `vhd annotate`) does not pay
# for the export writers and label readers at start-up.
_EXPORTS = {
    "LabelRow": "vhd.records",
    "FORMATS": "vhd.store.export",
    "ExportResult": "vhd.store.export",
    "export": "vhd.store.export",
    "read_table": "vhd.store.export",
    "CATEGORIES": "vhd.store.labels",
    "LabelError": "vhd.store.labels",
    "LabelSet": "vhd.store.labels",
    "normalize_category": "vhd.store.labels",
    "read_labels": "vhd.store.labels",
    "RunInfo": "vhd.store.rows",
    "SkipInfo": "vhd.store.rows",
    "VerdictRow": "vhd.store.rows",
    "Store": "vhd.store.sqlite",
    "StoreLike": "vhd.store.sqlite",
    "open_store": "vhd.store.sqlite",
    "store_path": "vhd.store.sqlite",
}

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
    "StoreLike",
    "VerdictRow",
    "export",
    "normalize_category",
    "open_store",
    "read_labels",
    "read_table",
    "store_path",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
