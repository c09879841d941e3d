"""Read manifests: CSV, JSON Lines or JSON files that name media files and their metadata.

A JSON manifest is a list of objects, or (as in the VHD11K release) an object keyed by path
whose values hold the other fields.

Columns (case-insensitive): the file in ``path`` (or ``imagePath`` / ``videoPath`` as in the
VHD11K release), absolute or relative to the manifest's folder; optional ``id``, ``harmful``
(or ``label``, or VHD11K's ``decision``: yes/no, 1/0, true/false), ``source``
(real|synthetic), ``keyword``, ``generator``, ``split`` and ``kind`` (image|video). Other
columns are kept verbatim in `ManifestRow.meta`. CSV cells are read back through
`vhd.fileio.unescape_cell`, so what vhd's CSV writers escaped comes back as written.

A path (absolute, ``~`` or with ``../``) must lead, symbolic links resolved, under the manifest's
folder: a manifest from elsewhere cannot make vhd read, or send to a model, files the user never
named. ``allow_outside_paths`` lifts the rule (``--allow-outside-paths``), and rows naming a
sample the store already holds (``known``, by id or path) are accepted wherever they lead, so
the files vhd writes (``vhd split --out``, ``vhd export``) read back as manifests.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vhd.boundary import ItemFailure, guarded
from vhd.errors import ConfigError
from vhd.fileio import CsvTable, load_json, path_within, read_csv, unescape_cell
from vhd.records import Kind, ManifestRow, Source, parse_yes_no

KnownSample = Callable[[str | None, Path], bool]
"""``known(id, path)``: whether a store already holds the sample a manifest row names."""

PATH_COLUMNS = ("path", "imagepath", "videopath", "image_path", "video_path")
"""Column names that hold the media path, in order of preference (compared lower-case)."""

LABEL_COLUMNS = ("harmful", "label", "decision")
"""Column names that hold a yes/no label, in order of preference (compared lower-case)."""

_KNOWN = frozenset({*PATH_COLUMNS, *LABEL_COLUMNS, "id", "source", "keyword", "generator", "split", "kind"})


@dataclass(frozen=True)
class RowProblem:
    """A manifest entry that cannot be used.

    Attributes:
        where: Where it is, e.g. ``line 4``.
        reason: What is wrong with it.
    """

    where: str
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else str(value)
    return text or None


def parse_row(where: str, record: Mapping[str | None, Any]) -> ManifestRow | RowProblem:
    """Validate one record (column name to value) from a manifest."""
    if None in record:
        return RowProblem(where, "more fields than the header has columns")
    columns = {str(k).strip().lower(): v for k, v in record.items()}
    path = next((_text(columns.get(c)) for c in PATH_COLUMNS if _text(columns.get(c))), None)
    if path is None:
        return RowProblem(where, "no path (columns path, imagePath or videoPath)")
    if "\x00" in path:
        return RowProblem(where, "path holds a NUL byte, which no file name can; fix the row")
    try:
        label = next((parse_yes_no(columns[c]) for c in LABEL_COLUMNS if _text(columns.get(c))), None)
    except ValueError as exc:
        return RowProblem(where, str(exc))
    try:
        source = Source.parse(_text(columns.get("source")))
    except ValueError as exc:
        return RowProblem(where, str(exc))
    kind_text = _text(columns.get("kind"))
    kind: Kind | None = None
    if kind_text is not None:
        try:
            kind = Kind(kind_text.lower())
        except ValueError:
            return RowProblem(where, f"kind must be image or video, got {kind_text!r}")
    meta = {
        key: value
        for key, value in ((str(k).strip(), v) for k, v in record.items())
        if key.lower() not in _KNOWN and value not in (None, "")
    }
    return ManifestRow(
        where=where,
        path=path,
        id=_text(columns.get("id")),
        harmful=label,
        source=source,
        keyword=_text(columns.get("keyword")),
        generator=_text(columns.get("generator")),
        split=_text(columns.get("split")),
        kind=kind,
        meta=meta,
    )


def _read_csv(path: Path) -> Iterator[ManifestRow | RowProblem]:
    with open(path, encoding="utf-8-sig", newline="") as fh:
        table = read_csv(fh.read())
    header = [h.lower() for h in table.header]
    if header and not any(c in header for c in PATH_COLUMNS):
        raise ConfigError(
            f"manifest {path.name} has no path column: add a column named path (or imagePath / videoPath)"
        )
    for line, message in table.problems:  # the header's problems come first
        if line == 1:
            yield RowProblem(f"line {line}", message)
    yield from _csv_rows(table)
    for line, message in table.problems:  # a quote never closed swallowed the end of the file
        if line > 1:
            yield RowProblem(f"line {line}", message)


def _csv_rows(table: CsvTable) -> Iterator[ManifestRow | RowProblem]:
    for line, record in table.rows:
        if not any(_text(v) for k, v in record.items() if k is not None):
            continue  # blank line
        cells = {k: unescape_cell(v) if isinstance(v, str) else v for k, v in record.items()}
        yield _guarded_row(f"line {line}", cells)


def _read_jsonl(path: Path) -> Iterator[ManifestRow | RowProblem]:
    with open(path, encoding="utf-8-sig") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"line {number}"
            try:
                record = load_json(line)
            except ValueError as exc:  # not JSON, or nested too deep to parse
                yield RowProblem(where, _json_problem(exc))
                continue
            if not isinstance(record, dict):
                yield RowProblem(where, "not a JSON object")
                continue
            yield _guarded_row(where, record)


def _json_problem(exc: ValueError) -> str:
    return f"not valid JSON ({exc.msg})" if isinstance(exc, json.JSONDecodeError) else str(exc)


def _guarded_row(where: str, record: Mapping[str | None, Any]) -> ManifestRow | RowProblem:
    """`parse_row` inside the item boundary: a surprise in one record is that record's problem."""
    row = guarded(parse_row, where, record)
    return RowProblem(where, row.reason) if isinstance(row, ItemFailure) else row


def _read_json(path: Path) -> Iterator[ManifestRow | RowProblem]:
    with open(path, encoding="utf-8-sig") as fh:
        text = fh.read()
    try:
        records = load_json(text)
    except ValueError as exc:
        raise ConfigError(f"manifest {path.name} is not usable: {_json_problem(exc)}") from None
    if isinstance(records, dict):
        # VHD11K style: an object keyed by path whose values hold the other fields.
        for number, (key, record) in enumerate(records.items(), start=1):
            where = f"entry {number}"
            if not isinstance(record, dict):
                yield RowProblem(where, "not a JSON object")
                continue
            has_path = any(str(k).strip().lower() in PATH_COLUMNS for k in record)
            yield _guarded_row(where, record if has_path else {"path": key, **record})
        return
    if not isinstance(records, list):
        raise ConfigError(f"manifest {path.name} must hold a JSON list or object of objects")
    for number, record in enumerate(records, start=1):
        where = f"entry {number}"
        if not isinstance(record, dict):
            yield RowProblem(where, "not a JSON object")
            continue
        yield _guarded_row(where, record)


def outside_problem(
    manifest: Path, row: ManifestRow, allow_outside_paths: bool = False, known: KnownSample | None = None
) -> RowProblem | None:
    """Why a row's path may not be used (it leads outside the manifest's folder), or None."""
    if allow_outside_paths:
        return None
    folder = Path(os.path.abspath(manifest.parent))
    path = Path(os.path.abspath(folder / row.path))
    if path_within(path, [folder]) or (known is not None and known(row.id, path)):
        return None
    return RowProblem(
        row.where,
        f"path {row.path} leads outside the manifest's folder {folder}: move the manifest beside the media, "
        "or accept it with --allow-outside-paths",
    )


def read_manifest(
    path: str | Path, *, allow_outside_paths: bool = False, known: KnownSample | None = None
) -> list[ManifestRow | RowProblem]:
    """Read every entry of a manifest.

    Args:
        path: A ``.csv``, ``.jsonl`` or ``.json`` file.
        allow_outside_paths: Accept paths that lead outside the manifest's folder.
        known: Rows naming a sample for which this says yes may lead anywhere.

    Returns:
        One `ManifestRow` or `RowProblem` per non-blank entry, in file order (a path leading
        outside the manifest's folder is a `RowProblem`).

    Raises:
        ConfigError: The manifest cannot be read, is not UTF-8, or a CSV has no path column.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    readers = {".csv": _read_csv, ".jsonl": _read_jsonl, ".json": _read_json}
    if suffix not in readers:
        raise ConfigError(f"unsupported manifest type {suffix}; use .csv, .jsonl or .json")
    try:
        rows = list(readers[suffix](path))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"manifest {path.name} is not UTF-8 text ({exc.reason})") from exc
    except csv.Error as exc:
        raise ConfigError(f"manifest {path.name} is not valid CSV ({exc})") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read manifest {path.name} ({exc.strerror})") from exc
    out: list[ManifestRow | RowProblem] = []
    for row in rows:
        if isinstance(row, RowProblem):
            out.append(row)
            continue
        problem = guarded(outside_problem, path, row, allow_outside_paths, known)
        out.append(RowProblem(row.where, problem.reason) if isinstance(problem, ItemFailure) else problem or row)
    return out
