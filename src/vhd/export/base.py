"""The export framework: `ExportFormat`, the `EXPORT_FORMATS` registry, and `export`, streamed.

Exports stream: the store is read a page at a time (`vhd.store.reads.AnnotationReads.iter_annotations`,
keyset pagination), JSON Lines are written row by row, Parquet in row groups of `ROW_GROUP` rows
through pyarrow's ``ParquetWriter``, and the VHD11K CSV spools its rows to a temporary file until
the number of debate rounds (its header) is known. Memory holds a page and a row group, whatever
the size of the store.

The JSON Lines and Parquet records are built from one typed, flat column list,
`vhd.export.schema.RECORD_COLUMNS`: **add a column there** (`add_column`) and both formats (and
the Hugging Face export) get it with the same value and type. ``meta`` is a JSON string in both,
and ``started_at`` / ``finished_at`` are UTC timestamps: a Parquet ``timestamp[us, UTC]``, and in
JSON Lines the same instant as ISO-8601 text ending in ``+00:00``. `read_table` reads either back
under the one schema (`vhd.export.schema.arrow_schema`), so columns that are null in every row and
empty lists keep their types; `vhd.export.schema.json_schema` describes a JSON Lines record.

Every file is written to a temporary file in the target folder and moved into place, so an
interrupted export never leaves a half-written file under the final name. Formats are
`ExportFormat` classes registered by name in `EXPORT_FORMATS`; third-party packages add formats
through the ``vhd.export_formats`` entry-point group.

Two paths, one output. `export` reads the store as raw pages (`vhd.store.reads.AnnotationPage`)
and hands them to `ExportFormat.write_pages`. A plugin format implements only `ExportFormat.write`
and gets ``(Sample, Annotation)`` records, built from each page. The built-in formats override
`write_pages` to go from the stored cells straight to CSV cells, JSON and Arrow arrays (JSON Lines
and Parquet through `vhd.export.schema.page_cells`), several times cheaper on a large store, and
keep `write` for callers with records; both paths write the same bytes (tested). Each format's
two paths stay side by side in its own module (`vhd.export.vhd11k`, `vhd.export.jsonl`,
`vhd.export.parquet`). A format that needs more than rows (``hf``: media and splits) overrides
`ExportFormat.export` instead and reads the store itself.

Example:
    >>> result = export("run.db", "vhd11k-csv", "out/annotations.csv")  # doctest: +SKIP
"""

from __future__ import annotations

import abc
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from vhd.errors import ConfigError
from vhd.records import Annotation, Kind, Sample, Status
from vhd.registry import Registry
from vhd.store.reads import (
    ROW_HARMFUL,
    ROW_KIND,
    ROW_PATH,
    ROW_SAMPLE_ID,
    ROW_STATUS,
    AnnotationPage,
)
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

    def export(self, db: Store, out: Path, request: ExportRequest) -> ExportResult:
        """Write what ``request`` selects from the store: what `export` calls.

        By default the selected rows go, a page at a time, to `write_pages` (`paged_export`). A
        format that needs more than rows (the media and splits of the ``hf`` dataset) overrides this.
        """
        return paged_export(self, db, out, request)


EXPORT_FORMATS: Registry[type[ExportFormat]] = Registry("export format", "vhd.export_formats", base=ExportFormat)
"""Every export format: built-ins below, plugins from the ``vhd.export_formats`` entry-point group."""

EXPORT_FORMATS.add("vhd11k-csv", "vhd.export.vhd11k:Vhd11kCsvFormat", summary="the VHD11K release CSV")
EXPORT_FORMATS.add("csv", "vhd.export.vhd11k:Vhd11kCsvFormat", summary="the VHD11K release CSV (same as vhd11k-csv)")
EXPORT_FORMATS.add("jsonl", "vhd.export.jsonl:JsonlFormat", summary="JSON Lines, one annotation a line")
EXPORT_FORMATS.add(
    "hf", "vhd.export.hf:HfFormat", extra="hf", needs=["datasets"], summary="a Hugging Face dataset folder"
)
EXPORT_FORMATS.add(
    "parquet", "vhd.export.parquet:ParquetFormat", extra="parquet", needs=["pyarrow"], summary="Apache Parquet"
)
EXPORT_FORMATS.add(
    "fiftyone",
    "vhd.export.fiftyone:FiftyOneFormat",
    summary="a FiftyOne dataset folder (FiftyOneDataset: samples.json, data/), written without FiftyOne",
)

FORMATS = EXPORT_FORMATS
"""Export formats `export` accepts (the registry is also the collection of their names)."""

LEFT_OUT_KEPT = 1000
"""Annotations left out that `ExportResult.left_out` lists (all are counted)."""

ROW_GROUP = 2048
"""Rows per Parquet row group (and per batch held in memory)."""

_FILTER_CELLS = frozenset({ROW_SAMPLE_ID, ROW_KIND, ROW_STATUS, ROW_HARMFUL, ROW_PATH})
"""The cells `export` reads itself (kind, decision, path), whatever the format reads."""


@dataclass
class ExportResult:
    """What an export wrote.

    Attributes:
        files: The files written.
        written: Rows (annotations) written.
        left_out: ``(sample id, why)`` for the first `LEFT_OUT_KEPT` annotations not written.
        left_out_total: How many annotations were left out, by reason.
        root: The folder sample paths are written relative to (None: written as stored).
        notes: Further lines the format has for the user (the ``hf`` dataset card, the hub push).
        details: Figures of the format's own (``hf``: rows per split and kind, harmful, categories,
            models, the hub repository), added to ``vhd export --json``.
    """

    files: list[Path] = field(default_factory=list)
    written: int = 0
    left_out: list[tuple[str, str]] = field(default_factory=list)
    left_out_total: Counter[str] = field(default_factory=Counter)
    root: Path | None = None
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def left_out_counts(self) -> dict[str, int]:
        """How many annotations were left out for each reason (all of them, not only those listed)."""
        return dict(self.left_out_total)

    def leave_out(self, sample_id: str, why: str) -> None:
        """Count an annotation left out; the first `LEFT_OUT_KEPT` are listed with their sample."""
        self.left_out_total[why] += 1
        if len(self.left_out) < LEFT_OUT_KEPT:
            self.left_out.append((sample_id, why))


@dataclass(frozen=True)
class ExportRequest:
    """What a caller of `export` asked for, handed to `ExportFormat.export`.

    Attributes:
        config_hash: Only annotations under this configuration (None: each sample's latest).
        include_unparsed: Also annotations without a decision (formats that can hold them).
        kind: Only images or only videos.
        run_id: Only annotations written by this run.
        relative_to: Write sample paths relative to this folder.
        absolute_paths: Write sample paths as stored.
        push_to_hub: A hub repository to push to, for formats that can (``hf``).
        public: Make a pushed repository public.
    """

    config_hash: str | None = None
    include_unparsed: bool = False
    kind: Kind | None = None
    run_id: str | None = None
    relative_to: str | os.PathLike[str] | None = None
    absolute_paths: bool = False
    push_to_hub: str | None = None
    public: bool = False


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
    push_to_hub: str | None = None,
    public: bool = False,
) -> ExportResult:
    """Export annotations from a store.

    Args:
        store: The store to read: an open `Store` or its path.
        fmt: ``vhd11k-csv`` (or ``csv``), ``jsonl``, ``parquet``, ``hf`` or a plugin's format
            (`EXPORT_FORMATS`).
        out: Output file (a folder for ``hf``). For ``vhd11k-csv`` with both images and videos
            (and no ``kind``), two files are written beside it: ``<stem>_images.csv`` and
            ``<stem>_videos.csv``.
        config_hash: Only annotations under this configuration (default: each sample's latest).
        include_unparsed: Also write unparsed and error annotations (not the VHD11K CSV, which
            needs a yes/no decision and always leaves them out).
        kind: Only images or only videos.
        run_id: Only annotations written by this run.
        relative_to: Write sample paths relative to this folder.
        absolute_paths: Write sample paths as stored (absolute local paths), not relative to
            a folder. By default paths are written relative to `ExportResult.root`: the deepest
            folder holding every exported sample (`vhd.store.Store.annotated_path_root`), so
            a shared file names no local folder or user.
        push_to_hub: ``hf`` only: also push the dataset to this hub repository.
        public: ``hf`` only: make the pushed repository public (private by default).

    Returns:
        The files written, the number of rows, and every annotation left out with the reason.

    Raises:
        ConfigError: Unknown format or kind, both ``relative_to`` and ``absolute_paths``, a hub
            push with a format that cannot push, or no store at the path.
        MissingDependencyError: The format's extra is not installed (before anything is read).
    """
    writer = EXPORT_FORMATS.load(fmt)()
    try:
        want_kind = None if kind is None else Kind(kind)
    except ValueError:
        raise ConfigError(f"unknown kind {kind!r}: choose image or video") from None
    request = ExportRequest(
        config_hash=config_hash,
        include_unparsed=include_unparsed,
        kind=want_kind,
        run_id=run_id,
        relative_to=relative_to,
        absolute_paths=absolute_paths,
        push_to_hub=push_to_hub,
        public=public,
    )
    with using_store(store) as db:
        return writer.export(db, Path(out), request)


def paged_export(writer: ExportFormat, db: Store, out_path: Path, request: ExportRequest) -> ExportResult:
    """`ExportFormat.export` of a row format: the selected rows, a page at a time, to `ExportFormat.write_pages`."""
    if request.push_to_hub:
        raise ConfigError("--push-to-hub goes with --format hf (a dataset folder)")
    want_kind, config_hash, run_id = request.kind, request.config_hash, request.run_id
    base = path_root(
        db, request.relative_to, request.absolute_paths, config_hash=config_hash, run_id=run_id, kind=want_kind
    )
    result = ExportResult(root=None if base is None else Path(base))

    keep_undecided = request.include_unparsed and not writer.decided_only
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
                if not keep_undecided and stored_decision(r[ROW_STATUS], r[ROW_HARMFUL]) is None:
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


def stored_decision(status: str, harmful: int | None) -> str | None:
    """`vhd11k_decision` of a raw row's stored status and harmful flag."""
    if status == "refused":
        return "yes"
    if status == "ok":
        return None if harmful is None else "yes" if harmful else "no"
    Status(status)  # unparsed, error or no status at all (ValueError, as building the record raises)
    return None
