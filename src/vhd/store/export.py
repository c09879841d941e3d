"""Export a store's annotations: the VHD11K release CSV, JSON Lines, or Parquet, streamed.

Exports stream: the store is read a page at a time (`vhd.store.reads.AnnotationReads.iter_annotations`,
keyset pagination), JSON Lines are written row by row, Parquet in row groups of `ROW_GROUP` rows
through pyarrow's ``ParquetWriter``, and the VHD11K CSV spools its rows to a temporary file until
the number of debate rounds (its header) is known. Memory holds a page and a row group, whatever
the size of the store.

The JSON Lines and Parquet records are built from one typed column list,
`vhd.store.columns.RECORD_COLUMNS`: **add a column there** (`add_column`) and both formats get it
with the same value and type. The two agree on types: ``sample.meta`` is a JSON string in both
(its keys differ per sample, so no fixed struct fits; ``json.loads`` reads it back), and
``started_at`` / ``finished_at`` are UTC timestamps: a Parquet ``timestamp[us, UTC]``, and in JSON
Lines the same instant as ISO-8601 text ending in ``+00:00`` (which pandas' ``read_json`` turns
into timestamps by itself).

Every file is written to a temporary file in the target folder and moved into place, so an
interrupted export never leaves a half-written file under the final name. Formats are
`ExportFormat` classes registered by name in `EXPORT_FORMATS`; third-party packages add formats
through the ``vhd.export_formats`` entry-point group.

Example:
    >>> with Store("run.db") as store:  # doctest: +SKIP
    ...     result = export(store, "vhd11k-csv", "out/annotations.csv")
"""

from __future__ import annotations

import abc
import csv
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, ClassVar

from vhd.errors import ConfigError, MissingDependencyError
from vhd.fileio import atomic_write, escape_cell
from vhd.records import Annotation, Kind, Role, Sample, Status
from vhd.registry import Registry
from vhd.store import columns as record_columns
from vhd.store.columns import RECORD_COLUMNS, Column, add_column, parquet_schema, record
from vhd.store.sqlite import Store


class ExportFormat(abc.ABC):
    """A file format `export` writes, registered by name in `EXPORT_FORMATS`.

    Attributes:
        decided_only: Write only annotations with a yes/no decision, whatever
            ``include_unparsed`` says (the VHD11K CSV needs one).
    """

    decided_only: ClassVar[bool] = False

    @abc.abstractmethod
    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write the rows (atomically) to ``out``, or to files beside it, and return the files written.

        Args:
            out: The output file the user named.
            rows: ``(sample, annotation)`` pairs, sample paths already as they should be written;
                read from the store as they are iterated (once): stream them, do not keep them.
            kind: The kind the user asked for, if any.
        """


__all__ = [
    "EXPORT_FORMATS",
    "FORMATS",
    "RECORD_COLUMNS",
    "Column",
    "ExportFormat",
    "ExportResult",
    "JsonlFormat",
    "ParquetFormat",
    "Vhd11kCsvFormat",
    "add_column",
    "export",
    "parquet_schema",
    "record",
    "vhd11k_columns",
    "vhd11k_decision",
]

EXPORT_FORMATS: Registry[type[ExportFormat]] = Registry("export format", "vhd.export_formats", base=ExportFormat)
"""Every export format: built-ins below, plugins from the ``vhd.export_formats`` entry-point group."""

EXPORT_FORMATS.add("vhd11k-csv", "vhd.store.export:Vhd11kCsvFormat", summary="the VHD11K release CSV")
EXPORT_FORMATS.add("jsonl", "vhd.store.export:JsonlFormat", summary="JSON Lines, one annotation a line")
EXPORT_FORMATS.add(
    "parquet", "vhd.store.export:ParquetFormat", extra="parquet", needs=["pyarrow"], summary="Apache Parquet"
)

FORMATS = EXPORT_FORMATS
"""Export formats `export` accepts (the registry is also the collection of their names)."""

LEFT_OUT_KEPT = 1000
"""Annotations left out that `ExportResult.left_out` lists (all are counted)."""

ROW_GROUP = 2048
"""Rows per Parquet row group (and per batch held in memory)."""

_PATH_COLUMN = {Kind.IMAGE: "imagePath", Kind.VIDEO: "videoPath"}
_UNDECIDED = (Status.UNPARSED, Status.ERROR)


@dataclass
class ExportResult:
    """What an export wrote.

    Attributes:
        files: The files written.
        written: Rows (annotations) written.
        left_out: ``(sample id, why)`` for the first `LEFT_OUT_KEPT` annotations not written.
        left_out_total: How many annotations were left out, by reason.
    """

    files: list[Path] = field(default_factory=list)
    written: int = 0
    left_out: list[tuple[str, str]] = field(default_factory=list)
    left_out_total: Counter[str] = field(default_factory=Counter)

    @property
    def left_out_counts(self) -> dict[str, int]:
        """How many annotations were left out for each reason (all of them, not only those listed)."""
        return dict(self.left_out_total)

    def leave_out(self, sample_id: str, why: str) -> None:
        """Count an annotation left out; the first `LEFT_OUT_KEPT` are listed with their sample."""
        self.left_out_total[why] += 1
        if len(self.left_out) < LEFT_OUT_KEPT:
            self.left_out.append((sample_id, why))


def export(
    store: Store,
    fmt: str,
    out: str | os.PathLike[str],
    *,
    config_hash: str | None = None,
    include_unparsed: bool = False,
    kind: Kind | str | None = None,
    run_id: str | None = None,
    relative_to: str | os.PathLike[str] | None = None,
) -> ExportResult:
    """Export annotations from a store.

    Args:
        store: The store to read.
        fmt: ``vhd11k-csv``, ``jsonl``, ``parquet`` or a plugin's format (`EXPORT_FORMATS`).
        out: Output file. For ``vhd11k-csv`` with both images and videos (and no ``kind``),
            two files are written beside it: ``<stem>_images.csv`` and ``<stem>_videos.csv``.
        config_hash: Only annotations under this configuration (default: each sample's latest).
        include_unparsed: Also write unparsed and error annotations (``jsonl`` and ``parquet``
            only: the VHD11K CSV needs a yes/no decision, so it always leaves them out).
        kind: Only images or only videos.
        run_id: Only annotations written by this run.
        relative_to: Write sample paths relative to this folder instead of as stored.

    Returns:
        The files written, the number of rows, and every annotation left out with the reason.

    Raises:
        ConfigError: Unknown format or kind.
        MissingDependencyError: ``parquet`` without pyarrow installed (before anything is read).
    """
    writer = EXPORT_FORMATS.load(fmt)()
    try:
        want_kind = None if kind is None else Kind(kind)
    except ValueError:
        raise ConfigError(f"unknown kind {kind!r}: choose image or video") from None
    out_path = Path(out)
    base = None if relative_to is None else os.path.abspath(relative_to)
    result = ExportResult()

    def rows() -> Iterator[tuple[Sample, Annotation]]:
        for sample, ann in store.iter_annotations(config_hash=config_hash, run_id=run_id):
            if want_kind is not None and sample.kind is not want_kind:
                continue
            if vhd11k_decision(ann) is None and (writer.decided_only or not include_unparsed):
                status = Status(ann.verdict.status).value
                result.leave_out(sample.id, f"status {status}" if status != Status.OK.value else "no decision")
                continue
            if base is not None:
                sample.path = os.path.relpath(sample.path, base)
            result.written += 1
            yield sample, ann

    result.files.extend(writer.write(out_path, rows(), want_kind))
    return result


class Vhd11kCsvFormat(ExportFormat):
    """``vhd11k-csv``: the VHD11K release CSV; images and videos (when both) go to two files beside ``out``."""

    decided_only = True

    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write one CSV, or ``<stem>_images.csv`` and ``<stem>_videos.csv``.

        Rows are spooled (one CSV line each: the number of rounds, then the cells, already escaped)
        to a temporary file per kind in the target folder until the largest number of debate
        rounds, which sets the header, is known.
        """
        out.parent.mkdir(parents=True, exist_ok=True)
        spools: dict[Kind, IO[str]] = {}
        writers: dict[Kind, Any] = {}
        rounds: dict[Kind, int] = {}
        try:
            for sample, ann in rows:
                k = sample.kind if type(sample.kind) is Kind else Kind(sample.kind)
                spool_writer = writers.get(k)
                if spool_writer is None:
                    spools[k] = tempfile.TemporaryFile("w+", encoding="utf-8", newline="", dir=out.parent)  # noqa: SIM115 (closed below)
                    spool_writer = writers[k] = csv.writer(spools[k])
                    rounds[k] = 1  # at least one argument pair, as in the authors' files
                aff, neg = _arguments(ann)
                n = len(aff)
                if n > rounds[k]:
                    rounds[k] = n
                spool_writer.writerow(
                    [
                        n,
                        escape_cell(sample.path),
                        vhd11k_decision(ann),
                        escape_cell(ann.verdict.reason),
                        *map(escape_cell, aff),
                        *map(escape_cell, neg),
                        escape_cell(";".join(ann.verdict.categories)),
                    ]
                )
            kinds = sorted(spools, key=lambda k: k.value)
            if len(kinds) > 1:
                files = []
                for k in kinds:
                    target = out.with_name(f"{out.stem}_{k.value}s{out.suffix}")
                    _write_vhd11k_csv(target, spools[k], k, rounds[k])
                    files.append(target)
                return files
            only = kinds[0] if kinds else (kind or Kind.IMAGE)
            _write_vhd11k_csv(out, spools.get(only), only, rounds.get(only, 1))
            return [out]
        finally:
            for spool in spools.values():
                spool.close()


class JsonlFormat(ExportFormat):
    """``jsonl``: one `record` a line."""

    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write the JSON Lines file, row by row."""
        atomic_write(out, lambda f: _write_jsonl(f, rows))
        return [out]


class ParquetFormat(ExportFormat):
    """``parquet``: the `record` of each annotation under `parquet_schema`, in row groups (needs pyarrow)."""

    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write the Parquet file, `ROW_GROUP` rows at a time."""
        _write_parquet(out, rows)
        return [out]


def vhd11k_decision(ann: Annotation) -> str | None:
    """Return ``yes``/``no`` as the VHD11K files write it, or None when undecided.

    Refusals count as harmful, as in the paper.
    """
    v = ann.verdict
    status = Status(v.status)
    if status is Status.REFUSED:
        return "yes"
    if status in _UNDECIDED or v.harmful is None:
        return None
    return "yes" if v.harmful else "no"


def vhd11k_columns(kind: Kind, rounds: int) -> list[str]:
    """Return the VHD11K CSV header for a kind and a number of debate rounds."""
    return [
        _PATH_COLUMN[kind],
        "decision",
        "harmfulType",
        *(f"affirmativeDebater_argument_{i}" for i in range(rounds)),
        *(f"negativeDebater_argument_{i}" for i in range(rounds)),
        "categories",
    ]


def _arguments(ann: Annotation) -> tuple[list[str], list[str]]:
    """The affirmative and negative arguments of rounds 1..n (n: the last round of any turn).

    Each is the first non-blank text of that role in that round, or ``"None"``.
    """
    n = 0
    found: dict[tuple[Role, int], str] = {}
    for t in ann.turns:
        if t.round > n:
            n = t.round
        if (t.role is Role.AFFIRMATIVE or t.role is Role.NEGATIVE) and t.text.strip():
            found.setdefault((t.role, t.round), t.text)
    aff = [found.get((Role.AFFIRMATIVE, r), "None") for r in range(1, n + 1)]
    neg = [found.get((Role.NEGATIVE, r), "None") for r in range(1, n + 1)]
    return aff, neg


def _write_vhd11k_csv(path: Path, spool: IO[str] | None, kind: Kind, rounds: int) -> None:
    """Write the CSV from a spool of CSV lines, padding every row to ``rounds`` argument pairs."""

    def write(f: IO[str]) -> None:
        writer = csv.writer(f)
        writer.writerow(vhd11k_columns(kind, rounds))
        if spool is None:
            return
        spool.seek(0)
        page: list[list[str]] = []
        for row in csv.reader(spool):
            n = int(row[0])
            if n == rounds:
                page.append(row[1:])
            else:
                pad = ["None"] * (rounds - n)
                page.append([*row[1 : 4 + n], *pad, *row[4 + n : 4 + 2 * n], *pad, row[-1]])
            if len(page) >= ROW_GROUP:
                writer.writerows(page)
                page.clear()
        writer.writerows(page)

    atomic_write(path, write)


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat(timespec="microseconds")
    return str(value)


def _write_jsonl(f: IO[str], rows: Iterable[tuple[Sample, Annotation]]) -> None:
    for sample, ann in rows:
        f.write(json.dumps(record(sample, ann), ensure_ascii=False, default=_json_default))
        f.write("\n")


def _write_parquet(path: Path, rows: Iterable[tuple[Sample, Annotation]]) -> None:
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
            pairs = [(c.value, cells[i].append) for i, c in enumerate(columns)]
            n = 0
            for sample, ann in rows:
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
