"""``vhd11k-csv``: the VHD11K release CSV, one file per kind (images, videos), streamed.

The header depends on the number of debate rounds, so rows spool to a temporary file until the
last page is read; refusals count as harmful, as in the paper.
"""

from __future__ import annotations

import csv
import io
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from vhd.export.base import ROW_GROUP, ExportFormat, stored_decision
from vhd.fileio import atomic_write, escape_cell
from vhd.records import Annotation, Kind, Role, Sample, Status
from vhd.store.reads import (
    ROW_CATEGORIES,
    ROW_HARMFUL,
    ROW_ID,
    ROW_KIND,
    ROW_PATH,
    ROW_REASON,
    ROW_STATUS,
    AnnotationPage,
)
from vhd.store.rows import loads

_PATH_COLUMN = {Kind.IMAGE: "imagePath", Kind.VIDEO: "videoPath"}
_UNDECIDED = (Status.UNPARSED, Status.TRUNCATED, Status.ERROR)
_KIND_BY_VALUE = {k.value: k for k in Kind}
_ROLE_VALUES = frozenset(r.value for r in Role)
_SPOOL_CHUNK = 1 << 18
"""Characters of VHD11K CSV rows gathered in memory before they go to the spool file."""
_FORMULA_FIRST = frozenset("=+-@\t\r'")
"""First characters after which `escape_cell` may change a text (others it returns as is)."""


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
                    stored_decision(r[ROW_STATUS], r[ROW_HARMFUL]),
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
