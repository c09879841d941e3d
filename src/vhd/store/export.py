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

        Rows are spooled (one JSON line each) to a temporary file per kind in the target folder
        until the largest number of debate rounds, which sets the header, is known.
        """
        out.parent.mkdir(parents=True, exist_ok=True)
        spools: dict[Kind, IO[str]] = {}
        rounds: dict[Kind, int] = {}
        try:
            for sample, ann in rows:
                k = Kind(sample.kind)
                if k not in spools:
                    spools[k] = tempfile.TemporaryFile("w+", encoding="utf-8", dir=out.parent)  # noqa: SIM115 (closed below)
                    rounds[k] = 1  # at least one argument pair, as in the authors' files
                n = _rounds(ann)
                rounds[k] = max(rounds[k], n)
                cells = {
                    "path": sample.path,
                    "decision": vhd11k_decision(ann),
                    "reason": ann.verdict.reason,
                    "aff": [_argument(ann, Role.AFFIRMATIVE, r + 1) for r in range(n)],
                    "neg": [_argument(ann, Role.NEGATIVE, r + 1) for r in range(n)],
                    "categories": ";".join(ann.verdict.categories),
                }
                spools[k].write(json.dumps(cells, ensure_ascii=False) + "\n")
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


def _rounds(ann: Annotation) -> int:
    return max((t.round for t in ann.turns), default=0)


def _argument(ann: Annotation, role: Role, round_no: int) -> str:
    for t in ann.turns:
        if t.role is role and t.round == round_no and t.text.strip():
            return t.text
    return "None"


def _write_vhd11k_csv(path: Path, spool: IO[str] | None, kind: Kind, rounds: int) -> None:
    """Write the CSV from a spool of JSON lines, padding every row to ``rounds`` argument pairs."""

    def write(f: IO[str]) -> None:
        writer = csv.writer(f)
        writer.writerow(vhd11k_columns(kind, rounds))
        if spool is None:
            return
        spool.seek(0)
        for line in spool:
            c = json.loads(line)
            pad = ["None"] * (rounds - len(c["aff"]))
            cells = [c["path"], c["decision"], c["reason"], *c["aff"], *pad, *c["neg"], *pad, c["categories"]]
            writer.writerow([escape_cell(x) for x in cells])  # model text never runs as a formula

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

    def write(f: IO[bytes]) -> None:
        with pq.ParquetWriter(f, schema) as writer:
            batch: list[dict[str, Any]] = []
            for sample, ann in rows:
                batch.append(record(sample, ann))
                if len(batch) >= ROW_GROUP:
                    writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                    batch = []
            if batch:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))

    atomic_write(path, write, binary=True)
