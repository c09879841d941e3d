"""A store's verdicts as a table in memory (``pyarrow`` or pandas), with the export's columns.

`store_table` and `to_pandas` read the store the way `vhd.export.export` does (a page at a time,
the same selection and path rules) and build the rows under the one export schema
(`vhd.export.schema.arrow_schema`), so a notebook gets exactly the columns and types of a
Parquet export without writing a file.

Example:
    >>> from vhd.export import to_pandas
    >>> df = to_pandas("demo.db")  # doctest: +SKIP
    >>> df.groupby("status").size()  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError, MissingDependencyError, require
from vhd.export import schema as record_columns
from vhd.export.base import ExportFormat, ExportRequest, paged_export
from vhd.export.parquet import write_arrow_pages
from vhd.records import Annotation, Kind, Sample
from vhd.store.reads import AnnotationPage
from vhd.store.sqlite import StoreLike, using_store


class _Collected:
    """A ``write_table`` target that keeps the tables (what a ``ParquetWriter`` would write)."""

    def __init__(self) -> None:
        self.tables: list[Any] = []

    def write_table(self, table: Any) -> None:
        self.tables.append(table)


class _TableFormat(ExportFormat):
    """An in-memory "format": the pages as one ``pyarrow.Table`` under the export schema."""

    def __init__(self) -> None:
        self.table: Any = None

    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        raise NotImplementedError  # `write_pages` is what `paged_export` calls

    def write_pages(self, out: Path, pages: Iterable[AnnotationPage], kind: Kind | None) -> list[Path]:
        import pyarrow as pa

        schema = record_columns.arrow_schema()
        columns = list(record_columns.RECORD_COLUMNS)
        collected = _Collected()
        write_arrow_pages(pa, collected, pages, columns, [schema.field(c.name).type for c in columns], schema)
        self.table = pa.concat_tables(collected.tables) if collected.tables else schema.empty_table()
        return []


def store_table(
    store: StoreLike,
    config_hash: str | None = None,
    *,
    kind: str | None = None,
    run_id: str | None = None,
    include_unparsed: bool = True,
    relative_to: str | os.PathLike[str] | None = None,
    absolute_paths: bool = True,
) -> Any:
    """A store's verdicts as a ``pyarrow.Table`` with the export's columns (`vhd.export.schema`).

    Args:
        store: An open `vhd.store.Store` or the path of an existing one.
        config_hash: Only verdicts under this configuration (default: each sample's latest).
        kind: ``image`` or ``video`` only.
        run_id: Only verdicts written by this run.
        include_unparsed: Also rows without a decision (unparsed, truncated, errors; ``harmful``
            null, ``status`` says why). True by default: a table in memory shows everything; pass
            False for the rows a file export writes.
        relative_to: Give ``path`` relative to this folder.
        absolute_paths: ``path`` as stored (the default here: the table stays on this machine);
            False gives them relative to the samples' common folder, as an export does.

    Raises:
        ConfigError: No store at the path, or an unknown kind.
        MissingDependencyError: pyarrow is not installed (``pip install 'vhd[parquet]'``).
    """
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("pyarrow", "parquet") from exc
    try:
        want = None if kind is None else Kind(kind)
    except ValueError:
        raise ConfigError(f"unknown kind {kind!r}: choose image or video") from None
    request = ExportRequest(
        config_hash=config_hash,
        include_unparsed=include_unparsed,
        kind=want,
        run_id=run_id,
        relative_to=relative_to,
        absolute_paths=absolute_paths and relative_to is None,
    )
    fmt = _TableFormat()
    with using_store(store) as db:
        paged_export(fmt, db, Path(), request)
    return fmt.table if fmt.table is not None else record_columns.arrow_schema().empty_table()


def to_pandas(
    store: StoreLike,
    config_hash: str | None = None,
    *,
    kind: str | None = None,
    run_id: str | None = None,
    include_unparsed: bool = True,
    relative_to: str | os.PathLike[str] | None = None,
    absolute_paths: bool = True,
) -> Any:
    """A store's verdicts as a pandas ``DataFrame``: `store_table`'s rows, one per verdict.

    The columns and dtypes are those of ``pandas.read_parquet`` on a Parquet export
    (`vhd.export.schema.RECORD_COLUMNS`: ``id``, ``path``, ``harmful``, ``reason``, ``score``,
    ``status``... and ``turns`` as lists of dicts). The arguments are `store_table`'s.

    Raises:
        ConfigError: No store at the path, or an unknown kind.
        MissingDependencyError: pandas or pyarrow is not installed.
    """
    require("pandas", "parquet")
    table = store_table(
        store,
        config_hash,
        kind=kind,
        run_id=run_id,
        include_unparsed=include_unparsed,
        relative_to=relative_to,
        absolute_paths=absolute_paths,
    )
    return table.to_pandas()
