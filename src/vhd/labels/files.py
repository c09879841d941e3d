"""Read human labels: the shared labels CSV, and the VHD11K release's annotation files.

Three layouts are accepted, told apart by their columns (or keys):

- the labels CSV of the design notes: ``path`` or ``id``, ``harmful`` (yes/no, 1/0,
  true/false), optional ``categories`` (``;``-separated names or codes A-J), ``reason``,
  ``source``, ``kind``, ``keyword``, ``split``; other columns are kept as metadata;
- the VHD11K CSV: ``imagePath`` or ``videoPath``, ``decision`` (yes/no) or, as in the paper
  authors' ``judge.csv``, ``response`` (the judge's answer, "Yes"/"No" first), ``harmfulType``
  (becomes the reason), the debaters' arguments (kept as metadata), optional ``categories``;
- the VHD11K JSON: a list of objects with the same fields as either CSV, or an object keyed
  by path whose values hold the other fields; JSON Lines (``.jsonl``): one such object a line.

Any layout may add ``segments``: a video's harmful spans in seconds (`vhd.labels.spans`, e.g.
``12.5-20; 31-40`` in a CSV cell, a list of ``{"start_s", "end_s"}`` objects in JSON). A row whose
spans are malformed (an end not after its start, a negative or non-finite time, spans that
overlap), or that gives spans on a row labelled not harmful, is left out with its row number.

An ``id`` may also be given as ``sample_id`` (the column of ``vhd review-queue --out``). Text
cells of a CSV are read back through `vhd.fileio.unescape_cell`, so what vhd's CSV writers
escaped comes back as it was written.

Where paths may lead and what rows naming one sample mean is `vhd.labels.rules`
(`LabelOptions`). A bad row does not stop the reading: it is reported in `LabelSet.errors` with
its row number; rows merged into another row of the same sample are listed in `LabelSet.notes`.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.boundary import item_boundary
from vhd.errors import ConfigError
from vhd.fileio import display_path, load_json, open_regular, read_csv, unescape_cell
from vhd.labels.rules import LabelOptions, PathResolver, settle_duplicates
from vhd.labels.spans import parse_spans
from vhd.records import Kind, LabelRow, Source, parse_yes_no
from vhd.taxonomy.taxonomy import Taxonomy, default_taxonomy

if TYPE_CHECKING:
    from vhd.store.sqlite import Store

CATEGORIES: tuple[tuple[str, str], ...] = tuple((c.code, c.name) for c in default_taxonomy())
"""The paper's ten harm categories with their letter codes (appendix H), from `vhd.taxonomy`."""

_SHA256 = re.compile(r"[0-9a-f]{64}")
_LABEL_FIELDS = ("path", "id", "harmful", "categories", "reason", "source", "kind", "keyword")
_KNOWN = {*_LABEL_FIELDS, "split", "segments"}
_VHD11K_PATHS = {"imagepath": Kind.IMAGE, "videopath": Kind.VIDEO}
_DECISIONS = ("harmful", "decision", "response")
"""Columns holding the label, in order of preference (``response``: the authors' judge.csv)."""


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
        format: ``labels-csv``, ``vhd11k-csv``, ``vhd11k-json`` or ``jsonl``.
        rows: The usable rows, in file order.
        errors: The rows left out and why.
        notes: Rows not used because another row of the same sample was kept (same answer, or a
            conflict settled by `LabelOptions.duplicates`), each naming the rows and answers.
    """

    source: Path
    format: str
    rows: list[LabelRow] = field(default_factory=list)
    errors: list[LabelError] = field(default_factory=list)
    notes: list[LabelError] = field(default_factory=list)

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
    path: str | os.PathLike[str],
    *,
    root: str | os.PathLike[str] | None = None,
    taxonomy: Taxonomy | None = None,
    options: LabelOptions | None = None,
    store: Store | None = None,
) -> LabelSet:
    """Read a labels CSV, a VHD11K annotation file (CSV or JSON), or a JSON Lines file of label objects.

    Args:
        path: The file.
        root: Folder that relative paths in the file are relative to (the older name of
            ``options.media``; default: the file's folder).
        taxonomy: The taxonomy whose codes and names the categories column uses (default VHD11K's).
        options: Path remaps, ``--media``, ``--allow-outside-paths`` and the duplicates policy
            (`LabelOptions`; default: paths must stay under the file's folder, conflicting
            duplicates are left out).
        store: Rows naming a sample this store holds (by id or path) may lead anywhere on disk.

    Returns:
        The usable rows and the rows left out, each with its row number.

    Raises:
        ConfigError: The file cannot be read (not a regular file, over `LABELS_MAX_BYTES`,
            Parquet), or lacks the required columns.
    """
    src = Path(path)
    opts = options or LabelOptions()
    paths = PathResolver(src, opts, None if root is None else Path(root), store)
    text = _read_text(src)
    if src.suffix.lower() == ".parquet" or text.startswith("PAR1"):
        raise ConfigError(
            f"{display_path(src)}: labels are read from a CSV, a JSON file (a list of objects, or an "
            "object keyed by path) or JSON Lines, not Parquet: convert it first (e.g. pandas' to_csv)"
        )
    problems: list[LabelError] = []
    if src.suffix.lower() == ".jsonl":
        entries, fmt, problems = _jsonl_entries(text)
    elif src.suffix.lower() == ".json" or text.lstrip()[:1] in ("[", "{"):
        entries, fmt = _json_entries(src, text), "vhd11k-json"
    else:
        entries, fmt, problems = _csv_entries(src, text)
    result = LabelSet(source=src, format=fmt, errors=problems)
    columns = {str(k).strip().lower() for _, e in entries for k in e}
    if entries and not columns & set(_DECISIONS):
        raise ConfigError(_columns_message(src))
    rows: list[LabelRow] = []
    for line, entry in entries:
        with item_boundary(entry) as b:
            try:
                rows.append(_row(entry, paths, line, taxonomy))
            except ValueError as exc:
                result.errors.append(LabelError(line, str(exc)))
        if b.failure is not None:
            result.errors.append(LabelError(line, b.failure.reason))
    keys = [(r.line, _keys(r), r.harmful) for r in rows]
    settled = settle_duplicates(keys, opts.duplicates, "path or id")
    result.rows = [rows[i] for i in settled.keep]
    result.errors += [LabelError(line, msg) for line, msg in settled.dropped]
    result.errors.sort(key=lambda e: e.line)
    result.notes = [LabelError(line, msg) for line, msg in settled.merged]
    return result


def _keys(row: LabelRow) -> list[str]:
    return [*([f"path:{row.path}"] if row.path is not None else []), *([f"id:{row.id}"] if row.id else [])]


def _columns_message(src: Path) -> str:
    return (
        f"{src} has no 'harmful' column: a labels CSV needs 'harmful' and 'path' or 'id' "
        "columns (a VHD11K file needs 'imagePath' or 'videoPath' and 'decision' or 'response')"
    )


LABELS_MAX_BYTES = 512 * 2**20
"""The largest labels file read (VHD11K's whole release is a few MiB): it is held in memory whole."""


def _read_text(src: Path) -> str:
    try:
        with open_regular(src) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > LABELS_MAX_BYTES:
                raise ConfigError(
                    f"labels file {display_path(src)} is {size / 2**20:,.0f} MiB, over the "
                    f"{LABELS_MAX_BYTES // 2**20} MiB a labels file may have: split it, or check that it is one"
                )
            data = fh.read(LABELS_MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read labels file {src}: {exc.strerror or exc}; check the path") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")  # some released VHD11K files are not UTF-8


def _csv_entries(src: Path, text: str) -> tuple[list[tuple[int, dict[str, Any]]], str, list[LabelError]]:
    try:
        table = read_csv(text)
    except csv.Error as exc:
        raise ConfigError(f"cannot parse {src} as CSV ({exc}): check the file") from exc
    header = table.header
    lower = {h.lower() for h in header}
    if lower & _VHD11K_PATHS.keys():
        if not lower & {"decision", "response"}:
            raise ConfigError(f"{src} has {', '.join(header[:1])} but no 'decision' (or 'response') column: add it")
        fmt = "vhd11k-csv"
    elif "harmful" not in lower:
        raise ConfigError(_columns_message(src))
    elif not lower & {"path", "id", "sample_id"}:
        raise ConfigError(f"{src} has no 'path' or 'id' column: add one naming each sample")
    else:
        fmt = "labels-csv"
    entries = []
    for number, (_, cells) in enumerate(table.rows, start=2):  # rows are numbered as records, header = 1
        values = {k: unescape_cell(v) for k, v in cells.items() if k is not None}  # cells past the header: dropped
        if any(v.strip() for v in values.values()):
            entries.append((number, values))
    last = len(table.rows) + 2  # a quote never closed swallows the last record
    return entries, fmt, [LabelError(1 if line == 1 else last, message) for line, message in table.problems]


def _json_entries(src: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    try:
        data = load_json(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"cannot parse {src} as JSON (line {exc.lineno}: {exc.msg}): check the file") from exc
    except ValueError as exc:  # nested too deep to parse
        raise ConfigError(f"cannot parse {src} as JSON ({exc}): check the file") from None
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


def _jsonl_entries(text: str) -> tuple[list[tuple[int, dict[str, Any]]], str, list[LabelError]]:
    """One entry per non-blank line (numbered as the file's lines); a line that is not JSON is an error."""
    entries: list[tuple[int, dict[str, Any]]] = []
    problems: list[LabelError] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = load_json(line)
        except (json.JSONDecodeError, ValueError) as exc:
            problems.append(LabelError(number, f"not a JSON object ({getattr(exc, 'msg', exc)}): fix the line"))
            continue
        entries.append((number, item if isinstance(item, dict) else {"__invalid__": item}))
    return entries, "jsonl", problems


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _response(value: Any) -> bool | None:
    """The decision in a judge's answer: the whole answer, else its first word ("Yes, it shows ...")."""
    try:
        return parse_yes_no(value)
    except ValueError:
        first = re.split(r"[\s,.;:!]+", str(value).strip(), maxsplit=1)[0]
        try:
            return parse_yes_no(first)
        except ValueError:
            raise ValueError(f"response {str(value)[:40]!r} does not start with yes or no") from None


def _row(entry: Mapping[str, Any], paths: PathResolver, line: int, taxonomy: Taxonomy | None = None) -> LabelRow:
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
        elif low in ("decision", "response"):
            fields[low] = value
        elif low == "sample_id":
            fields.setdefault("id", value)
        elif low == "harmfultype":
            fields["reason"] = value
        elif low in _KNOWN:
            fields[low] = value
        else:
            meta[name] = value
    harmful = parse_yes_no(fields.get("harmful"))
    if harmful is None:
        harmful = parse_yes_no(fields.get("decision"))
    if harmful is None and _text(fields.get("response")) is not None:
        harmful = _response(fields["response"])
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
    path = None if raw_path is None else paths.resolve(raw_path, sample_id)
    kind = kind_from_column
    if kind is None and _text(fields.get("kind")) is not None:
        try:
            kind = Kind(str(fields["kind"]).strip().lower())
        except ValueError:
            raise ValueError(f"kind {fields['kind']!r} is not image or video") from None
    source = Source.parse(_text(fields.get("source")))
    segments = parse_spans(fields.get("segments"))
    if segments is not None:
        if segments and not harmful:
            raise ValueError("harmful spans on a row labelled not harmful: fix harmful or segments")
        if not segments and harmful:
            raise ValueError("segments is an empty list on a harmful row: give its spans, or leave it empty")
        if kind is Kind.IMAGE:
            raise ValueError("segments on an image: spans are times in a video")
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
        segments=segments,
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
