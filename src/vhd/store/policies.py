"""The policies runs used (table ``policies``): each kept once, by its content hash, with its text.

`Policies` is mixed into `vhd.store.sqlite.Store`, which provides ``_tx`` and ``_query``. The
store keeps the text and names only; reading a policy's meaning is `vhd.policy`'s work
(``vhd.policy.parse_policy(row.text)`` gives it back, with the same content hash).
"""

from __future__ import annotations

import abc
import sqlite3
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

_COLS = "hash, name, version, text, first_used"
RUN_POLICY_KEY = (
    "(SELECT p.name || '@' || p.version FROM runs r JOIN policies p ON p.hash = r.policy_hash WHERE r.id = a.run_id)"
)
"""SQL for ``name@version`` of the policy of annotation ``a``'s run (NULL for a run from before policies)."""


@dataclass(frozen=True)
class PolicyRow:
    """One stored policy.

    Attributes:
        hash: Its content hash (`vhd.policy.Policy.content_hash`).
        name: Its name.
        version: Its version.
        text: Its text (canonical YAML), which parses back to the same hash.
        first_used: When a run first used it (Unix time).
    """

    hash: str
    name: str
    version: str
    text: str
    first_used: float

    @property
    def key(self) -> str:
        """``name@version``."""
        return f"{self.name}@{self.version}"


def _row(r: Sequence[Any]) -> PolicyRow:
    return PolicyRow(str(r[0]), str(r[1]), str(r[2]), str(r[3]), float(r[4]))


class Policies(abc.ABC):
    """Writes and reads of the policies runs used."""

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction."""

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read query."""

    def save_policy(self, content_hash: str, name: str, version: str, text: str) -> None:
        """Keep a policy (once per content hash; a policy already kept is left as it is)."""
        with self._tx() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO policies (hash, name, version, text, first_used) VALUES (?, ?, ?, ?, ?)",
                (content_hash, name, version, text, time.time()),
            )

    def policies(self) -> list[PolicyRow]:
        """Every policy kept, in the order runs first used them."""
        return [_row(r) for r in self._query(f"SELECT {_COLS} FROM policies ORDER BY first_used, rowid")]

    def get_policy(self, content_hash: str) -> PolicyRow | None:
        """The policy with this content hash (or the one hash starting with it), None when none."""
        rows = self._query(
            f"SELECT {_COLS} FROM policies WHERE hash = ? OR hash LIKE ? ESCAPE '!' LIMIT 2",
            (content_hash, content_hash.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"),
        )
        exact = [r for r in rows if r[0] == content_hash]
        return _row(exact[0]) if exact else (_row(rows[0]) if len(rows) == 1 else None)

    def run_policy(self, run_id: str) -> PolicyRow | None:
        """The policy a run used; None for a run from before policies were recorded."""
        rows = self._query(
            f"SELECT {', '.join('p.' + c for c in _COLS.split(', '))} FROM runs r "
            "JOIN policies p ON p.hash = r.policy_hash WHERE r.id = ?",
            (run_id,),
        )
        return _row(rows[0]) if rows else None
