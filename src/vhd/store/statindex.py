"""The stat index: which bytes a file held when it was last hashed, keyed by what ``stat`` says.

Like git's index, table ``stat_index`` maps a path with its size, modification and change times
and inode to the sha256 of its bytes. A run that meets the file again with the same ``stat``
takes the stored hash instead of reading the file, so resuming a finished run over a million
files costs a million ``stat`` calls, not a read of every byte. A file whose ``stat`` changed is
hashed again (and the entry replaced); ``--rehash`` ignores the index altogether.

An entry is trusted only when the file's modification time is at least `RACY_NS` older than the
moment it was hashed (git's "racily clean" rule): a file changed again within the same clock tick
as the write the hash saw, with the same size, would otherwise look unchanged.

`StatIndex` is mixed into `vhd.store.sqlite.Store`, which provides ``_tx`` and ``_query``.

This module also holds `ScratchSet`, the on-disk set of keys a long run uses instead of a Python
set (which would grow with the number of samples).
"""

from __future__ import annotations

import abc
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from vhd.fileio import FileStat

RACY_NS = 2_000_000_000
"""An entry is trusted only when the file was last modified this long (2 s) before it was hashed."""

_LOOKUP_CHUNK = 500

SCRATCH_CACHE_KIB = 16 * 1024
"""Page cache of a `ScratchSet` (KiB): 100,000 sample ids or paths (about 7 MB) stay in memory
without a write to the temporary file; a bigger set spills, so memory stays bounded."""

_SCRATCH_BATCH = 2_000
"""Keys `ScratchSet.put_new` buffers before inserting them at once."""


class StatIndex(abc.ABC):
    """Read and write the stat index."""

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction."""

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read query."""

    def known_hashes(self, stats: Sequence[FileStat]) -> dict[str, str]:
        """Return ``path -> sha256`` for the files whose stat is unchanged since they were hashed.

        Args:
            stats: The files as they are now.

        Returns:
            The stored hash of every file whose entry matches its stat and is not racy (see
            `RACY_NS`); files missing from the result must be read.
        """
        out: dict[str, str] = {}
        by_path = {s.path: s for s in stats}
        paths = list(by_path)
        for start in range(0, len(paths), _LOOKUP_CHUNK):
            chunk = paths[start : start + _LOOKUP_CHUNK]
            rows = self._query(
                "SELECT path, size, mtime_ns, ctime_ns, inode, sha256, hashed_at_ns FROM stat_index "
                f"WHERE path IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            for path, size, mtime_ns, ctime_ns, inode, sha256, hashed_at_ns in rows:
                now = by_path[path]
                if (size, mtime_ns, ctime_ns, inode) != (now.size, now.mtime_ns, now.ctime_ns, now.inode):
                    continue
                if mtime_ns >= hashed_at_ns - RACY_NS:
                    continue
                out[path] = str(sha256)
        return out

    def remember_hashes(self, entries: Sequence[tuple[FileStat, str]], *, hashed_at_ns: int | None = None) -> None:
        """Record the hash of files just read, with the stat they had before the read (one transaction).

        Args:
            entries: ``(stat taken before reading, sha256 of the bytes read)`` pairs.
            hashed_at_ns: When the files were read (default: now).
        """
        if not entries:
            return
        at = time.time_ns() if hashed_at_ns is None else hashed_at_ns
        with self._tx() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO stat_index (path, size, mtime_ns, ctime_ns, inode, sha256, hashed_at_ns) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(s.path, s.size, s.mtime_ns, s.ctime_ns, s.inode, sha, at) for s, sha in entries],
            )


class ScratchSet:
    """A set of strings kept in a private temporary SQLite file, so memory stays flat at any size.

    SQLite deletes the file when the set is closed. Used by long runs for the keys they have
    seen (paths, sample ids) instead of a Python set.

    Example:
        >>> seen = ScratchSet()
        >>> seen.add("a"), seen.add("a"), "a" in seen
        (True, False, True)
        >>> seen.close()
    """

    def __init__(self) -> None:
        self._conn = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode = OFF")
        self._conn.execute("PRAGMA synchronous = OFF")
        self._conn.execute(f"PRAGMA cache_size = -{SCRATCH_CACHE_KIB}")
        self._conn.execute("CREATE TABLE seen (key TEXT PRIMARY KEY) WITHOUT ROWID")
        self._conn.execute("BEGIN")
        self._pending = 0
        self._buffer: list[tuple[str]] = []
        self.size = 0

    def put_new(self, key: str) -> None:
        """Add a key the caller knows is not there yet; inserted with others in one ``executemany``."""
        self._buffer.append((key,))
        self.size += 1
        if len(self._buffer) >= _SCRATCH_BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._buffer:
            self._conn.executemany("INSERT OR IGNORE INTO seen (key) VALUES (?)", self._buffer)
            self._buffer.clear()
            self._pending += _SCRATCH_BATCH

    def add(self, key: str) -> bool:
        """Add a key; True when it was not there yet."""
        self._flush()
        cur = self._conn.execute("INSERT OR IGNORE INTO seen (key) VALUES (?)", (key,))
        self._pending += 1
        if self._pending >= 10_000:  # keep the open transaction (and SQLite's spill) small
            self._conn.execute("COMMIT")
            self._conn.execute("BEGIN")
            self._pending = 0
        new = cur.rowcount == 1
        self.size += new
        return new

    def __contains__(self, key: object) -> bool:
        self._flush()
        return self._conn.execute("SELECT 1 FROM seen WHERE key = ?", (str(key),)).fetchone() is not None

    def __len__(self) -> int:
        return self.size

    def close(self) -> None:
        """Drop the set and its file."""
        self._conn.close()


class ScratchMap:
    """A mapping of strings to strings in a private temporary SQLite file: flat memory at any size.

    Keys keep the order they were first put in (putting a key again replaces its value in place,
    as a dict does). SQLite deletes the file when the map is closed or collected. Used by long
    runs for per-sample results they read back once the run is over (e.g. the predictions of
    ``vhd bench``), instead of a dict of objects. Safe to use from several threads (one lock).

    Example:
        >>> m = ScratchMap()
        >>> m.put("a", "1"), m.put("b", "2"), m.put("a", "3")
        (None, None, '1')
        >>> m.get("a"), len(m), list(m.items())
        ('3', 2, [('a', '3'), ('b', '2')])
        >>> m.close()

    Args:
        cache_kib: SQLite's page cache in KiB: what the map may hold in memory before it spills
            to its file (default `SCRATCH_CACHE_KIB`).
    """

    def __init__(self, cache_kib: int = SCRATCH_CACHE_KIB) -> None:
        self._conn = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode = OFF")
        self._conn.execute("PRAGMA synchronous = OFF")
        self._conn.execute(f"PRAGMA cache_size = -{max(64, int(cache_kib))}")
        self._conn.execute("CREATE TABLE m (pos INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, value TEXT NOT NULL)")
        self._conn.execute("BEGIN")
        self._lock = threading.Lock()
        self._pending = 0
        self.size = 0

    def put(self, key: str, value: str) -> str | None:
        """Set a key's value; returns the value it replaced (None when the key is new)."""
        with self._lock:
            return self._put(key, value)

    def _put(self, key: str, value: str) -> str | None:
        row = self._conn.execute("SELECT value FROM m WHERE key = ?", (key,)).fetchone()
        old = None if row is None else str(row[0])
        if old is None:
            self._conn.execute("INSERT INTO m (key, value) VALUES (?, ?)", (key, value))
            self.size += 1
        else:
            self._conn.execute("UPDATE m SET value = ? WHERE key = ?", (value, key))
        self._pending += 1
        if self._pending >= 10_000:  # keep the open transaction (and SQLite's spill) small
            self._conn.execute("COMMIT")
            self._conn.execute("BEGIN")
            self._pending = 0
        return old

    def get(self, key: str) -> str | None:
        """A key's value, or None."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM m WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return self._conn.execute("SELECT 1 FROM m WHERE key = ?", (str(key),)).fetchone() is not None

    def __len__(self) -> int:
        return self.size

    def items(self, page: int = 512) -> Iterator[tuple[str, str]]:
        """Every ``(key, value)`` in first-put order, read a page at a time (safe to put while iterating)."""
        last = 0
        while True:
            with self._lock:
                rows = self._conn.execute(
                    "SELECT pos, key, value FROM m WHERE pos > ? ORDER BY pos LIMIT ?", (last, page)
                ).fetchall()
            if not rows:
                return
            for _pos, key, value in rows:
                yield str(key), str(value)
            last = int(rows[-1][0])

    def close(self) -> None:
        """Drop the map and its file."""
        with self._lock:
            self._conn.close()
