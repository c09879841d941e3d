"""``parquet``: Apache Parquet under `vhd.export.schema.parquet_schema`, in row groups of `ROW_GROUP` rows."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from vhd.errors import MissingDependencyError
from vhd.export import schema as record_columns
from vhd.export.base import ROW_GROUP, ExportFormat
from vhd.export.schema import (
    Column,
    page_cells,
    parquet_schema,
)
from vhd.fileio import atomic_write
from vhd.records import Annotation, Kind, Sample
from vhd.store.reads import (
    AnnotationPage,
)


class ParquetFormat(ExportFormat):
    """``parquet``: the `record` of each annotation under `parquet_schema`, in row groups (needs pyarrow)."""

    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write the Parquet file, `ROW_GROUP` rows at a time."""
        _write_parquet(out, rows, None)
        return [out]

    def write_pages(self, out: Path, pages: Iterable[AnnotationPage], kind: Kind | None) -> list[Path]:
        """As `write`, a page at a time from the raw rows (`vhd.export.schema.page_cells`)."""
        _write_parquet(out, None, pages)
        return [out]


def write_arrow_pages(
    pa: Any, writer: Any, pages: Iterable[AnnotationPage], columns: list[Column], types: list[Any], schema: Any
) -> None:
    """Write raw pages as Arrow tables of `ROW_GROUP` rows each, to ``writer.write_table``.

    The row groups `_write_parquet` writes from records; `vhd.export.frame` collects them in memory.

    A column with `Column.arrow_from_page` is built as an Arrow array a page at a time (the pieces
    joined and cut at row-group bounds); any other is built from `page_cells`, as from records.
    """
    direct = [i for i, c in enumerate(columns) if c.arrow_from_page is not None]
    by_cells = [i for i, c in enumerate(columns) if c.arrow_from_page is None]
    cells: list[list[Any]] = [[] for _ in columns]
    pieces: list[list[Any]] = [[] for _ in columns]
    held = 0

    def flush(n: int) -> None:
        arrays: list[Any] = [None] * len(columns)
        for i in by_cells:
            arrays[i] = pa.array(cells[i][:n], type=types[i])
            del cells[i][:n]
        for i in direct:
            whole = pieces[i][0] if len(pieces[i]) == 1 else pa.concat_arrays(pieces[i])
            arrays[i] = whole.slice(0, n)
            pieces[i] = [whole.slice(n)] if len(whole) > n else []
        writer.write_table(pa.Table.from_arrays(arrays, schema=schema))

    for page in pages:
        for i, values in zip(by_cells, page_cells(page, [columns[i] for i in by_cells]), strict=True):
            cells[i].extend(values)
        for i in direct:
            make = columns[i].arrow_from_page
            assert make is not None
            pieces[i].append(make(pa, page))
        held += len(page.rows)
        while held >= ROW_GROUP:
            flush(ROW_GROUP)
            held -= ROW_GROUP
    if held:
        flush(held)


def _write_parquet(
    path: Path, rows: Iterable[tuple[Sample, Annotation]] | None, pages: Iterable[AnnotationPage] | None
) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError("pyarrow", "parquet") from exc
    schema = parquet_schema()

    columns = list(record_columns.RECORD_COLUMNS)  # read now: `add_column` may have added some
    types = [schema.field(c.name).type for c in columns]

    def flush(writer: Any, cells: list[list[Any]]) -> None:
        # column-wise: one pa.array per column of the row group, no dict per row
        arrays = [pa.array(values, type=t) for values, t in zip(cells, types, strict=True)]
        writer.write_table(pa.Table.from_arrays(arrays, schema=schema))

    def write(f: IO[bytes]) -> None:
        with pq.ParquetWriter(f, schema) as writer:
            cells: list[list[Any]] = [[] for _ in columns]
            if pages is not None:
                write_arrow_pages(pa, writer, pages, columns, types, schema)
                return
            pairs = [(c.value, cells[i].append) for i, c in enumerate(columns)]
            n = 0
            for sample, ann in rows or ():
                for value, append in pairs:
                    append(value(sample, ann))
                n += 1
                if n >= ROW_GROUP:
                    flush(writer, cells)
                    for column in cells:
                        column.clear()
                    n = 0
            if n:
                flush(writer, cells)

    atomic_write(path, write, binary=True)
