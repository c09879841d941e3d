"""Export a store's annotations: the VHD11K release CSV, JSON Lines, or Parquet, streamed.

Exports stream: the store is read a page at a time (`vhd.store.reads.AnnotationReads.iter_annotations`,
keyset pagination), JSON Lines are written row by row, Parquet in row groups of `ROW_GROUP` rows
through pyarrow's ``ParquetWriter``, and the VHD11K CSV spools its rows to a temporary file until
the number of debate rounds (its header) is known. Memory holds a page and a row group, whatever
the size of the store.

The JSON Lines and Parquet records are built from one typed, flat column list,
`vhd.store.columns.RECORD_COLUMNS`: **add a column there** (`add_column`) and both formats (and
the Hugging Face export) get it with the same value and type. ``meta`` is a JSON string in both,
and ``started_at`` / ``finished_at`` are UTC timestamps: a Parquet ``timestamp[us, UTC]``, and in
JSON Lines the same instant as ISO-8601 text ending in ``+00:00``. `read_table` reads either back
under the one schema (`vhd.store.columns.arrow_schema`), so columns that are null in every row and
empty lists keep their types; `vhd.store.columns.json_schema` describes a JSON Lines record.

Every file is written to a temporary file in the target folder and moved into place, so an
interrupted export never leaves a half-written file under the final name. Formats are
`ExportFormat` classes registered by name in `EXPORT_FORMATS`; third-party packages add formats
through the ``vhd.export_formats`` entry-point group.

Two paths, one output. `export` reads the store as raw pages (`vhd.store.reads.AnnotationPage`)
and hands them to `ExportFormat.write_pages`. A plugin format implements only `ExportFormat.write`
and gets ``(Sample, Annotation)`` records, built from each page. The built-in formats override
`write_pages` to go from the stored cells straight to CSV cells, JSON and Arrow arrays (JSON Lines
and Parquet through `vhd.store.columns.page_cells`), several times cheaper on a large store, and
keep `write` for callers with records; both paths write the same bytes (tested). The module is
long (about 650 lines) for that reason: each writer's two paths stay side by side.

Example:
    >>> result = export("run.db", "vhd11k-csv", "out/annotations.csv")  # doctest: +SKIP
"""

from __future__ import annotations

import abc
import csv
import io
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import IO, Any, ClassVar

from vhd.errors import ConfigError, MissingDependencyError
from vhd.fileio import atomic_write, escape_cell, printable
from vhd.records import Annotation, Kind, Role, Sample, Status
from vhd.registry import Registry
from vhd.store import columns as record_columns
from vhd.store.columns import (
    RECORD_COLUMNS,
    Column,
    add_column,
    arrow_schema,
    json_default,
    page_cells,
    parquet_schema,
    record,
)
from vhd.store.reads import (
    ROW_CATEGORIES,
    ROW_HARMFUL,
    ROW_ID,
    ROW_KIND,
    ROW_PATH,
    ROW_REASON,
    ROW_SAMPLE_ID,
    ROW_STATUS,
    AnnotationPage,
)
from vhd.store.rows import loads
from vhd.store.sqlite import Store, StoreLike, using_store


class ExportFormat(abc.ABC):
    """A file format `export` writes, registered by name in `EXPORT_FORMATS`.

    Attributes:
        decided_only: Write only annotations with a yes/no decision, whatever
            ``include_unparsed`` says (the VHD11K CSV needs one).
        raw_cells: For a format that overrides `write_pages`: the ``vhd.store.reads.ROW_*``
            positions it reads (the others are left None, not read from the store); None: all.
        raw_turn_cells: The same for the positions of a raw turn (`vhd.store.reads.RawTurn`).
    """

    decided_only: ClassVar[bool] = False
    raw_cells: ClassVar[frozenset[int] | None] = None
    raw_turn_cells: ClassVar[frozenset[int] | None] = None

    @abc.abstractmethod
    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write the rows (atomically) to ``out``, or to files beside it, and return the files written.

        Args:
            out: The output file the user named.
            rows: ``(sample, annotation)`` pairs, sample paths already as they should be written;
                read from the store as they are iterated (once): stream them, do not keep them.
            kind: The kind the user asked for, if any.
        """

    def write_pages(self, out: Path, pages: Iterable[AnnotationPage], kind: Kind | None) -> list[Path]:
        """Write raw pages of rows: what `export` calls. By default, `write` of their records.

        A format that can read the store's raw rows (as the built-in ones do) overrides this to
        skip building a `Sample` and an `Annotation` per row; any other format only implements
        `write`. The pages hold only the rows to write, sample paths already as they should be
        written; like ``rows`` they are read from the store as they are iterated (once).
        """
        return self.write(out, (pair for page in pages for pair in page.pairs()), kind)


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
    "arrow_schema",
    "export",
    "parquet_schema",
    "path_root",
    "read_table",
    "record",
    "relative_path",
    "vhd11k_columns",
    "vhd11k_decision",
]

EXPORT_FORMATS: Registry[type[ExportFormat]] = Registry("export format", "vhd.export_formats", base=ExportFormat)
"""Every export format: built-ins below, plugins from the ``vhd.export_formats`` entry-point group."""

EXPORT_FORMATS.add("vhd11k-csv", "vhd.store.export:Vhd11kCsvFormat", summary="the VHD11K release CSV")
EXPORT_FORMATS.add("csv", "vhd.store.export:Vhd11kCsvFormat", summary="the VHD11K release CSV (same as vhd11k-csv)")
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

_FILTER_CELLS = frozenset({ROW_SAMPLE_ID, ROW_KIND, ROW_STATUS, ROW_HARMFUL, ROW_PATH})
"""The cells `export` reads itself (kind, decision, path), whatever the format reads."""
_PATH_COLUMN = {Kind.IMAGE: "imagePath", Kind.VIDEO: "videoPath"}
_UNDECIDED = (Status.UNPARSED, Status.TRUNCATED, Status.ERROR)
_KIND_BY_VALUE = {k.value: k for k in Kind}
_ROLE_VALUES = frozenset(r.value for r in Role)
_SPOOL_CHUNK = 1 << 18
"""Characters of VHD11K CSV rows gathered in memory before they go to the spool file."""
_FORMULA_FIRST = frozenset("=+-@\t\r'")
"""First characters after which `escape_cell` may change a text (others it returns as is)."""


@dataclass
class ExportResult:
    """What an export wrote.

    Attributes:
        files: The files written.
        written: Rows (annotations) written.
        left_out: ``(sample id, why)`` for the first `LEFT_OUT_KEPT` annotations not written.
        left_out_total: How many annotations were left out, by reason.
        root: The folder sample paths are written relative to (None: written as stored).
    """

    files: list[Path] = field(default_factory=list)
    written: int = 0
    left_out: list[tuple[str, str]] = field(default_factory=list)
    left_out_total: Counter[str] = field(default_factory=Counter)
    root: Path | None = None

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
    store: StoreLike,
    fmt: str,
    out: str | os.PathLike[str],
    *,
    config_hash: str | None = None,
    include_unparsed: bool = False,
    kind: Kind | str | None = None,
    run_id: str | None = None,
    relative_to: str | os.PathLike[str] | None = None,
    absolute_paths: bool = False,
) -> ExportResult:
    """Export annotations from a store.

    Args:
        store: The store to read: an open `Store` or its path.
        fmt: ``vhd11k-csv`` (or ``csv``), ``jsonl``, ``parquet`` or a plugin's format (`EXPORT_FORMATS`).
        out: Output file. For ``vhd11k-csv`` with both images and videos (and no ``kind``),
            two files are written beside it: ``<stem>_images.csv`` and ``<stem>_videos.csv``.
        config_hash: Only annotations under this configuration (default: each sample's latest).
        include_unparsed: Also write unparsed and error annotations (``jsonl`` and ``parquet``
            only: the VHD11K CSV needs a yes/no decision, so it always leaves them out).
        kind: Only images or only videos.
        run_id: Only annotations written by this run.
        relative_to: Write sample paths relative to this folder.
        absolute_paths: Write sample paths as stored (absolute local paths), not relative to
            a folder. By default paths are written relative to `ExportResult.root`: the deepest
            folder holding every exported sample (`vhd.store.Store.annotated_path_root`), so
            a shared file names no local folder or user.

    Returns:
        The files written, the number of rows, and every annotation left out with the reason.

    Raises:
        ConfigError: Unknown format or kind, both ``relative_to`` and ``absolute_paths``, or no store
            at the path.
        MissingDependencyError: ``parquet`` without pyarrow installed (before anything is read).
    """
    writer = EXPORT_FORMATS.load(fmt)()
    try:
        want_kind = None if kind is None else Kind(kind)
    except ValueError:
        raise ConfigError(f"unknown kind {kind!r}: choose image or video") from None
    out_path = Path(out)
    with using_store(store) as db:
        base = path_root(db, relative_to, absolute_paths, config_hash=config_hash, run_id=run_id, kind=want_kind)
        result = ExportResult(root=None if base is None else Path(base))

        keep_undecided = include_unparsed and not writer.decided_only
        want = None if want_kind is None else want_kind.value

        cells = turn_cells = None
        raw = _reads_pages(type(writer))
        if raw:  # perhaps only some cells
            cells = None if writer.raw_cells is None else writer.raw_cells | _FILTER_CELLS
            turn_cells = writer.raw_turn_cells

        def pages(db: Store) -> Iterator[AnnotationPage]:
            for page in db.iter_annotation_pages(
                config_hash=config_hash, run_id=run_id, cells=cells, turn_cells=turn_cells
            ):
                rows = []
                for r in page.rows:
                    if want is not None and r[ROW_KIND] != want and Kind(r[ROW_KIND]) is not want_kind:
                        continue
                    if not keep_undecided and _decision(r[ROW_STATUS], r[ROW_HARMFUL]) is None:
                        status = Status(r[ROW_STATUS]).value
                        why = f"status {status}" if status != Status.OK.value else "no decision"
                        result.leave_out(r[ROW_SAMPLE_ID], why)
                        continue
                    if base is not None:
                        r = (*r[:ROW_PATH], relative_path(r[ROW_PATH], base), *r[ROW_PATH + 1 :])
                    rows.append(r)
                if rows:
                    result.written += len(rows)
                    # the rows are new tuples whenever paths were rewritten, even when none was left out
                    yield page if base is None and len(rows) == len(page.rows) else page.with_rows(rows)

        write_pages = writer.write_pages if raw else partial(ExportFormat.write_pages, writer)
        result.files.extend(write_pages(out_path, pages(db), want_kind))
    return result


def path_root(
    store: Store,
    relative_to: str | os.PathLike[str] | None,
    absolute_paths: bool,
    *,
    config_hash: str | None = None,
    run_id: str | None = None,
    kind: Kind | None = None,
) -> str | None:
    """The folder an export writes sample paths relative to, or None to write them as stored.

    ``relative_to`` when given; else, unless ``absolute_paths``, the deepest folder holding every
    sample the export reads (`vhd.store.Store.annotated_path_root`).

    Raises:
        ConfigError: Both ``relative_to`` and ``absolute_paths``.
    """
    if relative_to is not None:
        if absolute_paths:
            raise ConfigError("--relative-to and --absolute-paths contradict each other: pass one")
        return os.path.abspath(relative_to)
    if absolute_paths:
        return None
    return store.annotated_path_root(config_hash, run_id, kind)


def relative_path(path: str, base: str) -> str:
    """``path`` relative to the folder ``base`` (both absolute): a slice when it lies under ``base``.

    `os.path.relpath` normalises both paths on every call, several times the cost of writing a
    row; a stored path under the export's root (every path, for the default root) needs none.
    """
    prefix = base if base.endswith(os.sep) else base + os.sep
    rest = path[len(prefix) - 1 :]
    if path.startswith(prefix) and f"{os.sep}." not in rest and os.sep * 2 not in rest:
        return path[len(prefix) :]
    return os.path.relpath(path, base)


def _reads_pages(fmt: type[ExportFormat]) -> bool:
    """Whether a format writes raw pages itself.

    It does when it overrides `ExportFormat.write_pages` and no subclass below that override
    replaced `write`: a plugin that derives from a built-in format to change its `write` gets
    records, as it did before there were pages.
    """
    if fmt.write_pages is ExportFormat.write_pages:
        return False
    pages_owner = next(c for c in fmt.__mro__ if "write_pages" in c.__dict__)
    write_owner = next(c for c in fmt.__mro__ if "write" in c.__dict__)
    return write_owner is pages_owner or not issubclass(write_owner, pages_owner)


class Vhd11kCsvFormat(ExportFormat):
    """``vhd11k-csv``: the VHD11K release CSV; images and videos (when both) go to two files beside ``out``."""

    decided_only = True
    raw_cells = frozenset({ROW_ID, ROW_STATUS, ROW_HARMFUL, ROW_REASON, ROW_CATEGORIES, ROW_KIND, ROW_PATH})
    raw_turn_cells = frozenset({1, 2, 3})  # role, round, text

    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write one CSV, or ``<stem>_images.csv`` and ``<stem>_videos.csv``."""
        return _write_vhd11k(out, map(_vhd11k_row, rows), kind)

    def write_pages(self, out: Path, pages: Iterable[AnnotationPage], kind: Kind | None) -> list[Path]:
        """As `write`, reading the raw rows (no record objects)."""
        return _write_vhd11k(out, _vhd11k_page_rows(pages), kind)


class JsonlFormat(ExportFormat):
    """``jsonl``: one `record` a line."""

    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write the JSON Lines file, row by row."""
        atomic_write(out, lambda f: _write_jsonl(f, rows))
        return [out]

    def write_pages(self, out: Path, pages: Iterable[AnnotationPage], kind: Kind | None) -> list[Path]:
        """As `write`, a page at a time from the raw rows (`vhd.store.columns.page_cells`)."""
        atomic_write(out, lambda f: _write_jsonl_pages(f, pages))
        return [out]


class ParquetFormat(ExportFormat):
    """``parquet``: the `record` of each annotation under `parquet_schema`, in row groups (needs pyarrow)."""

    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write the Parquet file, `ROW_GROUP` rows at a time."""
        _write_parquet(out, rows, None)
        return [out]

    def write_pages(self, out: Path, pages: Iterable[AnnotationPage], kind: Kind | None) -> list[Path]:
        """As `write`, a page at a time from the raw rows (`vhd.store.columns.page_cells`)."""
        _write_parquet(out, None, pages)
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


def _decision(status: str, harmful: int | None) -> str | None:
    """`vhd11k_decision` of a raw row's stored status and harmful flag."""
    if status == "refused":
        return "yes"
    if status == "ok":
        return None if harmful is None else "yes" if harmful else "no"
    Status(status)  # unparsed, error or no status at all (ValueError, as building the record raises)
    return None


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


def _vhd11k_row(pair: tuple[Sample, Annotation]) -> tuple[Kind, int, list[Any]]:
    """The kind, the number of rounds and the spool row (cells escaped) of a record."""
    sample, ann = pair
    k = sample.kind if type(sample.kind) is Kind else Kind(sample.kind)
    aff, neg = _arguments(ann)
    n = len(aff)
    cells = [
        n,
        escape_cell(sample.path),
        vhd11k_decision(ann),
        escape_cell(ann.verdict.reason),
        *map(escape_cell, aff),
        *map(escape_cell, neg),
        escape_cell(";".join(ann.verdict.categories)),
    ]
    return k, n, cells


def _vhd11k_page_rows(pages: Iterable[AnnotationPage]) -> Iterator[tuple[Kind, int, list[Any]]]:
    """`_vhd11k_row` of every raw row: the same cells, read from the stored values."""
    kinds, roles, esc, formula = _KIND_BY_VALUE, _ROLE_VALUES, escape_cell, _FORMULA_FIRST
    for page in pages:
        turns = page.turns
        for r in page.rows:
            n = 0
            aff_at: dict[int, str] = {}
            neg_at: dict[int, str] = {}
            for _id, role, round_no, text, *_rest in turns.get(r[ROW_ID], ()):
                if round_no > n:
                    n = round_no
                if role == "affirmative":
                    if round_no not in aff_at and text.strip():
                        aff_at[round_no] = text
                elif role == "negative":
                    if round_no not in neg_at and text.strip():
                        neg_at[round_no] = text
                elif role not in roles:
                    Role(role)  # ValueError, as building the record raises
            aff = [aff_at.get(i, "None") for i in range(1, n + 1)]
            neg = [neg_at.get(i, "None") for i in range(1, n + 1)]
            cats = r[ROW_CATEGORIES]
            path, reason = r[ROW_PATH], r[ROW_REASON]
            yield (
                kinds.get(r[ROW_KIND]) or Kind(r[ROW_KIND]),
                n,
                [
                    n,
                    esc(path) if path[:1] in formula else path,
                    _decision(r[ROW_STATUS], r[ROW_HARMFUL]),
                    esc(reason) if reason is None or reason[:1] in formula else reason,
                    *[esc(a) if a[:1] in formula else a for a in aff],
                    *[esc(a) if a[:1] in formula else a for a in neg],
                    "" if cats == "[]" else esc(";".join(loads(cats))),
                ],
            )


def _write_vhd11k(out: Path, rows: Iterable[tuple[Kind, int, list[Any]]], kind: Kind | None) -> list[Path]:
    """Write one CSV, or ``<stem>_images.csv`` and ``<stem>_videos.csv``, from spool rows.

    Rows are spooled (one CSV line each: the number of rounds, then the cells, already escaped)
    to a temporary file per kind in the target folder until the largest number of debate
    rounds, which sets the header, is known.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    spools: dict[Kind, IO[str]] = {}
    buffers: dict[Kind, io.StringIO] = {}
    writers: dict[Kind, Any] = {}
    rounds: dict[Kind, int] = {}
    try:
        for k, n, cells in rows:
            spool_writer = writers.get(k)
            if spool_writer is None:
                spools[k] = tempfile.TemporaryFile("w+", encoding="utf-8", newline="", dir=out.parent)  # noqa: SIM115 (closed below)
                buffers[k] = io.StringIO(newline="")  # a text file's write costs more than a row: one per SPOOL_CHUNK
                spool_writer = writers[k] = csv.writer(buffers[k])
                rounds[k] = 1  # at least one argument pair, as in the authors' files
            if n > rounds[k]:
                rounds[k] = n
            spool_writer.writerow(cells)
            if buffers[k].tell() >= _SPOOL_CHUNK:
                _drain(buffers[k], spools[k])
        for k, buffer in buffers.items():
            _drain(buffer, spools[k])
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


def _drain(buffer: io.StringIO, spool: IO[str]) -> None:
    spool.write(buffer.getvalue())
    buffer.seek(0)
    buffer.truncate()


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


def _write_parquet_pages(
    pa: Any, writer: Any, pages: Iterable[AnnotationPage], columns: list[Column], types: list[Any], schema: Any
) -> None:
    """Write raw pages in the row groups `_write_parquet` writes from records: `ROW_GROUP` rows each.

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
                _write_parquet_pages(pa, writer, pages, columns, types, schema)
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


JSONL_BLOCK_BYTES = 2**20
"""Bytes `read_table` reads of a JSON Lines file at a time; also the longest line it accepts."""


def read_table(path: str | os.PathLike[str]) -> Any:
    """Read a JSON Lines or Parquet export back as a ``pyarrow.Table`` under the export schema.

    Both formats give the same column types (`vhd.store.columns.arrow_schema`): timestamps as
    timestamps, and columns that are null in every row or lists that are always empty keep their
    types, which inferring readers (``pandas.read_json``) cannot know. ``.to_pandas()`` gives a
    DataFrame.

    A Parquet file is checked against the schema from its footer before any row is read: a
    missing column or one of another type (nested, or a number where text belongs) is refused at
    once, whatever the number of rows. A JSON Lines file is read in blocks of `JSONL_BLOCK_BYTES`
    (1 MiB), so a line longer than that is refused after reading one block, never held whole.

    Raises:
        ConfigError: Not a ``.jsonl`` or ``.parquet`` file, or the file does not match the schema.
        MissingDependencyError: pyarrow is not installed.
    """
    try:
        import pyarrow as pa
        import pyarrow.json as pj
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError("pyarrow", "parquet") from exc
    p = Path(path)
    schema = arrow_schema()
    try:
        if p.suffix == ".parquet":
            found = pq.read_schema(p)
            for want in schema:
                index = found.get_field_index(want.name)
                if index < 0:
                    raise pa.ArrowInvalid(f"no column {want.name!r}")
                if found.field(index).type != want.type:
                    raise pa.ArrowInvalid(f"column {want.name!r} is {found.field(index).type}, not {want.type}")
            return pq.read_table(p, schema=schema)
        if p.suffix == ".jsonl":
            if p.stat().st_size == 0:
                return schema.empty_table()
            options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
            blocks = pj.ReadOptions(block_size=JSONL_BLOCK_BYTES)
            return pj.read_json(p, read_options=blocks, parse_options=options).select(schema.names)
    except (pa.ArrowException, OSError) as exc:  # ArrowException: ArrowInvalid, ArrowNotImplementedError...
        first = printable((str(exc).strip().splitlines() or [type(exc).__name__])[0])[:300]
        if "straddl" in first:  # pyarrow's words for a JSON line longer than its block
            first = f"a line is longer than {JSONL_BLOCK_BYTES // 2**20} MiB"
        raise ConfigError(f"{p} is not a vhd export of this version ({first}): export it again") from None
    raise ConfigError(f"{p}: read_table reads .jsonl and .parquet exports; name the file with one of them")
