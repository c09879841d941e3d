"""``jsonl``: JSON Lines, one export record (`vhd.export.schema.record`) a line, written row by row."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import IO

from vhd.export import schema as record_columns
from vhd.export.base import ExportFormat
from vhd.export.schema import (
    json_default,
    page_cells,
    record,
)
from vhd.fileio import atomic_write
from vhd.records import Annotation, Kind, Sample
from vhd.store.reads import (
    AnnotationPage,
)


class JsonlFormat(ExportFormat):
    """``jsonl``: one `record` a line."""

    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write the JSON Lines file, row by row."""
        atomic_write(out, lambda f: _write_jsonl(f, rows))
        return [out]

    def write_pages(self, out: Path, pages: Iterable[AnnotationPage], kind: Kind | None) -> list[Path]:
        """As `write`, a page at a time from the raw rows (`vhd.export.schema.page_cells`)."""
        atomic_write(out, lambda f: _write_jsonl_pages(f, pages))
        return [out]


def _write_jsonl(f: IO[str], rows: Iterable[tuple[Sample, Annotation]]) -> None:
    for sample, ann in rows:
        f.write(json.dumps(record(sample, ann), ensure_ascii=False, default=json_default))
        f.write("\n")


def _write_jsonl_pages(f: IO[str], pages: Iterable[AnnotationPage]) -> None:
    columns = list(record_columns.RECORD_COLUMNS)  # read now: `add_column` may have added some
    names = [c.name for c in columns]
    # what json.dumps(record, ensure_ascii=False, default=json_default) does, without a new encoder a row
    encode = json.JSONEncoder(ensure_ascii=False, default=json_default).encode
    for page in pages:
        cells = page_cells(page, columns)
        for i, values in enumerate(cells):
            if any(issubclass(t, datetime) for t in set(map(type, values))):  # as text now: no `default` call each
                cells[i] = [json_default(v) if isinstance(v, datetime) else v for v in values]
        f.write("".join([encode(dict(zip(names, row, strict=True))) + "\n" for row in zip(*cells, strict=True)]))
