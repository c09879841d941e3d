"""Labelled sets in the store: human labels under a name (table ``labelled_sets``).

`LabelledSets` is mixed into `vhd.store.sqlite.Store`, which provides ``_tx`` and ``_query``.
What a labelled set means and how one is imported is `vhd.align.labels`' business; this module
only reads and writes the rows.
"""

from __future__ import annotations

import abc
import json
import sqlite3
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from vhd.errors import ConfigError


class Label(Protocol):
    """What `LabelledSets.save_labelled_set` needs of one label (`vhd.align.LabelledItem` fits)."""

    @property
    def sample_id(self) -> str:
        """The sample's id; the sample must be registered in the store."""

    @property
    def harmful(self) -> bool:
        """The human decision."""

    @property
    def reason(self) -> str | None:
        """Why, when given."""

    @property
    def categories(self) -> Sequence[str]:
        """Harm categories, when given."""


@dataclass(frozen=True)
class StoredLabel:
    """One row of a labelled set, with its sample's path.

    Attributes:
        sample_id: The sample's content hash.
        path: Where its media lies (from the store's sample record).
        harmful: The human decision.
        reason: Why, when given.
        categories: Harm categories, when given.
    """

    sample_id: str
    path: str
    harmful: bool
    reason: str | None
    categories: tuple[str, ...]


class LabelledSets(abc.ABC):
    """Reads and writes of the store's labelled sets."""

    path: Path

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction."""

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read query."""

    def save_labelled_set(self, name: str, labels: Sequence[Label], source: str = "") -> int:
        """Write labels into a labelled set in one transaction (a sample's earlier label is replaced).

        Args:
            name: The labelled set (not checked here; see `vhd.align.labels.check_set_name`).
            labels: The labels; every sample must be registered in the store.
            source: The file they came from, recorded with each row.

        Returns:
            The number of rows written.
        """
        now = time.time()
        rows = [
            (name, label.sample_id, int(label.harmful), label.reason, json.dumps(list(label.categories)), source, now)
            for label in labels
        ]
        with self._tx() as conn:  # one transaction: a reader sees all of the import or none
            conn.executemany(
                "INSERT OR REPLACE INTO labelled_sets (name, sample_id, harmful, reason, categories_json, "
                "source_file, imported_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        return len(rows)

    def labelled_sets(self) -> dict[str, int]:
        """Every labelled set with its size (removed samples counted), by name."""
        rows = self._query("SELECT name, COUNT(*) FROM labelled_sets GROUP BY name ORDER BY name")
        return {str(r[0]): int(r[1]) for r in rows}

    def labelled_set(self, name: str) -> list[StoredLabel]:
        """Read a labelled set (samples marked removed are left out), ordered by sample id.

        Raises:
            ConfigError: No set of that name (the message lists the sets there are).
        """
        rows = self._query(
            "SELECT l.sample_id, s.path, l.harmful, l.reason, l.categories_json FROM labelled_sets l "
            "JOIN samples s ON s.id = l.sample_id WHERE l.name = ? AND s.removed_at IS NULL ORDER BY l.sample_id",
            (name,),
        )
        if not rows and name not in self.labelled_sets():
            names = ", ".join(self.labelled_sets()) or "none yet; import one with `vhd label LABELS.csv`"
            raise ConfigError(f"no labelled set {name!r} in {self.path}; sets there: {names}")
        return [StoredLabel(str(r[0]), str(r[1]), bool(r[2]), r[3], tuple(json.loads(r[4] or "[]"))) for r in rows]
