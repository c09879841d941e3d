"""Where results live: the SQLite store and its side caches.

Every SQL statement of vhd lives in this package: `Store` and the modules beside it
(`vhd.store.categories`, `vhd.store.curation`) for the store, `vhd.store.cache` for the small
SQLite caches kept next to a command's output.

Example:
    >>> from vhd.store import Store
    >>> with Store("run.db") as store:  # doctest: +SKIP
    ...     print(len(store.runs()))

Exports (`vhd.export`) and label files (`vhd.labels`) were importable from here in 0.1; those
names still are, with a deprecation warning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.records import LabelRow
    from vhd.store.rows import RunInfo, SkipInfo, VerdictRow
    from vhd.store.sqlite import Store, StoreLike, open_store, store_path

_EXPORTS = {
    "LabelRow": "vhd.records",
    "RunInfo": "vhd.store.rows",
    "SkipInfo": "vhd.store.rows",
    "VerdictRow": "vhd.store.rows",
    "Store": "vhd.store.sqlite",
    "StoreLike": "vhd.store.sqlite",
    "open_store": "vhd.store.sqlite",
    "store_path": "vhd.store.sqlite",
}

__all__ = [
    "LabelRow",
    "RunInfo",
    "SkipInfo",
    "Store",
    "StoreLike",
    "VerdictRow",
    "open_store",
    "store_path",
]

_MOVED = {
    **dict.fromkeys(["FORMATS", "ExportResult", "export", "read_table"], "vhd.export"),
    **dict.fromkeys(["CATEGORIES", "LabelError", "LabelSet", "normalize_category", "read_labels"], "vhd.labels.files"),
}
"""Names exported here in 0.1 that live in `vhd.export` and `vhd.labels` now (a deprecation warning each)."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, moved=_MOVED)
