"""The prediction cache: one SQLite file (``predictions.sqlite`` in the report folder).

Predictions are keyed by (detector key, sample id). The detector key is a hash of the
detector's `identity()` (name, model, options) and of the media settings, so changing any
option, or adding a detector, runs only what is new; re-running the same benchmark runs
nothing. Failed predictions are not cached: a re-run retries them. The cache is its own file
rather than a table of the annotation store so a benchmark needs no store and the report
folder holds everything its numbers came from.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vhd.detectors.base import Prediction
from vhd.errors import ConfigError

CACHE_FILE = "predictions.sqlite"
"""The cache's file name inside the output folder."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS predictions (
    detector_key TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    prediction_json TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (detector_key, sample_id)
);
CREATE TABLE IF NOT EXISTS detectors (
    detector_key TEXT PRIMARY KEY,
    identity_json TEXT NOT NULL
);
"""


def detector_key(identity: Mapping[str, Any], media: Mapping[str, Any] | None = None) -> str:
    """Hash of a detector's identity and the media settings (hex sha256, 64 characters)."""
    blob = json.dumps({"detector": identity, "media": media or {}}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class PredictionCache:
    """Cached predictions in one SQLite file; safe to reopen after a crash (WAL, one commit per batch).

    Args:
        path: The SQLite file (created with its folder when missing).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open prediction cache {self.path}: {exc}; choose another --out") from exc

    def close(self) -> None:
        """Close the file."""
        self._conn.close()

    def __enter__(self) -> PredictionCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register(self, key: str, identity: Mapping[str, Any]) -> None:
        """Remember what a detector key stands for (shown in the report's JSON)."""
        with self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO detectors (detector_key, identity_json) VALUES (?, ?)",
                (key, json.dumps(identity, sort_keys=True, default=str)),
            )

    def get_many(self, key: str, sample_ids: Iterable[str] | None = None) -> dict[str, Prediction]:
        """Cached predictions of one detector, by sample id (all of them, or those asked for)."""
        rows = self._conn.execute(
            "SELECT sample_id, prediction_json FROM predictions WHERE detector_key = ?", (key,)
        ).fetchall()
        wanted = None if sample_ids is None else set(sample_ids)
        return {sid: Prediction.from_dict(json.loads(blob)) for sid, blob in rows if wanted is None or sid in wanted}

    def put_many(self, key: str, predictions: Mapping[str, Prediction]) -> int:
        """Store successful predictions in one transaction; failed ones are skipped. Returns the count stored."""
        now = time.time()
        rows = [
            (key, sid, json.dumps(p.to_dict(), default=str), now)
            for sid, p in predictions.items()
            if p.harmful is not None and p.error is None
        ]
        with self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO predictions (detector_key, sample_id, prediction_json, created_at) "
                "VALUES (?, ?, ?, ?)",
                rows,
            )
        return len(rows)

    def count(self, key: str) -> int:
        """How many predictions a detector has cached."""
        row = self._conn.execute("SELECT COUNT(*) FROM predictions WHERE detector_key = ?", (key,)).fetchone()
        return int(row[0])


def cached_count(folder: str | os.PathLike[str]) -> int:
    """How many predictions a report folder's cache holds, all detectors together (0 without a cache)."""
    path = Path(folder) / CACHE_FILE
    if not path.is_file():
        return 0
    try:
        with PredictionCache(path) as cache:
            row = cache._conn.execute("SELECT COUNT(*) FROM predictions").fetchone()
    except (ConfigError, sqlite3.Error):
        return 0
    return int(row[0])
