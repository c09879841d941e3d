"""A video's segments in the store (table ``segments``, ``vhd annotate --segments``).

One row per segment of a sample under a configuration hash, keyed like its annotation
(``sample_id``, ``config_hash``) plus the segment's position. A segmented run writes each row as
soon as the segment is decided (`VideoSegments.save_segment`), so a run killed in the middle of a
long video resumes from the segments it had finished (`VideoSegments.stored_segments`); the
video's annotation, written last, writes them all again as final (`write_segments`), and reads of
annotations fill `vhd.records.Verdict.segments` from here (`read_segments`).
"""

from __future__ import annotations

import abc
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from itertools import groupby
from typing import Any

from vhd.records import Annotation, Segment
from vhd.redaction import redact_text
from vhd.store.rows import dumps, loads

_COLUMNS = "idx, start_s, end_s, harmful, score, reason, categories_json, severity, decided_by"
_LOOKUP = 400
"""Samples whose segments one read asks for (SQLite allows 32,766 parameters)."""


def _row(sample_id: str, config_hash: str, run_id: str | None, idx: int, seg: Segment, calls: int) -> tuple[Any, ...]:
    return (
        sample_id,
        config_hash,
        idx,
        run_id,
        seg.start_s,
        seg.end_s,
        None if seg.harmful is None else int(seg.harmful),
        seg.score,
        redact_text(seg.reason or ""),
        dumps(list(seg.categories)),
        seg.severity,
        seg.decided_by,
        calls,
    )


_INSERT = (
    "INSERT OR REPLACE INTO segments (sample_id, config_hash, idx, run_id, start_s, end_s, harmful, score, "
    "reason, categories_json, severity, decided_by, calls) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def write_segments(
    conn: sqlite3.Connection, sample_id: str, config_hash: str, run_id: str | None, segments: Sequence[Segment]
) -> None:
    """Replace a sample's segment rows under a configuration with ``segments`` (in a caller's transaction).

    The calls each row recorded while the run went (`VideoSegments.save_segment`) are kept.
    """
    calls = {
        int(r[0]): int(r[1])
        for r in conn.execute(
            "SELECT idx, calls FROM segments WHERE sample_id = ? AND config_hash = ?", (sample_id, config_hash)
        )
    }
    conn.execute("DELETE FROM segments WHERE sample_id = ? AND config_hash = ?", (sample_id, config_hash))
    conn.executemany(
        _INSERT, [_row(sample_id, config_hash, run_id, i, s, calls.get(i, 0)) for i, s in enumerate(segments)]
    )


def _segment(r: Sequence[Any]) -> Segment:
    return Segment(
        start_s=float(r[1]),
        end_s=float(r[2]),
        harmful=None if r[3] is None else bool(r[3]),
        score=r[4],
        reason=r[5],
        categories=loads(r[6]),
        severity=r[7],
        decided_by=r[8],
    )


def read_segments(
    tuples: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]], keys: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], list[Segment]]:
    """The segments of each ``(sample_id, config_hash)`` in time order; keys without any are absent.

    Args:
        tuples: A read query returning plain tuples (the store's ``_tuples``).
        keys: The annotations' ``(sample_id, config_hash)`` pairs.
    """
    wanted = set(keys)
    out: dict[tuple[str, str], list[Segment]] = {}
    ids = sorted({sid for sid, _ in wanted})
    for start in range(0, len(ids), _LOOKUP):
        chunk = ids[start : start + _LOOKUP]
        marks = ",".join("?" * len(chunk))
        rows = tuples(
            f"SELECT sample_id, config_hash, {_COLUMNS} FROM segments WHERE sample_id IN ({marks}) "
            "ORDER BY sample_id, config_hash, idx",
            chunk,
        )
        for key, group in groupby(rows, lambda r: (str(r[0]), str(r[1]))):
            if key in wanted:
                out[key] = [_segment(r[2:]) for r in group]
    return out


class VideoSegments(abc.ABC):
    """Writes and reads of a video's segments, mixed into `vhd.store.sqlite.Store`."""

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction."""

    @abc.abstractmethod
    def _tuples(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read query; rows as plain tuples."""

    def save_segment(
        self, sample_id: str, config_hash: str, run_id: str | None, idx: int, segment: Segment, calls: int = 0
    ) -> None:
        """Write one decided segment at once (what a resumed run keeps).

        Args:
            sample_id: The video's content hash.
            config_hash: The configuration it was judged under.
            run_id: The run that judged it.
            idx: Its 0-based position in the video.
            segment: Its span and verdict.
            calls: Model calls spent on it.

        Raises:
            StoreWriteError: The write failed.
        """
        with self._tx() as conn:
            conn.execute(_INSERT, _row(sample_id, config_hash, run_id, idx, segment, calls))

    def stored_segments(self, sample_id: str, config_hash: str) -> dict[int, Segment]:
        """The segments stored for a video under a configuration, by position (a resumed run skips them)."""
        rows = self._tuples(
            f"SELECT {_COLUMNS} FROM segments WHERE sample_id = ? AND config_hash = ? ORDER BY idx",
            (sample_id, config_hash),
        )
        return {int(r[0]): _segment(r) for r in rows}

    def stored_segment_calls(self, sample_id: str, config_hash: str) -> dict[int, int]:
        """The model calls recorded on each of a video's stored segments, by position."""
        rows = self._tuples(
            "SELECT idx, calls FROM segments WHERE sample_id = ? AND config_hash = ?", (sample_id, config_hash)
        )
        return {int(r[0]): int(r[1] or 0) for r in rows}

    def segment_calls(self, sample_id: str, config_hash: str) -> int:
        """Model calls recorded on a video's stored segments."""
        rows = self._tuples(
            "SELECT COALESCE(SUM(calls), 0) FROM segments WHERE sample_id = ? AND config_hash = ?",
            (sample_id, config_hash),
        )
        return int(rows[0][0])


def with_segments(
    tuples: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]], *annotations: Annotation
) -> tuple[Annotation, ...]:
    """Fill each annotation's `vhd.records.Verdict.segments` from the store; returns them."""
    found = read_segments(tuples, [(a.sample_id, a.config_hash) for a in annotations])
    for ann in annotations:
        ann.verdict.segments = found.get((ann.sample_id, ann.config_hash), [])
    return annotations


def page_segments(
    tuples: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]], rows: Sequence[Sequence[Any]]
) -> dict[tuple[str, str], list[Segment]]:
    """`read_segments` for raw annotation rows (sample id and configuration hash at positions 1 and 3)."""
    return read_segments(tuples, [(str(r[1]), str(r[3])) for r in rows])
