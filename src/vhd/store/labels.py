"""Read human labels: the shared labels CSV, and the VHD11K release's annotation files.

Three layouts are accepted, told apart by their columns (or keys):

- the labels CSV of the design notes: ``path`` or ``id``, ``harmful`` (yes/no, 1/0,
  true/false), optional ``categories`` (``;``-separated names or codes A-J), ``reason``,
  ``source``, ``kind``, ``keyword``, ``split``; other columns are kept as metadata;
- the VHD11K CSV: ``imagePath`` or ``videoPath``, ``decision`` (yes/no), ``harmfulType``
  (becomes the reason), the debaters' arguments (kept as metadata), optional ``categories``;
- the VHD11K JSON: a list of objects with the same fields as either CSV, or an object keyed
  by path whose values hold the other fields.

Relative paths are taken relative to the file's folder (or ``root``). A bad row does not stop
the reading: it is reported in `LabelSet.errors` with its row number.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError
from vhd.records import Kind, LabelRow, Source, parse_yes_no
from vhd.taxonomy.taxonomy import Taxonomy, default_taxonomy

CATEGORIES: tuple[tuple[str, str], ...] = tuple((c.code, c.name) for c in default_taxonomy())
"""The paper's ten harm categories with their letter codes (appendix H), from `vhd.taxonomy`."""

_SHA256 = re.compile(r"[0-9a-f]{64}")
_LABEL_FIELDS = ("path", "id", "harmful", "categories", "reason", "source", "kind", "keyword")
_KNOWN = {*_LABEL_FIELDS, "split"}
_VHD11K_PATHS = {"imagepath": Kind.IMAGE, "videopath": Kind.VIDEO}


@dataclass(frozen=True)
class LabelError:
    """A row that could not be used.

    Attributes:
        line: Its row number (as in `LabelRow.line`).
        message: What is wrong, one line.
    """

    line: int
    message: str

    def __str__(self) -> str:
        return f"row {self.line}: {self.message}"


@dataclass
class LabelSet:
    """The rows read from one labels file.

    Attributes:
        source: The file read.
        format: ``labels-csv``, ``vhd11k-csv`` or ``vhd11k-json``.
        rows: The usable rows, in file order.
        errors: The rows left out and why.
    """

    source: Path
    format: str
    rows: list[LabelRow] = field(default_factory=list)
    errors: list[LabelError] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[LabelRow]:
        return iter(self.rows)

    def by_path(self) -> dict[Path, LabelRow]:
        """Rows that have a path, keyed by it."""
        return {r.path: r for r in self.rows if r.path is not None}

    def by_id(self) -> dict[str, LabelRow]:
        """Rows that have an id, keyed by it."""
        return {r.id: r for r in self.rows if r.id is not None}


def normalize_category(value: str, taxonomy: Taxonomy | None = None) -> str:
    """Map a code (``A``), a coded name (``A. Violence and Threats``) or a name to its name.

    Names outside the taxonomy (default: VHD11K's ten categories) are returned stripped.

    Raises:
        ValueError: A single letter that is not one of the taxonomy's codes.
    """
    return (taxonomy or default_taxonomy()).normalize(value)


def read_labels(
    path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None, taxonomy: Taxonomy | None = None
) -> LabelSet:
    """Read a labels CSV, or a VHD11K annotation file (CSV or JSON).

    Args:
        path: The file.
        root: Folder that relative paths in the file are relative to (default: the file's
            folder). Useful for the VHD11K files, which name media without a folder.
        taxonomy: The taxonomy whose codes and names the categories column uses (default VHD11K's).

    Returns:
        The usable rows and the rows left out, each with its row number.

    Raises:
        ConfigError: The file cannot be read, or lacks the required columns.
    """
    src = Path(path)
    base = Path(root) if root is not None else src.parent
    base = Path(os.path.abspath(base))
    text = _read_text(src)
    if src.suffix.lower() == ".json" or text.lstrip()[:1] in ("[", "{"):
        entries, fmt = _json_entries(src, text), "vhd11k-json"
    else:
        entries, fmt = _csv_entries(src, text)
    result = LabelSet(source=src, format=fmt)
    columns = {str(k).strip().lower() for _, e in entries for k in e}
    if entries and not columns & {"harmful", "decision"}:
        raise ConfigError(_columns_message(src))
    seen_paths: dict[Path, int] = {}
    seen_ids: dict[str, int] = {}
    for line, entry in entries:
        try:
            row = _row(entry, base, line, taxonomy)
        except ValueError as exc:
            result.errors.append(LabelError(line, str(exc)))
            continue
        dup = (row.path is not None and seen_paths.get(row.path)) or (row.id is not None and seen_ids.get(row.id))
        if dup:
            what = "path" if row.path is not None and row.path in seen_paths else "id"
            result.errors.append(LabelError(line, f"duplicate {what}, first given in row {dup}"))
            continue
        if row.path is not None:
            seen_paths[row.path] = line
        if row.id is not None:
            seen_ids[row.id] = line
        result.rows.append(row)
    return result


def _columns_message(src: Path) -> str:
    return (
        f"{src} has no 'harmful' column: a labels CSV needs 'harmful' and 'path' or 'id' "
        "columns (a VHD11K file needs 'imagePath' or 'videoPath' and 'decision')"
    )


def _read_text(src: Path) -> str:
    try:
        data = src.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read labels file {src}: {exc.strerror or exc}; check the path") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")  # some released VHD11K files are not UTF-8


def _csv_entries(src: Path, text: str) -> tuple[list[tuple[int, dict[str, Any]]], str]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader, [])]
        records = list(reader)
    except csv.Error as exc:
        raise ConfigError(f"cannot parse {src} as CSV ({exc}): check the file") from exc
    lower = {h.lower() for h in header}
    if lower & _VHD11K_PATHS.keys():
        if "decision" not in lower:
            raise ConfigError(f"{src} has {', '.join(header[:1])} but no 'decision' column: add it")
        fmt = "vhd11k-csv"
    elif "harmful" not in lower:
        raise ConfigError(_columns_message(src))
    elif not lower & {"path", "id"}:
        raise ConfigError(f"{src} has no 'path' or 'id' column: add one naming each sample")
    else:
        fmt = "labels-csv"
    entries = []
    for number, values in enumerate(records, start=2):
        if not any(v.strip() for v in values):
            continue
        entries.append((number, dict(zip(header, values, strict=False))))
    return entries, fmt


def _json_entries(src: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"cannot parse {src} as JSON (line {exc.lineno}: {exc.msg}): check the file") from exc
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
        data = next(iter(data.values()))  # {"annotations": [...]}
    items: list[Any]
    if isinstance(data, list):
        items = data
    elif isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()):
        items = []
        for key, value in data.items():
            has_path = {k.lower() for k in value} & {"path", "id", *_VHD11K_PATHS}
            items.append(value if has_path else {"path": key, **value})
    else:
        raise ConfigError(f"{src}: expected a JSON list of objects or an object keyed by path: check the file")
    entries = []
    for number, item in enumerate(items, start=1):
        entries.append((number, item if isinstance(item, dict) else {"__invalid__": item}))
    return entries


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _row(entry: Mapping[str, Any], base: Path, line: int, taxonomy: Taxonomy | None = None) -> LabelRow:
    if "__invalid__" in entry:
        raise ValueError("entry is not an object")
    fields: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    kind_from_column: Kind | None = None
    for key, value in entry.items():
        name = str(key).strip()
        low = name.lower()
        if low in _VHD11K_PATHS:
            if _text(value) is not None:
                fields["path"], kind_from_column = value, _VHD11K_PATHS[low]
        elif low == "decision":
            fields["harmful"] = value
        elif low == "harmfultype":
            fields["reason"] = value
        elif low in _KNOWN:
            fields[low] = value
        else:
            meta[name] = value
    harmful = parse_yes_no(fields.get("harmful"))
    if harmful is None:
        raise ValueError("missing harmful label")
    raw_path, raw_id = _text(fields.get("path")), _text(fields.get("id"))
    if raw_path is None and raw_id is None:
        raise ValueError("no path or id")
    sample_id = None
    if raw_id is not None:
        sample_id = raw_id.lower()
        if not _SHA256.fullmatch(sample_id):
            raise ValueError(f"id {raw_id!r} is not a sha256 (64 hex characters)")
    path = None if raw_path is None else (base / Path(os.path.expanduser(raw_path))).resolve()
    kind = kind_from_column
    if kind is None and _text(fields.get("kind")) is not None:
        try:
            kind = Kind(str(fields["kind"]).strip().lower())
        except ValueError:
            raise ValueError(f"kind {fields['kind']!r} is not image or video") from None
    source = Source.parse(_text(fields.get("source")))
    return LabelRow(
        path=path,
        id=sample_id,
        harmful=harmful,
        categories=_categories(fields.get("categories"), taxonomy),
        reason=_text(fields.get("reason")),
        source=source,
        kind=kind,
        keyword=_text(fields.get("keyword")),
        split=_text(fields.get("split")),
        meta=meta,
        line=line,
    )


def _categories(value: Any, taxonomy: Taxonomy | None = None) -> list[str]:
    if value is None:
        return []
    parts = value if isinstance(value, list) else str(value).split(";")
    out: list[str] = []
    for part in parts:
        if str(part).strip():
            name = normalize_category(str(part), taxonomy)
            if name not in out:
                out.append(name)
    return out
