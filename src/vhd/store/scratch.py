"""`ScratchTable`: rows keyed by an integer, kept in a private temporary SQLite file.

A long run that must remember something about every file (a path, a hash, a size) but reads
it back only now and then puts it here instead of in Python objects, so its memory stays flat:
SQLite keeps at most `ScratchTable.cache_kib` of pages in memory and the rest in a temporary file
that it deletes when the table is closed (or the process ends). `vhd dedup` keeps its
fingerprints here and only compact arrays in memory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from vhd.errors import ConfigError

SCRATCH_TABLE_CACHE_KIB = 1024
"""Page cache of a `ScratchTable` (KiB). Rows are appended in key order and read back in runs,
so a small cache is enough."""

_BATCH = 1_000
"""Rows `ScratchTable.put` buffers before inserting them at once."""

_LOOKUP = 500
"""Keys looked up per query (SQLite's parameter limit is far above it)."""


class ScratchTable:
    """A table of rows keyed by an integer, in a temporary SQLite file deleted on `close`.

    Args:
        columns: Column names (letters, digits and ``_``); values may be text, integers, bytes or
            None.
        cache_kib: Page cache in KiB.

    Raises:
        ConfigError: A column name that is not a plain identifier, or no columns.

    Example:
        >>> table = ScratchTable(["path", "size"])
        >>> table.put(3, ("a.png", 10))
        >>> table.get([3, 4])
        {3: ('a.png', 10)}
        >>> table.close()
    """

    def __init__(self, columns: Sequence[str], *, cache_kib: int = SCRATCH_TABLE_CACHE_KIB) -> None:
        if not columns or not all(c.isidentifier() and c.isascii() for c in columns):
            raise ConfigError(f"scratch table columns must be plain names, got {list(columns)!r}")
        self.columns = tuple(columns)
        self.cache_kib = cache_kib
        self._conn = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode = OFF")
        self._conn.execute("PRAGMA synchronous = OFF")
        self._conn.execute(f"PRAGMA cache_size = -{int(cache_kib)}")
        names = ", ".join(self.columns)
        self._conn.execute(f"CREATE TABLE rows (key INTEGER PRIMARY KEY, {names})")
        self._insert = f"INSERT OR REPLACE INTO rows (key, {names}) VALUES (?{', ?' * len(self.columns)})"
        self._select = f"SELECT key, {names} FROM rows"
        self._buffer: list[tuple[Any, ...]] = []

    def put(self, key: int, values: Sequence[Any]) -> None:
        """Store a row under ``key`` (replacing any row there), buffered with others.

        Raises:
            ConfigError: ``values`` does not have one value per column.
        """
        if len(values) != len(self.columns):
            raise ConfigError(f"a scratch row needs {len(self.columns)} values, got {len(values)}")
        self._buffer.append((key, *values))
        if len(self._buffer) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows (one transaction)."""
        if self._buffer:
            with self._conn:
                self._conn.execute("BEGIN")
                self._conn.executemany(self._insert, self._buffer)
            self._buffer.clear()

    def get(self, keys: Iterable[int]) -> dict[int, tuple[Any, ...]]:
        """Return ``key -> row values`` for the keys present (any order, any repeats)."""
        self.flush()
        wanted = sorted({int(k) for k in keys})
        out: dict[int, tuple[Any, ...]] = {}
        for start in range(0, len(wanted), _LOOKUP):
            chunk = wanted[start : start + _LOOKUP]
            rows = self._conn.execute(f"{self._select} WHERE key IN ({','.join('?' * len(chunk))})", chunk)
            for row in rows:
                out[row[0]] = tuple(row[1:])
        return out

    def scan(self, batch: int = _LOOKUP) -> Iterator[tuple[int, tuple[Any, ...]]]:
        """Yield ``(key, row values)`` for every row, in key order, reading ``batch`` rows a query."""
        self.flush()
        last: int | None = None
        while True:
            if last is None:
                rows = self._conn.execute(f"{self._select} ORDER BY key LIMIT ?", (batch,)).fetchall()
            else:
                rows = self._conn.execute(
                    f"{self._select} WHERE key > ? ORDER BY key LIMIT ?", (last, batch)
                ).fetchall()
            for row in rows:
                yield row[0], tuple(row[1:])
            if len(rows) < batch:
                return
            last = rows[-1][0]

    def __len__(self) -> int:
        self.flush()
        return int(self._conn.execute("SELECT count(*) FROM rows").fetchone()[0])

    def close(self) -> None:
        """Drop the table and its file."""
        self._buffer.clear()
        self._conn.close()
