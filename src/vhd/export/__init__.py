"""The export room: a store's annotations written as files other tools read (`vhd export`).

One module per on-disk format, each registered by name in `EXPORT_FORMATS` (`vhd.export.base`):
``vhd11k-csv`` (`vhd.export.vhd11k`), ``jsonl`` (`vhd.export.jsonl`), ``parquet``
(`vhd.export.parquet`) and ``hf``, a Hugging Face ``DatasetDict`` folder with its dataset card,
optionally pushed to the hub (`vhd.export.hf`). Every record format shares one column schema,
`vhd.export.schema`; `read_table` (`vhd.export.read`) reads a JSON Lines or Parquet export back
under it, and `to_pandas` / `store_table` (`vhd.export.frame`) read a store's verdicts into a
DataFrame or Arrow table with those columns, no file written. Importing this package is cheap:
pyarrow and ``datasets`` load when a format runs.

Example:
    >>> from vhd.export import export, read_table
    >>> result = export("run.db", "parquet", "out/annotations.parquet")  # doctest: +SKIP
    >>> table = read_table("out/annotations.parquet")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.export.base import EXPORT_FORMATS, FORMATS, ExportFormat, ExportResult, export, path_root, relative_path
    from vhd.export.frame import store_table, to_pandas
    from vhd.export.hf import HfFormat, export_hf, features
    from vhd.export.hf_result import HfExport
    from vhd.export.jsonl import JsonlFormat
    from vhd.export.parquet import ParquetFormat
    from vhd.export.read import read_table
    from vhd.export.schema import (
        RECORD_COLUMNS,
        Column,
        add_column,
        arrow_schema,
        hf_features,
        json_schema,
        parquet_schema,
        record,
    )
    from vhd.export.vhd11k import Vhd11kCsvFormat, vhd11k_columns, vhd11k_decision

_LAZY = {
    **dict.fromkeys(
        ["EXPORT_FORMATS", "FORMATS", "ExportFormat", "ExportResult", "export", "path_root", "relative_path"],
        "vhd.export.base",
    ),
    **dict.fromkeys(["store_table", "to_pandas"], "vhd.export.frame"),
    **dict.fromkeys(["HfFormat", "export_hf", "features"], "vhd.export.hf"),
    "HfExport": "vhd.export.hf_result",
    "JsonlFormat": "vhd.export.jsonl",
    "ParquetFormat": "vhd.export.parquet",
    "read_table": "vhd.export.read",
    **dict.fromkeys(
        [
            "RECORD_COLUMNS",
            "Column",
            "add_column",
            "arrow_schema",
            "hf_features",
            "json_schema",
            "parquet_schema",
            "record",
        ],
        "vhd.export.schema",
    ),
    **dict.fromkeys(["Vhd11kCsvFormat", "vhd11k_columns", "vhd11k_decision"], "vhd.export.vhd11k"),
}

__all__ = [
    "EXPORT_FORMATS",
    "FORMATS",
    "RECORD_COLUMNS",
    "Column",
    "ExportFormat",
    "ExportResult",
    "HfExport",
    "HfFormat",
    "JsonlFormat",
    "ParquetFormat",
    "Vhd11kCsvFormat",
    "add_column",
    "arrow_schema",
    "export",
    "export_hf",
    "features",
    "hf_features",
    "json_schema",
    "parquet_schema",
    "path_root",
    "read_table",
    "record",
    "relative_path",
    "store_table",
    "to_pandas",
    "vhd11k_columns",
    "vhd11k_decision",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
