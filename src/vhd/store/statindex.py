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
import time
from collections.abc import Sequence
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

    Args:
        cache_kib: Page cache in KiB (default `SCRATCH_CACHE_KIB`); keys added in sorted order
            (paths of a folder walk) need little.

    Example:
        >>> seen = ScratchSet()
        >>> seen.add("a"), seen.add("a"), "a" in seen
        (True, False, True)
        >>> seen.close()
    """

    def __init__(self, cache_kib: int = SCRATCH_CACHE_KIB) -> None:
        self._conn = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode = OFF")
        self._conn.execute("PRAGMA synchronous = OFF")
        self._conn.execute(f"PRAGMA cache_size = -{int(cache_kib)}")
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
