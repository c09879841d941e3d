"""A reviewer's time spans on a video (table ``review_spans``, the review app's segment review).

On a segmented video's page a reviewer confirms or corrects each segment of the annotation (the
newest decision of a reviewer on a segment wins) and marks harmful spans the model missed (a
start and an end in seconds), which they can remove again. The harmful spans of every reviewer,
confirmed segments included, are human labels: `human_spans` lists them, and they are written as
the ``segments`` of the sample's row in the labelled set the reviews settle into (rows imported
from a file keep their own spans). A sample with no harmful span keeps ``segments`` NULL.

`ReviewSpans` is mixed into `vhd.store.sqlite.Store`, which provides ``_tx`` and ``_query``.
"""

from __future__ import annotations

import abc
import json
import math
import sqlite3
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from vhd.errors import ConfigError
from vhd.records import Segment

REVIEW_SOURCE = "vhd serve"
"""``source_file`` of labelled-set rows that reviews settled (others come from imported files)."""

HUMAN = "human"
"""``decided_by`` of a human span (`vhd.records.Segment`)."""

_COLS = "id, set_name, sample_id, reviewer, start_s, end_s, harmful, segment_idx, config_hash, at"


@dataclass(frozen=True)
class ReviewSpanRow:
    """One reviewer's span on a video.

    Attributes:
        id: Row id (what a removal names).
        set_name: The labelled set it is for.
        sample_id: The video.
        reviewer: Who marked it.
        start_s: Start in seconds.
        end_s: End in seconds (greater than ``start_s``).
        harmful: The reviewer's decision on the span.
        segment_idx: The annotation's segment it decides (position in time order); None for a
            span marked by hand.
        config_hash: The configuration whose segments were shown (None for a marked span).
        at: When (Unix time).
    """

    id: int
    set_name: str
    sample_id: str
    reviewer: str
    start_s: float
    end_s: float
    harmful: bool
    segment_idx: int | None = None
    config_hash: str | None = None
    at: float = 0.0


def _row(r: Sequence[Any]) -> ReviewSpanRow:
    return ReviewSpanRow(
        id=int(r[0]),
        set_name=str(r[1]),
        sample_id=str(r[2]),
        reviewer=str(r[3]),
        start_s=float(r[4]),
        end_s=float(r[5]),
        harmful=bool(r[6]),
        segment_idx=None if r[7] is None else int(r[7]),
        config_hash=None if r[8] is None else str(r[8]),
        at=float(r[9]),
    )


def spans_json(conn: sqlite3.Connection, set_name: str, sample_id: str) -> str | None:
    """The harmful human spans of a sample as the labelled set's ``segments_json`` (None when there are none)."""
    rows = conn.execute(
        f"SELECT {_COLS} FROM review_spans WHERE set_name = ? AND sample_id = ? AND removed_at IS NULL "
        "AND harmful = 1 ORDER BY start_s, end_s, id",
        (set_name, sample_id),
    ).fetchall()
    spans = _segments([_row(r) for r in rows])
    return json.dumps([s.to_dict() for s in spans]) if spans else None


def _segments(rows: Sequence[ReviewSpanRow]) -> list[Segment]:
    """Harmful span rows as segments, one per distinct ``(start, end)``, with who marked each."""
    by_span: dict[tuple[float, float], list[ReviewSpanRow]] = {}
    for r in rows:
        by_span.setdefault((r.start_s, r.end_s), []).append(r)
    out = []
    for (start, end), group in sorted(by_span.items()):
        confirmed = any(r.segment_idx is not None for r in group)
        who = ", ".join(sorted({r.reviewer for r in group}))
        reason = f"{'confirmed segment' if confirmed else 'marked span'} ({who})"
        out.append(Segment(start_s=start, end_s=end, harmful=True, reason=reason, decided_by=HUMAN))
    return out


class ReviewSpans(abc.ABC):
    """Writes and reads of reviewers' spans on videos."""

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction."""

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read query."""

    def add_review_span(
        self,
        set_name: str,
        sample_id: str,
        reviewer: str,
        start_s: float,
        end_s: float,
        *,
        harmful: bool = True,
        segment_idx: int | None = None,
        config_hash: str | None = None,
    ) -> int:
        """Record a reviewer's span on a video and update the sample's label spans, in one transaction.

        Args:
            set_name: The labelled set.
            sample_id: A video in the store, not removed.
            reviewer: Who marks it.
            start_s: Start in seconds (finite, 0 or more).
            end_s: End in seconds (finite, greater than ``start_s``).
            harmful: The decision (a marked span is harmful; a segment may be corrected to not harmful).
            segment_idx: The annotation's segment this decides; the reviewer's earlier decision on it
                is replaced.
            config_hash: The configuration whose segment it is.

        Returns:
            The span's id.

        Raises:
            ConfigError: The sample is missing, removed or not a video, or the span is empty or negative.
        """
        if not (math.isfinite(start_s) and math.isfinite(end_s)) or start_s < 0:
            raise ConfigError(f"span {start_s}-{end_s} s is not a time in the video: give start >= 0 and a finite end")
        if end_s <= start_s:
            raise ConfigError(
                f"span end {end_s:g} s is not after its start {start_s:g} s: mark the start first, then the end"
            )
        with self._tx() as conn:
            row = conn.execute("SELECT removed_at, kind FROM samples WHERE id = ?", (sample_id,)).fetchone()
            if row is None or row[0] is not None:
                state = "was removed" if row is not None else "is not in the store"
                raise ConfigError(f"sample {sample_id[:12]} {state}: reload the gallery and pick another")
            if row[1] != "video":
                raise ConfigError(f"sample {sample_id[:12]} is an {row[1]}: time spans are for videos only")
            now = time.time()
            if segment_idx is not None:
                conn.execute(
                    "UPDATE review_spans SET removed_at = ? WHERE set_name = ? AND sample_id = ? AND reviewer = ? "
                    "AND segment_idx = ? AND config_hash IS ? AND removed_at IS NULL",
                    (now, set_name, sample_id, reviewer, segment_idx, config_hash),
                )
            cur = conn.execute(
                "INSERT INTO review_spans (set_name, sample_id, reviewer, start_s, end_s, harmful, segment_idx, "
                "config_hash, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (set_name, sample_id, reviewer, start_s, end_s, int(harmful), segment_idx, config_hash, now),
            )
            self._relabel(conn, set_name, sample_id)
            return int(cur.lastrowid or 0)

    def remove_review_span(self, set_name: str, sample_id: str, span_id: int) -> bool:
        """Remove a span (kept, marked removed) and update the sample's label spans; False when there was none."""
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE review_spans SET removed_at = ? WHERE id = ? AND set_name = ? AND sample_id = ? "
                "AND removed_at IS NULL",
                (time.time(), span_id, set_name, sample_id),
            )
            if not cur.rowcount:
                return False
            self._relabel(conn, set_name, sample_id)
            return True

    def review_spans(self, set_name: str, sample_id: str) -> list[ReviewSpanRow]:
        """The current spans on a video (every reviewer's, not removed), in time order."""
        rows = self._query(
            f"SELECT {_COLS} FROM review_spans WHERE set_name = ? AND sample_id = ? AND removed_at IS NULL "
            "ORDER BY start_s, end_s, id",
            (set_name, sample_id),
        )
        return [_row(r) for r in rows]

    def human_spans(self, set_name: str, sample_id: str) -> list[Segment]:
        """The harmful human spans of a video (confirmed segments and marked spans), as segments in time order."""
        return _segments([r for r in self.review_spans(set_name, sample_id) if r.harmful])

    @staticmethod
    def _relabel(conn: sqlite3.Connection, set_name: str, sample_id: str) -> None:
        """Write the spans into the sample's review-made label, when it has one."""
        conn.execute(
            "UPDATE labelled_sets SET segments_json = ? WHERE name = ? AND sample_id = ? AND source_file = ?",
            (spans_json(conn, set_name, sample_id), set_name, sample_id, REVIEW_SOURCE),
        )
