"""People's reviews of samples (tables ``reviews`` and ``review_state``), settled into labelled sets.

`Reviews` is mixed into `vhd.store.sqlite.Store`, which provides ``_tx`` and ``_query``. A review
is one person's decision on one sample, kept for ever (an undo marks it ``undone_at``): many
reviews of the same sample, from several browser tabs or several people, never overwrite one
another. A reviewer's *current* review of a sample is their newest one not undone.

After every write the sample is *settled* in the same transaction: ``review_state`` keeps its
count of current reviews and harmful votes (what the review app filters on and what the
agreement report reads), and the labelled set of the same name gets the sample's label once
``k`` reviewers agree (``k`` = reviews asked per sample) or an adjudicator decided. A review-made
row (``source_file`` ``vhd serve``) leaves the labelled set again when an undo takes its
agreement away.

Example:
    >>> with Store("run.db") as store:  # doctest: +SKIP
    ...     rid = store.add_review("review", sample_id, "alice", harmful=True, categories=["Violence"])
    ...     store.undo_review("review", "alice")
"""

from __future__ import annotations

import abc
import json
import sqlite3
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError
from vhd.store.review_spans import REVIEW_SOURCE, spans_json

BATCH_MAX = 1000
"""Most samples one bulk label (`Reviews.add_reviews`) may hold."""

_BATCH = (
    "SELECT {cols} FROM reviews WHERE set_name = ? AND reviewer = ? AND id > ? AND id <= ? AND at = ? "
    "AND undone_at IS NULL ORDER BY id DESC"
)
"""A batch's reviews: one transaction gives them consecutive ids, so the range of ids bounds the look-up."""

_COLS = "id, set_name, sample_id, reviewer, harmful, categories_json, note, adjudication, at, severity"


@dataclass(frozen=True)
class ReviewRow:
    """One review.

    Attributes:
        id: Row id (what an undo names).
        set_name: The labelled set it is for.
        sample_id: The sample.
        reviewer: Who decided.
        harmful: The decision.
        categories: Harm categories the reviewer ticked (may be empty).
        note: Free text.
        adjudication: Whether it settles a disagreement between reviewers.
        at: When (Unix time).
        severity: The policy's severity level the reviewer gave a harmful sample, if any.
    """

    id: int
    set_name: str
    sample_id: str
    reviewer: str
    harmful: bool
    categories: list[str] = field(default_factory=list)
    note: str = ""
    adjudication: bool = False
    at: float = 0.0
    severity: str | None = None


def _review(r: Sequence[Any]) -> ReviewRow:
    return ReviewRow(
        id=int(r[0]),
        set_name=str(r[1]),
        sample_id=str(r[2]),
        reviewer=str(r[3]),
        harmful=bool(r[4]),
        categories=list(json.loads(r[5] or "[]")),
        note=str(r[6] or ""),
        adjudication=bool(r[7]),
        at=float(r[8]),
        severity=None if len(r) < 10 or r[9] is None else str(r[9]),
    )


@dataclass(frozen=True)
class RevealRow:
    """One reveal of a sample's clear media in the review app.

    Attributes:
        set_name: The labelled set being reviewed.
        sample_id: The sample.
        reviewer: Who saw it.
        seconds: How long it was to stay clear (None: until the page was left).
        at: When (Unix time).
    """

    set_name: str
    sample_id: str
    reviewer: str
    seconds: int | None
    at: float


def _reveal(r: Sequence[Any]) -> RevealRow:
    return RevealRow(str(r[0]), str(r[1]), str(r[2]), None if r[3] is None else int(r[3]), float(r[4]))


def _current(rows: Sequence[ReviewRow]) -> tuple[list[ReviewRow], ReviewRow | None]:
    """Each reviewer's newest review (``rows`` oldest first), and the newest adjudication."""
    latest: dict[str, ReviewRow] = {}
    verdict: ReviewRow | None = None
    for r in rows:
        if r.adjudication:
            verdict = r
        else:
            latest[r.reviewer] = r
    return sorted(latest.values(), key=lambda r: r.id), verdict


class Reviews(abc.ABC):
    """Writes and reads of reviews, and their settling into labelled sets."""

    path: Path

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction."""

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read query."""

    def add_review(
        self,
        set_name: str,
        sample_id: str,
        reviewer: str,
        *,
        harmful: bool,
        categories: Sequence[str] = (),
        note: str = "",
        adjudication: bool = False,
        reviews_per_sample: int = 1,
        severity: str | None = None,
    ) -> int:
        """Record one review and settle the sample, in one transaction.

        Args:
            set_name: The labelled set (checked by the caller, e.g. `vhd.labels.sets.check_set_name`).
            sample_id: A sample in the store, not removed.
            reviewer: Who decides.
            harmful: The decision.
            categories: Harm categories (names).
            note: Free text.
            adjudication: The decision settles the sample whatever the reviewers said.
            reviews_per_sample: Reviewers who must agree before the sample gets a label.
            severity: The severity level the reviewer gave (a harmful review only; the caller checks
                it is on the policy's scale).

        Returns:
            The review's id.

        Raises:
            ConfigError: The sample is not in the store or was removed.
        """
        with self._tx() as conn:
            row = conn.execute("SELECT removed_at FROM samples WHERE id = ?", (sample_id,)).fetchone()
            if row is None or row[0] is not None:
                state = "was removed" if row is not None else "is not in the store"
                raise ConfigError(f"sample {sample_id[:12]} {state}: reload the gallery and pick another")
            cur = conn.execute(
                "INSERT INTO reviews (set_name, sample_id, reviewer, harmful, categories_json, note, adjudication, at, "
                "severity) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    set_name,
                    sample_id,
                    reviewer,
                    int(harmful),
                    json.dumps(sorted(set(categories))),
                    note,
                    int(adjudication),
                    time.time(),
                    severity if harmful else None,
                ),
            )
            self._settle(conn, set_name, sample_id, reviews_per_sample)
            return int(cur.lastrowid or 0)

    def add_reviews(
        self,
        set_name: str,
        sample_ids: Sequence[str],
        reviewer: str,
        *,
        harmful: bool,
        categories: Sequence[str] = (),
        note: str = "",
        reviews_per_sample: int = 1,
    ) -> tuple[list[int], list[tuple[str, str]]]:
        """Record the same review of several samples at once (a bulk label), in one transaction.

        The reviews share one time stamp: they are one *batch*, and `undo_review` takes a batch back
        whole. A sample that is not in the store (or was removed) is skipped with its reason; the others
        are recorded. Repeated ids count once.

        Returns:
            ``(review ids, skipped)``: the new reviews' ids, and ``(sample id, reason)`` for each skipped one.

        Raises:
            ConfigError: More than `BATCH_MAX` samples.
        """
        if len(sample_ids) > BATCH_MAX:
            raise ConfigError(f"{len(sample_ids)} samples in one bulk label: label at most {BATCH_MAX} at once")
        ids: list[int] = []
        skipped: list[tuple[str, str]] = []
        at = time.time()
        with self._tx() as conn:
            for sample_id in dict.fromkeys(sample_ids):
                row = conn.execute("SELECT removed_at FROM samples WHERE id = ?", (sample_id,)).fetchone()
                if row is None or row[0] is not None:
                    skipped.append((sample_id, "was removed" if row is not None else "is not in the store"))
                    continue
                cur = conn.execute(
                    "INSERT INTO reviews (set_name, sample_id, reviewer, harmful, categories_json, note, "
                    "adjudication, at) VALUES (?, ?, ?, ?, ?, ?, 0, ?)",
                    (set_name, sample_id, reviewer, int(harmful), json.dumps(sorted(set(categories))), note, at),
                )
                ids.append(int(cur.lastrowid or 0))
                self._settle(conn, set_name, sample_id, reviews_per_sample)
        return ids, skipped

    def undo_review(
        self, set_name: str, reviewer: str, review_id: int | None = None, *, reviews_per_sample: int = 1
    ) -> ReviewRow | None:
        """Undo a reviewer's review (the given one, or their newest one not undone) and settle its sample.

        A review of a bulk label (`add_reviews`) is undone with the rest of its batch.

        Returns:
            The review undone (the newest of a batch); None when the reviewer has nothing (or not that
            review) to undo.
        """
        with self._tx() as conn:
            sql = f"SELECT {_COLS} FROM reviews WHERE set_name = ? AND reviewer = ? AND undone_at IS NULL"
            params: list[Any] = [set_name, reviewer]
            if review_id is not None:
                sql += " AND id = ?"
                params.append(review_id)
            row = conn.execute(sql + " ORDER BY id DESC LIMIT 1", params).fetchone()
            if row is None:
                return None
            review = _review(row)
            batch = conn.execute(
                _BATCH.format(cols="id, sample_id"),
                (set_name, reviewer, review.id - BATCH_MAX, review.id, review.at),
            ).fetchall()
            now = time.time()
            for rid, sample_id in batch:
                conn.execute("UPDATE reviews SET undone_at = ? WHERE id = ?", (now, rid))
                self._settle(conn, set_name, str(sample_id), reviews_per_sample)
            return review

    def last_review(self, set_name: str, reviewer: str) -> ReviewRow | None:
        """The reviewer's newest review not undone in this set, or None."""
        batch = self.last_batch(set_name, reviewer)
        return batch[0] if batch else None

    def last_batch(self, set_name: str, reviewer: str) -> list[ReviewRow]:
        """What an undo takes back: the reviewer's newest review not undone, with the rest of its batch.

        Newest first; one review unless it came from a bulk label (`add_reviews`); empty when there is none.
        """
        rows = self._query(
            f"SELECT {_COLS} FROM reviews WHERE set_name = ? AND reviewer = ? AND undone_at IS NULL "
            "ORDER BY id DESC LIMIT 1",
            (set_name, reviewer),
        )
        if not rows:
            return []
        newest = _review(rows[0])
        rows = self._query(_BATCH.format(cols=_COLS), (set_name, reviewer, newest.id - BATCH_MAX, newest.id, newest.at))
        return [_review(r) for r in rows]

    def sample_reviews(self, set_name: str, sample_id: str) -> list[ReviewRow]:
        """Every review of a sample in this set that is not undone, oldest first."""
        rows = self._query(
            f"SELECT {_COLS} FROM reviews WHERE set_name = ? AND sample_id = ? AND undone_at IS NULL ORDER BY id",
            (set_name, sample_id),
        )
        return [_review(r) for r in rows]

    def add_reveal(self, set_name: str, sample_id: str, reviewer: str, *, seconds: int | None = None) -> int:
        """Record that a reviewer revealed a sample's clear media (the exposure audit trail).

        Args:
            set_name: The labelled set being reviewed.
            sample_id: The sample.
            reviewer: Who saw it.
            seconds: How long the reveal was to last (None: until the page was left).

        Returns:
            The row id.
        """
        with self._tx() as conn:
            cur = conn.execute(
                "INSERT INTO reveals (set_name, sample_id, reviewer, seconds, at) VALUES (?, ?, ?, ?, ?)",
                (set_name, sample_id, reviewer, seconds, time.time()),
            )
            return int(cur.lastrowid or 0)

    def sample_reveals(self, sample_id: str) -> list[RevealRow]:
        """Every reveal of a sample, oldest first: who saw it, when, for how long."""
        rows = self._query(
            "SELECT set_name, sample_id, reviewer, seconds, at FROM reveals WHERE sample_id = ? ORDER BY id",
            (sample_id,),
        )
        return [_reveal(r) for r in rows]

    def reveal_count(self, reviewer: str, *, since: float) -> int:
        """How many reveals a reviewer made since a time (Unix seconds)."""
        rows = self._query("SELECT COUNT(*) FROM reveals WHERE reviewer = ? AND at >= ?", (reviewer, since))
        return int(rows[0][0])

    def reveals_per_hour(self, reviewer: str, *, since: float) -> list[tuple[float, int]]:
        """A reviewer's reveals per clock hour since a time: ``(hour start, count)``, oldest first, busy hours only."""
        rows = self._query(
            "SELECT CAST(at / 3600 AS INTEGER) * 3600 AS hour, COUNT(*) FROM reveals "
            "WHERE reviewer = ? AND at >= ? GROUP BY hour ORDER BY hour",
            (reviewer, since),
        )
        return [(float(r[0]), int(r[1])) for r in rows]

    def labelled_set_reviewers(self, set_name: str) -> dict[str, str]:
        """Who labelled each sample of a labelled set (empty for imported rows), by sample id."""
        rows = self._query("SELECT sample_id, reviewer FROM labelled_sets WHERE name = ?", (set_name,))
        return {str(r[0]): str(r[1]) for r in rows}

    def agreement_counts(self, set_name: str) -> dict[tuple[int, int], int]:
        """The inputs of an agreement statistic: how many samples got ``n`` current reviews with ``yes`` harmful.

        Only samples with two reviews or more count; the key is ``(yes, n)``, the value the number of
        such samples (a few keys whatever the store's size).
        """
        rows = self._query(
            "SELECT rs.harmful_votes, rs.reviews, COUNT(*) FROM review_state rs JOIN samples s ON s.id = rs.sample_id "
            "WHERE rs.set_name = ? AND rs.reviews >= 2 AND s.removed_at IS NULL GROUP BY 1, 2",
            (set_name,),
        )
        return {(int(r[0]), int(r[1])): int(r[2]) for r in rows}

    def review_total(self, *, queue: bool = False) -> int:
        """Samples to review: every sample not removed (or the loaded review queue's); a full count, cache it."""
        join = " JOIN temp.review_queue q ON q.sample_id = s.id" if queue else ""
        return int(self._query(f"SELECT COUNT(*) FROM samples s{join} WHERE s.removed_at IS NULL")[0][0])

    def review_progress(self, set_name: str, *, queue: bool = False, total: int | None = None) -> tuple[int, int]:
        """``(labelled, total)``: samples with a label in the set, of all samples (or of the queue's).

        With ``queue`` both counts are limited to the review queue loaded by `Gallery.load_queue`;
        ``total`` skips counting the samples (`review_total`, which reads the whole table).
        """
        join = " JOIN temp.review_queue q ON q.sample_id = s.id" if queue else ""
        if total is None:
            total = self.review_total(queue=queue)
        done = self._query(
            f"SELECT COUNT(*) FROM labelled_sets l CROSS JOIN samples s ON s.id = l.sample_id{join} "
            "WHERE l.name = ? AND s.removed_at IS NULL",
            (set_name,),
        )[0][0]
        return int(done), int(total)

    def _settle(self, conn: sqlite3.Connection, set_name: str, sample_id: str, k: int) -> None:
        """Bring ``review_state`` and the labelled set up to date with a sample's current reviews."""
        rows = conn.execute(
            f"SELECT {_COLS} FROM reviews WHERE set_name = ? AND sample_id = ? AND undone_at IS NULL ORDER BY id",
            (set_name, sample_id),
        ).fetchall()
        current, verdict = _current([_review(r) for r in rows])
        now = time.time()
        yes = sum(r.harmful for r in current)
        if current or verdict:
            conn.execute(
                "INSERT OR REPLACE INTO review_state (set_name, sample_id, reviews, harmful_votes, adjudicated, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (set_name, sample_id, len(current), yes, int(verdict is not None), now),
            )
        else:
            conn.execute("DELETE FROM review_state WHERE set_name = ? AND sample_id = ?", (set_name, sample_id))
        deciders: list[Any] = [verdict] if verdict else []
        if not deciders and len(current) >= max(1, k) and yes in (0, len(current)):
            deciders = current
        if not deciders:
            conn.execute(
                "DELETE FROM labelled_sets WHERE name = ? AND sample_id = ? AND source_file = ?",
                (set_name, sample_id, REVIEW_SOURCE),
            )
            return
        categories = sorted({c for r in deciders for c in r.categories})
        note = "; ".join(r.note for r in deciders if r.note)
        who = ",".join(sorted({("adjudicator:" if r.adjudication else "") + r.reviewer for r in deciders}))
        conn.execute(
            "INSERT OR REPLACE INTO labelled_sets (name, sample_id, harmful, reason, categories_json, source_file, "
            "imported_at, reviewer, segments_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                set_name,
                sample_id,
                int(deciders[-1].harmful),
                note,
                json.dumps(categories),
                REVIEW_SOURCE,
                now,
                who,
                spans_json(conn, set_name, sample_id),  # the reviewers' harmful time spans (vhd.store.review_spans)
            ),
        )
