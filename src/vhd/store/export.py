"""Export a store's annotations: the VHD11K release CSV, JSON Lines, or Parquet.

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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

from vhd.errors import ConfigError, MissingDependencyError
from vhd.fileio import atomic_write, escape_cell
from vhd.records import Annotation, Kind, Role, Sample, Status
from vhd.registry import Registry
from vhd.store.sqlite import Store


class ExportFormat(abc.ABC):
    """A file format `export` writes, registered by name in `EXPORT_FORMATS`.

    Attributes:
        decided_only: Write only annotations with a yes/no decision, whatever
            ``include_unparsed`` says (the VHD11K CSV needs one).
    """

    decided_only: ClassVar[bool] = False

    @abc.abstractmethod
    def write(self, out: Path, rows: list[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write the rows (atomically) to ``out``, or to files beside it, and return the files written.

        Args:
            out: The output file the user named.
            rows: ``(sample, annotation)`` pairs, sample paths already as they should be written.
            kind: The kind the user asked for, if any.
        """


EXPORT_FORMATS: Registry[type[ExportFormat]] = Registry("export format", "vhd.export_formats", base=ExportFormat)
"""Every export format: built-ins below, plugins from the ``vhd.export_formats`` entry-point group."""

EXPORT_FORMATS.add("vhd11k-csv", "vhd.store.export:Vhd11kCsvFormat", summary="the VHD11K release CSV")
EXPORT_FORMATS.add("jsonl", "vhd.store.export:JsonlFormat", summary="JSON Lines, one annotation a line")
EXPORT_FORMATS.add(
    "parquet", "vhd.store.export:ParquetFormat", extra="parquet", needs=["pyarrow"], summary="Apache Parquet"
)

FORMATS = EXPORT_FORMATS
"""Export formats `export` accepts (the registry is also the collection of their names)."""

_PATH_COLUMN = {Kind.IMAGE: "imagePath", Kind.VIDEO: "videoPath"}
_UNDECIDED = (Status.UNPARSED, Status.ERROR)


@dataclass
class ExportResult:
    """What an export wrote.

    Attributes:
        files: The files written.
        written: Rows (annotations) written.
        left_out: ``(sample id, why)`` for every annotation not written.
    """

    files: list[Path] = field(default_factory=list)
    written: int = 0
    left_out: list[tuple[str, str]] = field(default_factory=list)

    @property
    def left_out_counts(self) -> dict[str, int]:
        """How many annotations were left out for each reason."""
        return dict(Counter(why for _, why in self.left_out))


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
    rows: list[tuple[Sample, Annotation]] = []
    for sample, ann in store.iter_annotations(config_hash=config_hash, run_id=run_id):
        if want_kind is not None and sample.kind is not want_kind:
            continue
        if vhd11k_decision(ann) is None and (writer.decided_only or not include_unparsed):
            status = Status(ann.verdict.status).value
            why = f"status {status}" if status != Status.OK.value else "no decision"
            result.left_out.append((sample.id, why))
            continue
        if base is not None:
            sample.path = os.path.relpath(sample.path, base)
        rows.append((sample, ann))

    result.files.extend(writer.write(out_path, rows, want_kind))
    result.written = len(rows)
    return result


class Vhd11kCsvFormat(ExportFormat):
    """``vhd11k-csv``: the VHD11K release CSV; images and videos (when both) go to two files beside ``out``."""

    decided_only = True

    def write(self, out: Path, rows: list[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write one CSV, or ``<stem>_images.csv`` and ``<stem>_videos.csv``."""
        kinds = sorted({s.kind for s, _ in rows}, key=lambda k: k.value)
        if len(kinds) > 1:
            files = []
            for k in kinds:
                target = out.with_name(f"{out.stem}_{k.value}s{out.suffix}")
                _write_vhd11k_csv(target, [(s, a) for s, a in rows if s.kind is k], k)
                files.append(target)
            return files
        only = kinds[0] if kinds else (kind or Kind.IMAGE)
        _write_vhd11k_csv(out, rows, only)
        return [out]


class JsonlFormat(ExportFormat):
    """``jsonl``: one `record` a line."""

    def write(self, out: Path, rows: list[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write the JSON Lines file."""
        atomic_write(out, lambda f: _write_jsonl(f, rows))
        return [out]


class ParquetFormat(ExportFormat):
    """``parquet``: the `record` of each annotation under `parquet_schema` (needs pyarrow)."""

    def write(self, out: Path, rows: list[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write the Parquet file."""
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


def _write_vhd11k_csv(path: Path, rows: list[tuple[Sample, Annotation]], kind: Kind) -> None:
    # At least one argument pair, as in the authors' files, even if no debater ever spoke.
    rounds = max([1, *(_rounds(a) for _, a in rows)])
    columns = vhd11k_columns(kind, rounds)

    def write(f: IO[str]) -> None:
        writer = csv.writer(f)
        writer.writerow(columns)
        for sample, ann in rows:
            cells = [
                sample.path,
                vhd11k_decision(ann),
                ann.verdict.reason,
                *(_argument(ann, Role.AFFIRMATIVE, r + 1) for r in range(rounds)),
                *(_argument(ann, Role.NEGATIVE, r + 1) for r in range(rounds)),
                ";".join(ann.verdict.categories),
            ]
            writer.writerow([escape_cell(c) for c in cells])  # model text never runs as a formula

    atomic_write(path, write)


def record(sample: Sample, ann: Annotation) -> dict[str, Any]:
    """Return the JSON Lines / Parquet record of one annotation.

    Keys: ``sample`` (the full sample record), ``source``, ``generator``, ``prompt`` and ``seed``
    (a synthetic sample's provenance; None for real ones), ``verdict`` (harmful, reason, categories,
    score, status, refused), ``usage``, ``config_hash``, ``run_id``, ``error``,
    ``started_at``, ``finished_at``, ``decided_by`` (the cascade stage that decided, ``debate``,
    or null outside a cascade) and ``turns`` (every turn in order).
    """
    v = ann.verdict
    return {
        "sample": sample.to_dict(),
        **synthetic_keys(sample),
        "verdict": {
            "harmful": v.harmful,
            "reason": v.reason,
            "categories": list(v.categories),
            "score": v.score,
            "status": Status(v.status).value,
            "refused": v.refused,
        },
        "usage": {
            "calls": ann.usage.calls,
            "prompt_tokens": ann.usage.prompt_tokens,
            "completion_tokens": ann.usage.completion_tokens,
            "cost": ann.usage.cost,
        },
        "config_hash": ann.config_hash,
        "run_id": ann.run_id,
        "error": ann.error,
        "started_at": ann.started_at,
        "finished_at": ann.finished_at,
        "decided_by": ann.decided_by,
        "turns": [t.to_dict() for t in ann.turns],
    }


def synthetic_keys(sample: Sample) -> dict[str, Any]:
    """``source``, ``generator``, ``prompt`` and ``seed`` of a sample for the export (None where unknown)."""
    seed = sample.meta.get("seed")
    return {
        "source": None if sample.source is None else sample.source.value,
        "generator": sample.generator,
        "prompt": sample.meta.get("prompt"),
        "seed": seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
    }


def _write_jsonl(f: IO[str], rows: list[tuple[Sample, Annotation]]) -> None:
    for sample, ann in rows:
        f.write(json.dumps(record(sample, ann), ensure_ascii=False, default=str))
        f.write("\n")


def parquet_schema() -> Any:
    """Return the pyarrow schema of the Parquet export (``sample.meta`` is a JSON string)."""
    import pyarrow as pa

    sample = pa.struct(
        [
            ("id", pa.string()),
            ("kind", pa.string()),
            ("path", pa.string()),
            ("source", pa.string()),
            ("keyword", pa.string()),
            ("generator", pa.string()),
            ("split", pa.string()),
            ("label", pa.bool_()),
            ("frames", pa.list_(pa.int64())),
            ("meta", pa.string()),
        ]
    )
    verdict = pa.struct(
        [
            ("harmful", pa.bool_()),
            ("reason", pa.string()),
            ("categories", pa.list_(pa.string())),
            ("score", pa.float64()),
            ("status", pa.string()),
            ("refused", pa.bool_()),
        ]
    )
    usage = pa.struct(
        [
            ("calls", pa.int64()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("cost", pa.float64()),
        ]
    )
    turn = pa.struct(
        [
            ("role", pa.string()),
            ("round", pa.int64()),
            ("text", pa.string()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("latency_s", pa.float64()),
            ("refused", pa.bool_()),
            ("model", pa.string()),
        ]
    )
    return pa.schema(
        [
            ("sample", sample),
            ("source", pa.string()),
            ("generator", pa.string()),
            ("prompt", pa.string()),
            ("seed", pa.int64()),
            ("verdict", verdict),
            ("usage", usage),
            ("config_hash", pa.string()),
            ("run_id", pa.string()),
            ("error", pa.string()),
            ("started_at", pa.float64()),
            ("finished_at", pa.float64()),
            ("decided_by", pa.string()),
            ("turns", pa.list_(turn)),
        ]
    )


def _write_parquet(path: Path, rows: list[tuple[Sample, Annotation]]) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError("pyarrow", "parquet") from exc
    records = []
    for sample, ann in rows:
        rec = record(sample, ann)
        rec["sample"]["meta"] = json.dumps(rec["sample"]["meta"], ensure_ascii=False, default=str)
        records.append(rec)
    table = pa.Table.from_pylist(records, schema=parquet_schema())
    atomic_write(path, lambda f: pq.write_table(table, f), binary=True)
