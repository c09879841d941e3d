"""The prediction cache: one SQLite file (``predictions.sqlite`` in the report folder).

Predictions are keyed by (detector key, sample id). The detector key is a hash of the
detector's `identity()` (name, model, options) and of the media settings, so changing any
option, or adding a detector, runs only what is new; re-running the same benchmark runs
nothing. Failed predictions are not cached: a re-run retries them. The cache is its own file
rather than a table of the annotation store so a benchmark needs no store and the report
folder holds everything its numbers came from. The file is a `vhd.store.cache.JsonCache`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vhd.detectors.base import Prediction
from vhd.errors import ConfigError
from vhd.store.cache import CacheError, CacheTable, JsonCache

CACHE_FILE = "predictions.sqlite"
"""The cache's file name inside the output folder."""

_PREDICTIONS = CacheTable(
    "predictions",
    (("detector_key", "TEXT"), ("sample_id", "TEXT")),
    "prediction_json",
    stamp="created_at",
    required=True,
)
_DETECTORS = CacheTable("detectors", (("detector_key", "TEXT"),), "identity_json", required=True, sort_keys=True)


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
        self._cache = JsonCache(self.path, [_PREDICTIONS, _DETECTORS], what="prediction cache", wal=True)

    def close(self) -> None:
        """Close the file."""
        self._cache.close()

    def __enter__(self) -> PredictionCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register(self, key: str, identity: Mapping[str, Any]) -> None:
        """Remember what a detector key stands for (shown in the report's JSON)."""
        self._cache.put(_DETECTORS.name, (key,), identity)

    def get(self, key: str, sample_id: str) -> Prediction | None:
        """One cached prediction of a detector, or None (one indexed lookup: no memory per sample)."""
        data = self._cache.get(_PREDICTIONS.name, (key, sample_id))
        return None if data is None else Prediction.from_dict(data)

    def get_many(self, key: str, sample_ids: Iterable[str] | None = None) -> dict[str, Prediction]:
        """Cached predictions of one detector, by sample id (all of them, or those asked for)."""
        rows = self._cache.select(_PREDICTIONS.name, (key,))
        wanted = None if sample_ids is None else set(sample_ids)
        return {str(sid): Prediction.from_dict(data) for (sid,), data in rows if wanted is None or sid in wanted}

    def put_many(self, key: str, predictions: Mapping[str, Prediction]) -> int:
        """Store successful predictions in one transaction; failed ones are skipped. Returns the count stored."""
        entries = [
            ((key, sid), p.to_dict()) for sid, p in predictions.items() if p.harmful is not None and p.error is None
        ]
        return self._cache.put_many(_PREDICTIONS.name, entries)

    def count(self, key: str | None = None) -> int:
        """How many predictions a detector has cached (every detector's together when ``key`` is None)."""
        return self._cache.count(_PREDICTIONS.name, () if key is None else (key,))


def cached_count(folder: str | os.PathLike[str]) -> int:
    """How many predictions a report folder's cache holds, all detectors together (0 without a cache)."""
    path = Path(folder) / CACHE_FILE
    if not path.is_file():
        return 0
    try:
        with PredictionCache(path) as cache:
            return cache.count()
    except (ConfigError, CacheError):
        return 0
