"""The duplicate report: one row per file as CSV, or the same rows with a summary as JSON.

CSV columns: ``path``, ``cluster`` (the kept file's sha256; a file alone in its cluster has
its own), ``cluster_size``, ``kept`` (yes/no), ``match`` (kept, exact or near), ``distance``
(pHash Hamming distance to the kept file), ``kind``, ``sha256``, ``width``, ``height``,
``bytes``, ``split``, ``error`` (unreadable files have only ``path`` and ``error``).

JSON: ``{"threshold", "keep", "counts", "clusters": [{"id", "kept", "members": [...]}],
"leaks": [...], "unreadable": [...], "files": [rows as in the CSV]}``, clusters listing only
those of two files or more.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from vhd.errors import ConfigError
from vhd.fileio import atomic_write

if TYPE_CHECKING:
    from vhd.curate.dedup import DedupResult

COLUMNS = (
    "path",
    "cluster",
    "cluster_size",
    "kept",
    "match",
    "distance",
    "kind",
    "sha256",
    "width",
    "height",
    "bytes",
    "split",
    "error",
)
"""Columns of the CSV report, in order."""


def report_rows(result: DedupResult) -> list[dict[str, Any]]:
    """Return one row per file (clusters together, kept file first), then unreadable files."""
    rows: list[dict[str, Any]] = []
    for m in result.members:
        rows.append(
            {
                "path": m.fp.path,
                "cluster": m.cluster,
                "cluster_size": m.size,
                "kept": "yes" if m.kept else "no",
                "match": m.match,
                "distance": m.distance,
                "kind": m.fp.kind,
                "sha256": m.fp.sha256,
                "width": m.fp.width,
                "height": m.fp.height,
                "bytes": m.fp.size,
                "split": result.split_of(m) or "",
                "error": "",
            }
        )
    for path, reason in result.unreadable:
        rows.append({**dict.fromkeys(COLUMNS, ""), "path": path, "error": reason})
    return rows


def _csv(rows: list[dict[str, Any]]) -> Any:
    def write(fh: IO[str]) -> None:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)

    return write


def _json(result: DedupResult, rows: list[dict[str, Any]]) -> Any:
    clusters = [
        {
            "id": cid,
            "kept": members[0].fp.path,
            "members": [{"path": m.fp.path, "match": m.match, "distance": m.distance} for m in members],
        }
        for cid, members in result.clusters.items()
    ]
    data = {
        "threshold": result.threshold,
        "keep": result.keep,
        "counts": result.counts(),
        "clusters": clusters,
        "leaks": [{"cluster": leak.cluster, "splits": leak.splits, "paths": leak.paths} for leak in result.leaks],
        "unreadable": [{"path": p, "reason": r} for p, r in result.unreadable],
        "files": rows,
    }

    def write(fh: IO[str]) -> None:
        json.dump(data, fh, indent=2, ensure_ascii=False)
        fh.write("\n")

    return write


def write_dedup_report(result: DedupResult, path: Path) -> Path:
    """Write the report atomically as CSV (``.csv``) or JSON (``.json``).

    Raises:
        ConfigError: Any other suffix.
    """
    suffix = path.suffix.lower()
    rows = report_rows(result)
    if suffix == ".csv":
        return atomic_write(path, _csv(rows))
    if suffix == ".json":
        return atomic_write(path, _json(result, rows))
    raise ConfigError(f"unknown report format {path.suffix or '(no suffix)'!r}: name the report .csv or .json")
