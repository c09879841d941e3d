"""Labelled sets in the store: human labels under a name (table ``labelled_sets``).

`LabelledSets` is mixed into `vhd.store.sqlite.Store`, which provides ``_tx`` and ``_query``.
What a labelled set means and how one is imported is `vhd.labels.sets`' business; this module
only reads and writes the rows.
"""

from __future__ import annotations

import abc
import json
import sqlite3
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError
from vhd.records import Kind, LabelledSample, Segment


class LabelledSets(abc.ABC):
    """Reads and writes of the store's labelled sets."""

    path: Path

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction."""

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read query."""

    def save_labelled_set(self, name: str, labels: Sequence[LabelledSample], source: str = "") -> int:
        """Write labels into a labelled set in one transaction (a sample's earlier label is replaced).

        Args:
            name: The labelled set (not checked here; see `vhd.labels.sets.check_set_name`).
            labels: The labels; every sample must be registered in the store.
            source: The file they came from, recorded with each row.

        Returns:
            The number of rows written.
        """
        now = time.time()
        rows = [
            (
                name,
                label.id,
                int(label.harmful),
                label.reason,
                json.dumps(list(label.categories)),
                source,
                now,
                None if label.segments is None else json.dumps([s.to_dict() for s in label.segments]),
            )
            for label in labels
        ]
        with self._tx() as conn:  # one transaction: a reader sees all of the import or none
            conn.executemany(
                "INSERT OR REPLACE INTO labelled_sets (name, sample_id, harmful, reason, categories_json, "
                "source_file, imported_at, segments_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        return len(rows)

    def labelled_sets(self) -> dict[str, int]:
        """Every labelled set with its size (removed samples counted), by name."""
        rows = self._query("SELECT name, COUNT(*) FROM labelled_sets GROUP BY name ORDER BY name")
        return {str(r[0]): int(r[1]) for r in rows}

    def labelled_set(self, name: str) -> list[LabelledSample]:
        """Read a labelled set (samples marked removed are left out), ordered by sample id.

        Raises:
            ConfigError: No set of that name (the message lists the sets there are).
        """
        rows = self._query(
            "SELECT l.sample_id, s.path, l.harmful, l.reason, l.categories_json, s.kind, l.segments_json "
            "FROM labelled_sets l "
            "JOIN samples s ON s.id = l.sample_id WHERE l.name = ? AND s.removed_at IS NULL ORDER BY l.sample_id",
            (name,),
        )
        if not rows and name not in self.labelled_sets():
            names = ", ".join(self.labelled_sets()) or "none yet; import one with `vhd label LABELS.csv`"
            raise ConfigError(f"no labelled set {name!r} in {self.path}; sets there: {names}")
        return [
            LabelledSample(
                id=str(r[0]),
                path=r[1],
                kind=Kind(r[5]),
                harmful=bool(r[2]),
                reason=r[3],
                categories=list(json.loads(r[4] or "[]")),
                segments=None if r[6] is None else [Segment.from_dict(d) for d in json.loads(r[6])],
            )
            for r in rows
        ]
