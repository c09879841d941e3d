"""The SQLite store: runs, samples, annotations with their full debate, and skipped files.

One file holds everything a report needs. It runs in WAL mode with ``synchronous=NORMAL``: a
committed annotation survives the process being killed at any moment, and every annotation is
written in one transaction together with its sample and turns, so a reader never sees an
annotation without its debate.

This module is a little long (about 460 lines) on purpose: `Store`'s opening, transactions and
writes are one unit; its reads, labelled sets, leases, curation and caches already live in their
own modules of `vhd.store`.

Example:
    >>> with Store("run.db") as store:  # doctest: +SKIP
    ...     run_id = store.start_run(config, config_hash, models, prompt_hash)
    ...     store.save_annotation(annotation, sample)
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Any

from vhd.errors import ConfigError, VhdError
from vhd.fileio import display_path, regular_file_problem
from vhd.records import Annotation, Kind, Role, Sample, Status
from vhd.redaction import redact, redact_command, redact_strings, redact_text
from vhd.store.batches import BatchJobs
from vhd.store.connection import Connection
from vhd.store.gallery import Gallery
from vhd.store.labelled_sets import LabelledSets
from vhd.store.leases import Leases
from vhd.store.migrations import apply_migrations
from vhd.store.policies import Policies
from vhd.store.reads import SAMPLE_FIELDS, AnnotationReads
from vhd.store.review_spans import ReviewSpans
from vhd.store.reviews import Reviews
from vhd.store.rows import (
    RunInfo,
    SkipInfo,
    dumps,
    run_from_row,
    sample_from_row,
    write_error,
)
from vhd.store.segments import VideoSegments, write_segments
from vhd.store.statindex import StatIndex
from vhd.version import version

_SAMPLE_COLS = "s.id, " + SAMPLE_FIELDS

PREFIX_MATCHES = 100
"""Most samples `Store.find_samples` returns for an id prefix."""


def open_store(path: str | os.PathLike[str]) -> Store:
    """Open an existing store, or fail in one line (a command reading a store never creates one).

    Raises:
        ConfigError: No file at ``path``, or it is not a vhd store.
    """
    if not Path(path).is_file():
        raise ConfigError(f"no store at {path}: create one with `vhd annotate PATH --store {path}`")
    return Store(path)


def _initialise(conn: sqlite3.Connection, label: str, timeout: float, path: Path | None) -> None:
    """Switch to WAL and bring the schema up to date (backing the store up first), waiting out other openers.

    SQLite does not call its busy handler where waiting could deadlock (two connections both
    upgrading a read lock on a fresh file), so several processes opening a brand-new store at
    once can get "database is locked" at once; the whole step is retried until ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            apply_migrations(conn, label=label, path=path)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


class Store(
    AnnotationReads, LabelledSets, Leases, StatIndex, Reviews, ReviewSpans, Gallery, BatchJobs, VideoSegments, Policies
):
    """A vhd store in one SQLite file.

    Writes are meant to come from one thread (the asyncio event loop) one at a time; every
    method is nevertheless guarded by a lock, so the object may be shared across threads.

    Where no file is yet, none is made until something is written: the writes (`start_run`,
    `save_annotation`, `upsert_sample`, `record_skip`, labelled sets, reviews, curation: every call that runs a
    write transaction) create the file and its folder; a read (`runs`, `iter_annotations`,
    `annotations_for`, `samples`, the gallery...: every other call) fails in one line
    (`vhd.errors.ConfigError`, "no store at typo.db"), so a mistyped path never answers as an
    empty store. ``create=True`` creates the file at once, for a caller that reads a store it is
    about to fill (an annotation run looks up what is already done).

    Args:
        path: The database file, or ``":memory:"``.
        timeout: Seconds to wait for another process holding the write lock.
        create: Create the file (and its folder) now when missing, instead of at the first write.

    Raises:
        ConfigError: The file cannot be opened or is not a vhd store.
        VhdError: The file was written by a newer vhd.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0, create: bool = False) -> None:
        label = str(path)
        memory = label == ":memory:"
        self.path = Path(label) if memory else Path(os.path.abspath(path))
        self._label = label
        self._timeout = timeout
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pending = False
        if not memory:
            problem = regular_file_problem(self.path)
            if problem is not None:
                hint = f"name a store file, e.g. {label}/vhd.db" if self.path.is_dir() else "name a store file"
                raise ConfigError(f"cannot open store {label}: {problem}; {hint}")
            if not create and not self.path.exists():
                self._pending = True  # made by the first write; a read before it fails (`conn`)
                return
        self._connect()

    def _connect(self) -> None:
        """Open (creating when missing) the file, switch it to WAL and migrate it."""
        label, timeout = self._label, self._timeout
        memory = label == ":memory:"
        if not memory:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the folder of store {label}: {exc}") from exc
        try:
            conn = sqlite3.connect(
                ":memory:" if memory else str(self.path),
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
                factory=Connection,
            )
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open store {label}: {exc}; check the path") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            _initialise(conn, label, timeout, None if memory else self.path)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise ConfigError(f"cannot use {label} as a vhd store ({exc}): pass another store path") from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._pending = False

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database (safe to call twice)."""
        with self._lock:
            self._pending = False
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def create(self) -> Store:
        """Make the store's file (and its folder) now if nothing has been written to it yet; returns the store.

        A call that fills a store it was handed (`vhd.curate.ingest.ingest` through `using_store`
        with ``create=True``) calls it first, so its own look-ups before the first write read an
        empty store rather than fail.
        """
        with self._lock:
            if self._pending:
                self._connect()
        return self

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def conn(self) -> sqlite3.Connection:
        """The open connection, for tests and read-only checks; vhd's own code uses the methods.

        Raises:
            ConfigError: No store file at the path yet (nothing was written): a read of a store
                that does not exist.
        """
        if self._pending:
            with self._lock:
                if self._pending and not self.path.is_file():
                    raise ConfigError(
                        f"no store at {self._label}: check the path, or create one with "
                        f"`vhd annotate PATH --store {self._label}`"
                    )
                if self._pending:  # another process made it since
                    self._connect()
        if self._conn is None:
            raise VhdError(f"store {self.path} is closed: open it again with Store(path)")
        return self._conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; a refused write raises `vhd.errors.StoreWriteError`.

        The first write to a store whose file does not exist yet creates it.
        """
        with self._lock:
            if self._pending:
                self._connect()
            conn = self.conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:  # SQLite rolls back by itself after some errors (full disk)
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.OperationalError):
                    raise write_error(self.path, exc) from exc
                raise

    def checkpoint(self, *, truncate: bool = False) -> None:
        """Copy the write-ahead log into the database so the log does not grow through a long run.

        Passive by default (never waits for readers); ``truncate`` also empties the log file,
        waiting up to the busy timeout for readers to finish. A checkpoint that cannot complete
        (a reader holds an old snapshot) is harmless: the next one catches up.
        """
        with self._lock:
            try:
                self.conn.execute(f"PRAGMA wal_checkpoint({'TRUNCATE' if truncate else 'PASSIVE'})").fetchall()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise write_error(self.path, exc) from exc

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            cur = self.conn.cursor()
            cur.row_factory = sqlite3.Row
            return cur.execute(sql, params).fetchall()

    def _tuples(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self.conn.execute(sql, params).fetchall()

    # -- runs ------------------------------------------------------------------------------

    def start_run(
        self,
        config: dict[str, Any],
        config_hash: str,
        models: dict[str, str],
        prompt_hash: str,
        command: str = "",
        policy_hash: str | None = None,
    ) -> str:
        """Record the start of a run.

        Args:
            config: The run's configuration (JSON-serialisable; other values stored as text); secrets
                (key-like entries, keys in URLs) are redacted.
            config_hash: Hash of everything that changes the debate's messages or decoding.
            models: Role name to ``backend:model`` spec.
            prompt_hash: Hash of the prompt templates.
            command: The command line; values of key/token/secret flags are redacted.
            policy_hash: The content hash of the policy the run uses, kept first with `save_policy`.

        Returns:
            The new run's id (uuid4 hex).
        """
        run_id = uuid.uuid4().hex
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO runs (id, config_json, config_hash, models_json, prompt_hash, "
                "vhd_version, command, started_at, policy_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    dumps(redact(config)),
                    config_hash,
                    dumps(models),
                    prompt_hash,
                    version(),
                    redact_command(command),
                    time.time(),
                    policy_hash,
                ),
            )
        return run_id

    def finish_run(self, run_id: str, summary: dict[str, Any]) -> None:
        """Record the end of a run and its summary (its strings through `vhd.redaction.redact_text`).

        Raises:
            VhdError: No such run.
        """
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE runs SET finished_at = ?, summary_json = ? WHERE id = ?",
                (time.time(), dumps(redact_strings(summary)), run_id),
            )
            if cur.rowcount == 0:
                raise VhdError(f"run {run_id} is not in store {self.path}: check the run id")

    def runs(self) -> list[RunInfo]:
        """Return every run, oldest first."""
        return [run_from_row(r) for r in self._query("SELECT * FROM runs ORDER BY started_at, rowid")]

    def latest_run(self) -> RunInfo | None:
        """Return the most recently started run, or None when there is none."""
        rows = self._query("SELECT * FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1")
        return run_from_row(rows[0]) if rows else None

    def record_skip(self, run_id: str | None, path: str | os.PathLike[str], reason: str) -> None:
        """Record a file a run could not use (unreadable, too large, duplicate, ...).

        A name that is not valid UTF-8 is stored with its bytes escaped (`vhd.fileio.display_path`).
        """
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO skips (run_id, path, reason, at) VALUES (?, ?, ?, ?)",
                (run_id, display_path(path), display_path(reason), time.time()),
            )

    def skips(self, run_id: str | None = None) -> list[SkipInfo]:
        """Return skipped files, oldest first, for one run or all runs."""
        sql = "SELECT run_id, path, reason, at FROM skips"
        rows = (
            self._query(sql + " WHERE run_id = ? ORDER BY id", (run_id,))
            if run_id
            else (self._query(sql + " ORDER BY id"))
        )
        return [SkipInfo(r["run_id"], r["path"], r["reason"], r["at"]) for r in rows]

    # -- samples ---------------------------------------------------------------------------

    def upsert_sample(self, sample: Sample) -> None:
        """Insert a sample, or update the stored one with the same id.

        The newest path wins; other fields keep their stored value when known and take the
        new one when unknown (None, no frames); metadata keys are merged, stored ones winning.
        """
        with self._tx() as conn:
            self._upsert(conn, sample)

    def remove_sample(self, sample_id: str) -> bool:
        """Mark a sample removed (it stays stored but leaves listings and exports).

        Returns:
            Whether a sample with that id exists.
        """
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE samples SET removed_at = COALESCE(removed_at, ?) WHERE id = ?",
                (time.time(), sample_id),
            )
            return cur.rowcount > 0

    def get_sample(self, sample_id: str) -> Sample | None:
        """Return the sample with this id, or None."""
        rows = self._query(f"SELECT {_SAMPLE_COLS} FROM samples s WHERE s.id = ?", (sample_id,))
        return sample_from_row(rows[0]) if rows else None

    def find_samples(self, ref: str) -> list[Sample]:
        """Find samples by full id, id prefix (6 characters or more), or path.

        A path matches as given made absolute, or fully resolved. Several results mean the
        reference is ambiguous (a short prefix, or a path whose content changed).

        Args:
            ref: An id, an id prefix or a path.

        Returns:
            Matching samples (removed ones included), id matches first (at most `PREFIX_MATCHES`
            of them: a short prefix of a large store is ambiguous either way).
        """
        found: dict[str, Sample] = {}
        key = ref.strip().lower()
        if len(key) >= 6 and re.fullmatch(r"[0-9a-f]+", key):
            rows = self._query(  # a range on the primary key, not a scan: ids are lower-case hex
                f"SELECT {_SAMPLE_COLS} FROM samples s WHERE s.id >= ? AND s.id < ? ORDER BY s.id LIMIT ?",
                (key, key + "g", PREFIX_MATCHES),
            )
            found.update((r["id"], sample_from_row(r)) for r in rows)
        candidates = {ref, os.path.abspath(ref)}
        with suppress(OSError, RuntimeError):
            candidates.add(str(Path(ref).resolve()))
        marks = ",".join("?" * len(candidates))
        rows = self._query(
            f"SELECT {_SAMPLE_COLS} FROM samples s WHERE s.path IN ({marks}) ORDER BY s.rowid",
            sorted(candidates),
        )
        for r in rows:
            found.setdefault(r["id"], sample_from_row(r))
        return list(found.values())

    def find_samples_named(self, name: str) -> list[Sample]:
        """Find samples whose file is called ``name`` (the last part of the path), in any folder.

        Reads every path (no index covers a path's end): for references that matched nothing
        else (`find_samples`). At most `PREFIX_MATCHES` results, in the order they were added.
        """
        if not name or "/" in name or os.sep in name:
            return []
        rows = self._query(
            f"SELECT {_SAMPLE_COLS} FROM samples s WHERE substr(s.path, -?) = ? ORDER BY s.rowid LIMIT ?",
            (len(name) + 1, "/" + name, PREFIX_MATCHES),
        )
        return [sample_from_row(r) for r in rows]

    def _upsert(self, conn: sqlite3.Connection, sample: Sample) -> None:
        row = conn.execute(
            "SELECT source, keyword, generator, split, label, frames_json, meta_json FROM samples WHERE id = ?",
            (sample.id,),
        ).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO samples (id, kind, path, source, keyword, generator, split, label, "
                "frames_json, meta_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sample.id,
                    Kind(sample.kind).value,
                    display_path(sample.path),
                    sample.source,
                    sample.keyword,
                    sample.generator,
                    sample.split,
                    None if sample.harmful is None else int(sample.harmful),
                    dumps(list(sample.frames)),
                    dumps(sample.meta),
                ),
            )
            return
        source, keyword, generator, split, label, frames_json, meta_json = row
        frames = json.loads(frames_json) or list(sample.frames)
        meta = {**sample.meta, **json.loads(meta_json)}
        if label is None and sample.harmful is not None:
            label = int(sample.harmful)
        conn.execute(
            "UPDATE samples SET path = ?, source = ?, keyword = ?, generator = ?, split = ?, "
            "label = ?, frames_json = ?, meta_json = ? WHERE id = ?",
            (
                display_path(sample.path),
                source if source is not None else sample.source,
                keyword if keyword is not None else sample.keyword,
                generator if generator is not None else sample.generator,
                split if split is not None else sample.split,
                label,
                dumps(frames),
                dumps(meta),
                sample.id,
            ),
        )

    # -- annotations -----------------------------------------------------------------------

    def save_annotation(self, ann: Annotation, sample: Sample | None = None) -> None:
        """Write one annotation with all its turns (and its sample) in one transaction.

        A stored annotation for the same sample and config hash is replaced, and the run's lease
        on the sample (`vhd.store.leases`) is released. ``harmful`` is
        stored as NULL for unparsed and error results. The turns' texts, the reason and the error
        are stored through `vhd.redaction.redact_text` (a reply may echo a key).

        Args:
            ann: The annotation.
            sample: The sample, upserted first; needed unless it is already stored.

        Raises:
            VhdError: The run or the sample is not in the store.
            StoreWriteError: The write failed (full disk...); the store keeps what it had.
        """
        v = ann.verdict
        status = Status(v.status)
        harmful: int | None = None
        if status in (Status.OK, Status.REFUSED) and v.harmful is not None:
            harmful = int(bool(v.harmful))
        with self._tx() as conn:
            if sample is not None:
                if sample.id != ann.sample_id:
                    raise VhdError(
                        f"annotation is for sample {ann.sample_id[:12]} but sample "
                        f"{sample.id[:12]} was given: pass the matching sample"
                    )
                self._upsert(conn, sample)
            elif conn.execute("SELECT 1 FROM samples WHERE id = ?", (ann.sample_id,)).fetchone():
                pass
            else:
                raise VhdError(f"sample {ann.sample_id[:12]} is not in the store: pass the Sample to save_annotation")
            if not conn.execute("SELECT 1 FROM runs WHERE id = ?", (ann.run_id,)).fetchone():
                raise VhdError(f"run {ann.run_id} is not in the store: call start_run first")
            conn.execute(
                "DELETE FROM annotations WHERE sample_id = ? AND config_hash = ?",
                (ann.sample_id, ann.config_hash),
            )
            conn.execute(  # the run's lease on the sample, if any, ends with its annotation
                "DELETE FROM leases WHERE sample_id = ? AND config_hash = ? AND run_id = ?",
                (ann.sample_id, ann.config_hash, ann.run_id),
            )
            cur = conn.execute(
                "INSERT INTO annotations (sample_id, run_id, config_hash, status, harmful, "
                "reason, categories_json, score, refused, prompt_tokens, completion_tokens, "
                "calls, cost, error, started_at, finished_at, decided_by, severity) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    ann.sample_id,
                    ann.run_id,
                    ann.config_hash,
                    status.value,
                    harmful,
                    redact_text(v.reason or ""),
                    dumps(list(v.categories)),
                    v.score,
                    int(v.refused),
                    ann.usage.prompt_tokens,
                    ann.usage.completion_tokens,
                    ann.usage.calls,
                    ann.usage.cost,
                    None if ann.error is None else redact_text(ann.error),
                    ann.started_at,
                    ann.finished_at,
                    ann.decided_by,
                    v.severity if harmful == 1 else None,  # a level only with a harmful verdict
                ),
            )
            self.settle(conn, ann.sample_id, ann.config_hash, status.value)  # the stat index's cached verdict
            if v.segments:  # a segmented video: its segments, final (`vhd.store.segments`)
                write_segments(conn, ann.sample_id, ann.config_hash, ann.run_id, v.segments)
            conn.executemany(
                "INSERT INTO turns (annotation_id, idx, role, round, text, prompt_tokens, "
                "completion_tokens, latency_s, refused, model, finish_reason, reasoning_tokens) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        cur.lastrowid,
                        i,
                        Role(t.role).value,
                        t.round,
                        redact_text(t.text),
                        t.prompt_tokens,
                        t.completion_tokens,
                        t.latency_s,
                        int(t.refused),
                        t.model,
                        t.finish_reason,
                        t.reasoning_tokens,
                    )
                    for i, t in enumerate(ann.turns)
                ],
            )


StoreLike = Store | str | os.PathLike[str]
"""What every function taking a store accepts: an open `Store`, or the path of one."""


@contextmanager
def using_store(store: StoreLike, *, create: bool = False) -> Iterator[Store]:
    """Yield ``store`` itself (left open: the caller owns it), or the store at a path, closed after.

    A path must name an existing store (`open_store`): a function reading a store never creates
    one; a function that writes one passes ``create=True`` (an open `Store` whose file is not made
    yet is then made: `Store.create`).

    Raises:
        ConfigError: A path where no store file is.
    """
    if isinstance(store, Store):
        yield store.create() if create else store
        return
    with Store(store, create=True) if create else open_store(store) as db:
        yield db


def store_path(store: StoreLike) -> Path:
    """The file of a store given as an open `Store` or as its path (for calls that open it themselves)."""
    return store.path if isinstance(store, Store) else Path(store)
