"""What `vhd fetch` keeps in its output folder: the log, the manifest, the report, the lock.

Layout of ``OUT/``::

    <sha256>.<ext>        fetched images and videos, named by content hash
    fetch-log.jsonl       one line per outcome, appended as each URL finishes (newest wins)
    manifest.csv          every fetched file with its url, keyword, source and kind (for ingest)
    fetch-report.csv      the last run's report: one row per URL of its list
    .partial/             downloads in progress (emptied at the start of every run)
    .quarantine/          files on the block list, as <sha256>.blocked (never opened again)
    .vhd-fetch.lock       held while a fetch writes here (two fetches never share a folder)

The log is the source of truth for resuming: a URL whose newest record is ``ok`` (and whose file
is still there) is not fetched again. A record torn by a kill (a last line without its newline)
is ignored when read back.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from vhd.collect.fetch_settings import REPORT_COLUMNS, FetchOutcome
from vhd.errors import ConfigError
from vhd.fileio import atomic_write, escape_cell

LOG_NAME: Final = "fetch-log.jsonl"
MANIFEST_NAME: Final = "manifest.csv"
REPORT_NAME: Final = "fetch-report.csv"
PARTIAL_DIR: Final = ".partial"
QUARANTINE_DIR: Final = ".quarantine"
LOCK_NAME: Final = ".vhd-fetch.lock"


@contextlib.contextmanager
def folder_lock(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on an output folder for the duration of a fetch.

    Raises:
        ConfigError: Another fetch holds it.
    """
    out.mkdir(parents=True, exist_ok=True)
    fh = open(out / LOCK_NAME, "a+")  # noqa: SIM115 - closed below
    try:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no locking
            yield
            return
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            raise ConfigError(
                f"another vhd fetch is writing to {out}; wait for it to finish or use another --out"
            ) from exc
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    finally:
        fh.close()


def clean_partial(out: Path) -> Path:
    """Empty (or create) ``OUT/.partial/`` and return it: leftovers of a killed run go away."""
    partial = out / PARTIAL_DIR
    if partial.is_symlink() or partial.is_file():
        partial.unlink()
    elif partial.is_dir():
        shutil.rmtree(partial)
    partial.mkdir(parents=True, exist_ok=True)
    return partial


class FetchLog:
    """The append-only JSONL log of outcomes in an output folder.

    Args:
        out: The output folder.
    """

    def __init__(self, out: Path) -> None:
        self.path = out / LOG_NAME
        self._fh: IO[str] | None = None

    def read(self) -> dict[str, FetchOutcome]:
        """Return the newest outcome per URL (unreadable lines are skipped)."""
        latest: dict[str, FetchOutcome] = {}
        try:
            fh = open(self.path, encoding="utf-8", errors="replace")  # noqa: SIM115
        except FileNotFoundError:
            return latest
        with fh:
            for raw in fh:
                if not raw.endswith("\n"):
                    break
                try:
                    record = json.loads(raw)
                    outcome = FetchOutcome.from_dict(record)
                except (json.JSONDecodeError, TypeError):
                    continue
                outcome.this_run = False
                latest[outcome.url] = outcome
        return latest

    def append(self, outcome: FetchOutcome) -> None:
        """Append one outcome and flush it to the operating system at once."""
        if self._fh is None:
            self._repair()
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        record = outcome.to_dict()
        record.pop("this_run", None)
        self._fh.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._fh.flush()

    def _repair(self) -> None:
        """End a torn last line (left by a kill) so the next record starts on its own line."""
        try:
            with open(self.path, "rb+") as fh:
                fh.seek(0, os.SEEK_END)
                if fh.tell() == 0:
                    return
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
        except FileNotFoundError:
            return

    def close(self) -> None:
        """Close the log (safe to call twice)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def manifest_rows(out: Path, latest: dict[str, FetchOutcome]) -> list[dict[str, str]]:
    """Rows of ``manifest.csv``: one per fetched file still present, first URL (by line) wins."""
    rows: dict[str, dict[str, str]] = {}
    for outcome in sorted(latest.values(), key=lambda o: (o.line, o.url)):
        if outcome.status != "ok" or not outcome.sha256 or not outcome.path or outcome.sha256 in rows:
            continue
        if not (out / outcome.path).is_file():
            continue
        row = {
            "path": outcome.path,
            "id": outcome.sha256,
            "kind": outcome.kind or "",
            "keyword": outcome.keyword or "",
            "source": outcome.source or "",
            "url": outcome.url,
        }
        for key, value in outcome.meta.items():
            row.setdefault(key, value)
        rows[outcome.sha256] = row
    return list(rows.values())


def write_manifest(out: Path, latest: dict[str, FetchOutcome]) -> Path:
    """Write ``OUT/manifest.csv`` atomically (paths relative to ``OUT``)."""
    rows = manifest_rows(out, latest)
    columns = ["path", "id", "kind", "keyword", "source", "url"]
    for row in rows:
        columns += [k for k in row if k not in columns]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: escape_cell(v) for k, v in row.items()} for row in rows)
    return atomic_write(out / MANIFEST_NAME, buf.getvalue())


def _report_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, str):
        return str(escape_cell(value))  # URLs, keywords, reasons: never a spreadsheet formula
    return str(value)


def write_report(outcomes: Iterable[FetchOutcome], path: Path) -> Path:
    """Write a report atomically: JSON (a list of outcomes) when ``path`` ends in ``.json``, else CSV.

    Args:
        outcomes: One per row of the list, in list order.
        path: The report file.

    Returns:
        The path written.
    """
    items = list(outcomes)
    if path.suffix.lower() == ".json":
        return atomic_write(path, json.dumps([o.to_dict() for o in items], indent=1, ensure_ascii=False) + "\n")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(REPORT_COLUMNS)
    for o in items:
        writer.writerow([_report_value(getattr(o, c)) for c in REPORT_COLUMNS])
    return atomic_write(path, buf.getvalue())
