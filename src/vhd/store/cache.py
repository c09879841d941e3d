"""Side caches: JSON values under a key, in small SQLite files of their own.

Some results are cached next to a command's output rather than in the store, so the output
folder holds everything its numbers came from: the predictions of ``vhd bench``
(``OUT/predictions.sqlite``) and the single-call answers of ``vhd compare``
(``OUT/single_answers.db``). A `JsonCache` is one such file; each of its tables, described by a
`CacheTable`, maps a key of one or more columns to one JSON value (and, optionally, the time it
was written). Tables are created when missing; existing files are used as they are.

Example:
    >>> table = CacheTable("answers", (("config", "TEXT"), ("sample_id", "TEXT")), "outcome")
    >>> with JsonCache(":memory:", [table], what="the answer cache") as cache:
    ...     cache.put("answers", ("c1", "s1"), {"harmful": True})
    ...     cache.get("answers", ("c1", "s1"))
    {'harmful': True}
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from vhd.errors import ConfigError
from vhd.store.connection import Connection
from vhd.store.rows import write_error

Key = str | int
"""One key column's value."""

CacheError = sqlite3.Error
"""What a read or write of an open cache raises when its file is damaged or locked too long."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TYPES = ("TEXT", "INTEGER")


@dataclass(frozen=True)
class CacheTable:
    """One table of a side cache: key columns, a JSON value column, an optional time column.

    Attributes:
        name: The table's name.
        keys: ``(column, type)`` of each key column, ``type`` being ``TEXT`` or ``INTEGER``;
            together they are the primary key.
        value: The column holding the value as JSON text.
        stamp: A column holding the Unix time of each write (None: no such column).
        required: Declare every column ``NOT NULL`` (a single key column is declared
            ``PRIMARY KEY`` only).
        sort_keys: Write JSON objects with their keys sorted.
    """

    name: str
    keys: tuple[tuple[str, str], ...]
    value: str
    stamp: str | None = None
    required: bool = False
    sort_keys: bool = False

    def __post_init__(self) -> None:
        names = [self.name, *(k for k, _ in self.keys), self.value, *([self.stamp] if self.stamp else [])]
        bad = [n for n in names if not _NAME.fullmatch(n)]
        if bad or not self.keys or any(t not in _TYPES for _, t in self.keys):
            raise ValueError(f"cache table {self.name!r}: bad names {bad} or key columns {self.keys}")

    @property
    def columns(self) -> list[str]:
        """Every column, in table order."""
        return [*(k for k, _ in self.keys), self.value, *([self.stamp] if self.stamp else [])]

    def create_sql(self) -> str:
        """The ``CREATE TABLE IF NOT EXISTS`` statement of the table."""
        req = " NOT NULL" if self.required else ""
        if len(self.keys) == 1:
            cols = [f"{self.keys[0][0]} {self.keys[0][1]} PRIMARY KEY"]
        else:
            cols = [f"{k} {t}{req}" for k, t in self.keys]
        cols.append(f"{self.value} TEXT{req}")
        if self.stamp:
            cols.append(f"{self.stamp} REAL{req}")
        if len(self.keys) > 1:
            cols.append(f"PRIMARY KEY ({', '.join(k for k, _ in self.keys)})")
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({', '.join(cols)})"


class JsonCache:
    """JSON values under keys, in the tables of one SQLite file.

    Every write is committed at once (`put_many` in one transaction), so a killed process
    loses nothing written before. The object may be shared across threads.

    Args:
        path: The SQLite file (created with its folder when missing), or ``":memory:"``.
        tables: The tables the file holds.
        what: What the cache is, for error messages (``"prediction cache"``).
        wal: Use write-ahead logging (readers never wait for a writer; adds ``-wal`` and
            ``-shm`` files next to the cache while it is open).
        timeout: Seconds to wait for another process holding the write lock.

    Raises:
        ConfigError: The file cannot be opened or is not an SQLite database.
        vhd.errors.StoreWriteError: From a write: full disk, read-only, locked (one line).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        tables: Sequence[CacheTable],
        *,
        what: str,
        wal: bool = False,
        timeout: float = 30.0,
    ) -> None:
        memory = str(path) == ":memory:"
        self.path = Path(path)
        self.tables = {t.name: t for t in tables}
        self.what = what
        if not memory:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        try:
            conn = sqlite3.connect(
                ":memory:" if memory else self.path,
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
                factory=Connection,
            )
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open {what} {self.path}: {exc}; choose another --out") from exc
        try:
            if wal:
                conn.execute("PRAGMA journal_mode=WAL")
            for table in tables:
                conn.execute(table.create_sql())
        except sqlite3.Error as exc:
            conn.close()
            raise ConfigError(f"cannot open {what} {self.path}: {exc}; choose another --out") from exc
        self._conn = conn

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> JsonCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _table(self, name: str) -> CacheTable:
        try:
            return self.tables[name]
        except KeyError:
            raise ValueError(f"{self.path} has no cache table {name!r}: known {sorted(self.tables)}") from None

    @staticmethod
    def _where(table: CacheTable, prefix: Sequence[Key]) -> str:
        if len(prefix) > len(table.keys):
            raise ValueError(f"cache table {table.name!r} has {len(table.keys)} key column(s), got {len(prefix)}")
        conds = [f"{k} = ?" for k, _ in table.keys[: len(prefix)]]
        return f" WHERE {' AND '.join(conds)}" if conds else ""

    def get(self, table: str, key: Sequence[Key]) -> Any:
        """The value stored under a full key, or None when there is none."""
        t = self._table(table)
        if len(key) != len(t.keys):
            raise ValueError(f"cache table {table!r} has {len(t.keys)} key column(s), got {len(key)}")
        with self._lock:
            row = self._conn.execute(f"SELECT {t.value} FROM {t.name}{self._where(t, key)}", tuple(key)).fetchone()
        return None if row is None else json.loads(row[0])

    def select(self, table: str, prefix: Sequence[Key] = ()) -> list[tuple[tuple[Key, ...], Any]]:
        """Every entry whose first key columns equal ``prefix``.

        Returns:
            ``(rest of the key, value)`` for each entry, in no particular order.
        """
        t = self._table(table)
        rest = ", ".join(k for k, _ in t.keys[len(prefix) :])
        cols = f"{rest}, {t.value}" if rest else t.value
        with self._lock:
            rows = self._conn.execute(f"SELECT {cols} FROM {t.name}{self._where(t, prefix)}", tuple(prefix)).fetchall()
        return [(tuple(r[:-1]), json.loads(r[-1])) for r in rows]

    def put(self, table: str, key: Sequence[Key], value: Any) -> None:
        """Store one value under a full key (replacing an earlier one); committed at once."""
        self.put_many(table, [(key, value)])

    def put_many(self, table: str, entries: Iterable[tuple[Sequence[Key], Any]]) -> int:
        """Store values under full keys in one transaction (earlier values are replaced).

        Returns:
            The number of entries stored.
        """
        t = self._table(table)
        now = time.time()
        rows = []
        for key, value in entries:
            if len(key) != len(t.keys):
                raise ValueError(f"cache table {table!r} has {len(t.keys)} key column(s), got {len(key)}")
            blob = json.dumps(value, sort_keys=t.sort_keys, default=str)
            rows.append((*key, blob, now) if t.stamp else (*key, blob))
        if not rows:
            return 0
        cols = t.columns
        sql = f"INSERT OR REPLACE INTO {t.name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany(sql, rows)
                self._conn.execute("COMMIT")
            except BaseException as exc:
                if self._conn.in_transaction:  # SQLite rolls back by itself after some errors (full disk)
                    with suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.OperationalError):
                    raise write_error(self.path, exc, self.what) from exc
                raise
        return len(rows)

    def count(self, table: str, prefix: Sequence[Key] = ()) -> int:
        """How many entries there are whose first key columns equal ``prefix`` (all by default)."""
        t = self._table(table)
        with self._lock:
            row = self._conn.execute(f"SELECT COUNT(*) FROM {t.name}{self._where(t, prefix)}", tuple(prefix)).fetchone()
        return int(row[0])
