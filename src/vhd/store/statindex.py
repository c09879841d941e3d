"""The stat index: which bytes a file held when it was last hashed, keyed by what ``stat`` says.

Like git's index, table ``stat_index`` maps a path with its size, modification and change times
and inode to the sha256 of its bytes. A run that meets the file again with the same ``stat``
takes the stored hash instead of reading the file, so resuming a finished run over a million
files costs a million ``stat`` calls, not a read of every byte. A file whose ``stat`` changed is
hashed again (and the entry replaced); ``--rehash`` ignores the index altogether.

An entry is trusted only when the file's modification time is at least `RACY_NS` older than the
moment it was hashed (git's "racily clean" rule): a file changed again within the same clock tick
as the write the hash saw, with the same size, would otherwise look unchanged.

Each entry also says whether another path of the index holds the same bytes (``shared``, kept
by `StatIndex.remember_hashes`) and, when it does not, the configuration and status of a final
verdict on those bytes (``final_config``, ``final_status``). A resumed run asks
`StatIndex.known_files`, which answers from the index alone, in path order, both what the index
vouches for and which of those files are *settled*: their bytes are a sample with a final verdict
under the run's configuration, and no other path of the index holds them (so the run need not
look their verdicts up, nor remember their sample ids to spot a second copy; see
`vhd.annotate.feeder`). The verdict columns are a cache of table ``annotations``, kept exact in
the one direction that matters: `vhd.store.sqlite.Store.save_annotation` sets them, and triggers
(migration ``0012_resume_index``) clear them whenever an annotation of those bytes under that
configuration is inserted, changed or deleted, by any writer. An entry without them is looked up
as before.

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
from typing import Any, NamedTuple

from vhd.fileio import FileStat
from vhd.store.reads import final_statuses

RACY_NS = 2_000_000_000
"""An entry is trusted only when the file was last modified this long (2 s) before it was hashed."""

_LOOKUP_CHUNK = 1024
"""Paths looked up in one query (a feeder's batch of 512 takes one)."""

_COLUMNS = "path, size, mtime_ns, ctime_ns, inode, sha256, hashed_at_ns"

SCRATCH_CACHE_KIB = 16 * 1024
"""Page cache of a `ScratchSet` (KiB): 100,000 sample ids or paths (about 7 MB) stay in memory
without a write to the temporary file; a bigger set spills, so memory stays bounded."""

_SCRATCH_BATCH = 2_000
"""Keys `ScratchSet.put_new` buffers before inserting them at once."""


class KnownFiles(NamedTuple):
    """What `StatIndex.known_files` answers for a batch of files.

    Attributes:
        hashes: ``path -> sha256`` of the files whose stat is unchanged since they were hashed
            (as `StatIndex.known_hashes` answers).
        settled: The paths among those whose bytes are a sample with a final verdict under the
            configuration asked, held by no other path of the index.
    """

    hashes: dict[str, str]
    settled: set[str]


def _trusted(row: Sequence[Any], now: FileStat) -> bool:
    """Whether an entry ``(path, size, mtime_ns, ctime_ns, inode, sha256, hashed_at_ns, ...)`` vouches for ``now``."""
    return (row[1], row[2], row[3], row[4]) == (now.size, now.mtime_ns, now.ctime_ns, now.inode) and bool(
        row[2] < row[6] - RACY_NS
    )


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
            rows = self._query(f"SELECT {_COLUMNS} FROM stat_index WHERE path IN ({','.join('?' * len(chunk))})", chunk)
            for row in rows:
                if _trusted(row, by_path[row[0]]):
                    out[row[0]] = str(row[5])
        return out

    def known_files(self, stats: Sequence[FileStat], config_hash: str, *, retry_unparsed: bool = False) -> KnownFiles:
        """`known_hashes`, and which of those files are settled under a configuration, in one query per batch.

        A file is settled when the index vouches for it, its entry records a final verdict under
        ``config_hash`` (the same answer `vhd.store.reads.AnnotationReads.done_ids` would give,
        without a search of the annotations), and no other path of the index holds the same
        bytes.

        Args:
            stats: The files as they are now.
            config_hash: The configuration whose verdicts count.
            retry_unparsed: An ``unparsed`` verdict is not final.

        Returns:
            The vouched hashes and the settled paths.
        """
        statuses = final_statuses(retry_unparsed)
        marks = ",".join("?" * len(statuses))
        hashes: dict[str, str] = {}
        settled: set[str] = set()
        by_path = {s.path: s for s in stats}
        paths = list(by_path)
        for start in range(0, len(paths), _LOOKUP_CHUNK):
            chunk = paths[start : start + _LOOKUP_CHUNK]
            rows = self._query(
                f"SELECT {_COLUMNS}, shared = 0 AND final_config = ? AND final_status IN ({marks}) "
                f"FROM stat_index WHERE path IN ({','.join('?' * len(chunk))})",
                [config_hash, *statuses, *chunk],
            )
            for path, size, mtime_ns, ctime_ns, inode, sha256, hashed_at_ns, final in rows:  # `_trusted`, inline
                now = by_path[path]
                if (
                    mtime_ns < hashed_at_ns - RACY_NS
                    and size == now.size
                    and mtime_ns == now.mtime_ns
                    and ctime_ns == now.ctime_ns
                    and inode == now.inode
                ):
                    hashes[path] = sha256
                    if final:
                        settled.add(path)
        return KnownFiles(hashes, settled)

    def paths_with_hash(self, sha256: str) -> list[str]:
        """The paths of the index whose entry holds these bytes (vouched for or not).

        Args:
            sha256: The hash of a file's bytes.
        """
        return [str(r[0]) for r in self._query("SELECT path FROM stat_index WHERE sha256 = ?", (sha256,))]

    def remember_hashes(self, entries: Sequence[tuple[FileStat, str]], *, hashed_at_ns: int | None = None) -> None:
        """Record the hash of files just read, with the stat they had before the read (one transaction).

        Every entry whose bytes another path of the index also holds is marked ``shared`` (an
        entry replaced with new bytes starts unshared; one whose partner changed stays marked,
        which only costs a later run the quick path). A new entry held by no other path takes
        the most recent final verdict on its bytes, if any (``final_config``, ``final_status``).

        Args:
            entries: ``(stat taken before reading, sha256 of the bytes read)`` pairs.
            hashed_at_ns: When the files were read (default: now).
        """
        if not entries:
            return
        at = time.time_ns() if hashed_at_ns is None else hashed_at_ns
        shas = sorted({sha for _, sha in entries})
        with self._tx() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO stat_index (path, size, mtime_ns, ctime_ns, inode, sha256, hashed_at_ns) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(s.path, s.size, s.mtime_ns, s.ctime_ns, s.inode, sha, at) for s, sha in entries],
            )
            final = final_statuses()
            for start in range(0, len(shas), _LOOKUP_CHUNK):
                chunk = shas[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                conn.execute(
                    "UPDATE stat_index SET shared = 1, final_config = NULL, final_status = NULL "
                    "WHERE shared = 0 AND sha256 IN (SELECT sha256 FROM stat_index "
                    f"WHERE sha256 IN ({marks}) GROUP BY sha256 HAVING count(*) > 1)",
                    chunk,
                )
                conn.execute(
                    "UPDATE stat_index SET (final_config, final_status) = (SELECT config_hash, status FROM annotations "
                    f"WHERE sample_id = stat_index.sha256 AND status IN ({','.join('?' * len(final))}) "
                    f"ORDER BY id DESC LIMIT 1) WHERE sha256 IN ({marks}) AND shared = 0 AND final_config IS NULL",
                    [*final, *chunk],
                )

    def settle(self, conn: sqlite3.Connection, sample_id: str, config_hash: str, status: str) -> None:
        """Record a final verdict on a sample in the entry of the one path holding its bytes (inside a write).

        Called by `vhd.store.sqlite.Store.save_annotation` in its transaction, after the
        annotation is written; an entry of shared bytes is left as it is.
        """
        if status in final_statuses():
            conn.execute(
                "UPDATE stat_index SET final_config = ?, final_status = ? WHERE sha256 = ? AND shared = 0",
                (config_hash, status, sample_id),
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
