"""The review app's gallery queries: filtered, keyset-paged listings of samples with their verdicts.

`Gallery` is mixed into `vhd.store.sqlite.Store`. A page is one indexed query whatever the store's
size: rows come in a stable order (ingest order, path, or the review queue's rank) and the next
page starts after the last sample shown (keyset pagination: no ``OFFSET``, so page 1,000 costs
what page 1 costs). Filters are columns of the sample, of its annotation under one
configuration, of the labelled set under review, or of the review queue; a new filter is one
more entry in `GalleryFilter` and one more condition in `_conditions`.

The review queue (`vhd review-queue`'s CSV) is loaded into a temporary table of this connection
with `load_queue`, so its order and its detector votes join like any other column.
"""

from __future__ import annotations

import abc
import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

SORTS = ("ingest", "path", "queue")
"""Orders of the gallery: ingest order, media path, the review queue's rank."""

DECISIONS = ("harmful", "not_harmful", "none")
STATUSES = ("ok", "refused", "unparsed", "error", "missing")
DISAGREEMENTS = ("configs", "human", "detector", "reviewers")
REVIEW_STATES = ("unreviewed", "mine", "not_mine", "labelled", "unlabelled", "disputed", "needs_more")


@dataclass
class GalleryFilter:
    """What the gallery shows; every field left None shows everything.

    Attributes:
        config_hash: The configuration whose annotation is shown and filtered on.
        set_name: The labelled set under review.
        reviewer: The person looking (for ``review="mine"`` / ``"not_mine"``).
        reviews_per_sample: Reviews wanted per sample (for ``review="needs_more"``).
        decision: ``harmful``, ``not_harmful`` or ``none`` (no readable decision).
        status: ``ok``, ``refused``, ``unparsed``, ``error`` or ``missing`` (no annotation).
        category: A harm category name the verdict gives.
        source: ``real`` or ``synthetic``.
        keyword: The search keyword or prompt keyword.
        generator: The generator that made a synthetic sample.
        split: The dataset split.
        decided_by: The cascade stage that decided the verdict, or ``debate`` (`vhd annotate --cascade`).
        score_min: Lowest P(harmful) shown.
        score_max: Highest P(harmful) shown.
        disagreement: ``configs`` (another configuration decided otherwise), ``human`` (a human
            label differs), ``detector`` (a detector of the review queue differs) or ``reviewers``.
        review: ``unreviewed``, ``mine``, ``not_mine``, ``labelled``, ``unlabelled``, ``disputed``
            (reviewers disagree, nobody adjudicated) or ``needs_more`` (fewer reviews than asked).
        queue_only: Only samples in the loaded review queue.
    """

    config_hash: str | None = None
    set_name: str = "review"
    reviewer: str = ""
    reviews_per_sample: int = 1
    decision: str | None = None
    status: str | None = None
    category: str | None = None
    source: str | None = None
    keyword: str | None = None
    generator: str | None = None
    split: str | None = None
    decided_by: str | None = None
    score_min: float | None = None
    score_max: float | None = None
    disagreement: str | None = None
    review: str | None = None
    queue_only: bool = False

    def active(self) -> dict[str, Any]:
        """The filters a user set (the fields below ``reviews_per_sample`` that are not None/False)."""
        skip = {"config_hash", "set_name", "reviewer", "reviews_per_sample"}
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip and getattr(self, f.name)}


@dataclass(frozen=True)
class GalleryRow:
    """One sample as the gallery lists it.

    Attributes:
        sample_id: Content hash.
        kind: ``image`` or ``video``.
        path: Media path.
        source: ``real``, ``synthetic`` or None.
        keyword: Keyword, when known.
        generator: Generator of a synthetic sample.
        split: Dataset split.
        status: The annotation's status under the chosen configuration (None: not annotated).
        harmful: Its decision.
        score: Its P(harmful).
        categories: Its categories.
        label: The labelled set's label, when settled.
        reviews: Current reviews in the set.
        harmful_votes: Of those, harmful.
        rank: Review-queue rank, when loaded.
        frames: For a video, how many frames annotation used (0: not recorded).
        decided_by: The cascade stage that decided the verdict, ``debate``, or None outside a cascade.
    """

    sample_id: str
    kind: str
    path: str
    source: str | None
    keyword: str | None
    generator: str | None
    split: str | None
    status: str | None
    harmful: bool | None
    score: float | None
    categories: list[str] = field(default_factory=list)
    label: bool | None = None
    reviews: int = 0
    harmful_votes: int = 0
    rank: int | None = None
    frames: int = 0
    decided_by: str | None = None


@dataclass(frozen=True)
class QueueEntry:
    """A review-queue row as `load_queue` keeps it: rank and whether a detector disagreed with the judge."""

    sample_id: str
    rank: int
    detector_dissent: bool = False


_SELECT = (
    "SELECT s.id, s.kind, s.path, s.source, s.keyword, s.generator, s.split, a.status, a.harmful, a.score, "
    "a.categories_json, l.harmful AS label, COALESCE(rs.reviews, 0), COALESCE(rs.harmful_votes, 0), {rank}, "
    "json_array_length(s.frames_json), a.decided_by "
    "FROM samples s {queue_join} "
    "LEFT JOIN annotations a ON a.sample_id = s.id AND a.config_hash = ? "
    "LEFT JOIN labelled_sets l ON l.name = ? AND l.sample_id = s.id "
    "LEFT JOIN review_state rs ON rs.set_name = ? AND rs.sample_id = s.id "
)

_ORDER = {
    "ingest": ("s.rowid", "(SELECT rowid FROM samples WHERE id = ?)"),
    "path": ("s.path, s.rowid", "(SELECT path, rowid FROM samples WHERE id = ?)"),
    "queue": ("q.rank", "(SELECT rank FROM temp.review_queue WHERE sample_id = ?)"),
}


RARE = 2000
"""A status or deciding stage with fewer annotations than this is listed from its index rather than by
scanning the store."""

_RARE_COLUMNS = ("status", "decided_by")
"""Annotation columns filtered through the ``(config_hash, column)`` index when their value is rare."""


def _conditions(f: GalleryFilter, rare: frozenset[str] = frozenset()) -> tuple[list[str], list[Any]]:
    conds: list[str] = ["s.removed_at IS NULL"]
    params: list[Any] = []

    def add(sql: str, *values: Any) -> None:
        conds.append(sql)
        params.extend(values)

    for column in ("source", "keyword", "generator", "split"):
        if getattr(f, column):
            add(f"s.{column} = ?", getattr(f, column))
    # Conditions on the annotation are wrapped in IFNULL: a plain `a.x = ?` would let SQLite turn the
    # LEFT JOIN into an inner join driven by the annotations index, then sort every match by rowid
    # (270 ms instead of 16 ms for a first page of 100,000 samples).
    if f.decision == "harmful":
        add("IFNULL(a.harmful, -1) = 1")
    elif f.decision == "not_harmful":
        add("IFNULL(a.harmful, -1) = 0")
    elif f.decision == "none":
        add("a.harmful IS NULL")
    if f.status == "missing":
        add("a.id IS NULL")
    for column in _RARE_COLUMNS:
        value = getattr(f, column)
        if not value or (column == "status" and value == "missing"):
            continue
        if column not in rare:
            add(f"IFNULL(a.{column}, '') = ?", value)
        else:  # a rare value: visit only its samples, through the (config_hash, column) index
            add(
                "s.rowid IN (SELECT s2.rowid FROM annotations a2 JOIN samples s2 ON s2.id = a2.sample_id "
                f"WHERE a2.config_hash = ? AND a2.{column} = ?)",
                f.config_hash,
                value,
            )
    if f.category:
        add("EXISTS (SELECT 1 FROM json_each(IFNULL(a.categories_json, '[]')) WHERE value = ?)", f.category)
    if f.score_min is not None:
        add("IFNULL(a.score, -1e300) >= ?", f.score_min)
    if f.score_max is not None:
        add("IFNULL(a.score, 1e300) <= ?", f.score_max)
    if f.disagreement == "configs":
        add(
            "EXISTS (SELECT 1 FROM annotations b WHERE b.sample_id = s.id AND b.config_hash != a.config_hash "
            "AND b.harmful IS NOT NULL AND b.harmful != a.harmful)"
        )
    elif f.disagreement == "human":
        add(
            "((s.label IS NOT NULL AND s.label != a.harmful) OR EXISTS (SELECT 1 FROM labelled_sets h "
            "WHERE h.sample_id = s.id AND h.harmful != a.harmful))"
        )
    elif f.disagreement == "detector":
        add("q.detector_dissent = 1")
    # Sparse review states are driven from their own (small) tables: `s.rowid IN (...)` lets SQLite
    # visit only those samples instead of scanning the store for them (315 ms -> a few ms at 1M).
    split_votes = "rs2.harmful_votes > 0 AND rs2.harmful_votes < rs2.reviews"
    in_state = "s.rowid IN (SELECT s2.rowid FROM review_state rs2 JOIN samples s2 ON s2.id = rs2.sample_id "
    in_state += "WHERE rs2.set_name = ? AND {})"
    if f.disagreement == "reviewers":
        add(in_state.format(split_votes), f.set_name)
    mine = "EXISTS (SELECT 1 FROM reviews r WHERE r.set_name = ? AND r.sample_id = s.id AND r.reviewer = ? "
    mine += "AND r.undone_at IS NULL AND r.adjudication = 0)"
    if f.review == "unreviewed":
        add("rs.sample_id IS NULL AND l.sample_id IS NULL")
    elif f.review == "mine":
        add(
            "s.rowid IN (SELECT s2.rowid FROM reviews r JOIN samples s2 ON s2.id = r.sample_id WHERE r.set_name = ? "
            "AND r.reviewer = ? AND r.undone_at IS NULL AND r.adjudication = 0)",
            f.set_name,
            f.reviewer,
        )
    elif f.review == "not_mine":
        add(f"NOT {mine} AND l.sample_id IS NULL", f.set_name, f.reviewer)
    elif f.review == "labelled":
        add(
            "s.rowid IN (SELECT s2.rowid FROM labelled_sets l2 JOIN samples s2 ON s2.id = l2.sample_id "
            "WHERE l2.name = ?)",
            f.set_name,
        )
    elif f.review == "unlabelled":
        add("l.sample_id IS NULL")
    elif f.review == "disputed":
        add(in_state.format(f"{split_votes} AND rs2.adjudicated = 0"), f.set_name)
    elif f.review == "needs_more":
        add("COALESCE(rs.reviews, 0) < ? AND l.sample_id IS NULL", f.reviews_per_sample)
    return conds, params


def _row(r: Sequence[Any]) -> GalleryRow:
    return GalleryRow(
        sample_id=str(r[0]),
        kind=str(r[1]),
        path=str(r[2]),
        source=r[3],
        keyword=r[4],
        generator=r[5],
        split=r[6],
        status=r[7],
        harmful=None if r[8] is None else bool(r[8]),
        score=r[9],
        categories=list(json.loads(r[10] or "[]")),
        label=None if r[11] is None else bool(r[11]),
        reviews=int(r[12]),
        harmful_votes=int(r[13]),
        rank=None if r[14] is None else int(r[14]),
        frames=int(r[15] or 0),
        decided_by=r[16],
    )


class Gallery(abc.ABC):
    """Keyset-paged, filtered listings of samples for the review app."""

    path: Path

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction."""

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read query."""

    def load_queue(self, entries: Sequence[QueueEntry]) -> int:
        """Load a review queue into this connection's temporary table (replacing any earlier one).

        Returns:
            The number of entries kept (the first of repeated sample ids wins).
        """
        with self._tx() as conn:
            conn.execute(
                "CREATE TEMP TABLE IF NOT EXISTS review_queue (sample_id TEXT PRIMARY KEY, rank INTEGER NOT NULL, "
                "detector_dissent INTEGER NOT NULL DEFAULT 0)"
            )
            conn.execute("CREATE INDEX IF NOT EXISTS temp.review_queue_rank ON review_queue (rank)")
            conn.execute("DELETE FROM temp.review_queue")
            conn.executemany(
                "INSERT OR IGNORE INTO temp.review_queue (sample_id, rank, detector_dissent) VALUES (?, ?, ?)",
                [(e.sample_id, e.rank, int(e.detector_dissent)) for e in entries],
            )
            return int(conn.execute("SELECT COUNT(*) FROM temp.review_queue").fetchone()[0])

    def gallery_page(
        self, flt: GalleryFilter, *, sort: str = "ingest", after: str | None = None, limit: int = 48
    ) -> list[GalleryRow]:
        """One page of the gallery: up to ``limit`` samples after sample ``after`` in ``sort`` order.

        Args:
            flt: The filters.
            sort: One of `SORTS`; ``queue`` needs a loaded queue and lists only its samples.
            after: The last sample id of the previous page (None: the first page).
            limit: Page size.

        Returns:
            The rows; fewer than ``limit`` at the end.
        """
        queue = sort == "queue" or flt.queue_only or flt.disagreement == "detector"
        has_queue = queue and bool(self._query("SELECT 1 FROM temp.sqlite_master WHERE name = 'review_queue'"))
        order, key = _ORDER[sort if sort in _ORDER and (sort != "queue" or has_queue) else "ingest"]
        sql = _SELECT.format(
            rank="q.rank" if has_queue else "NULL",
            queue_join="JOIN temp.review_queue q ON q.sample_id = s.id" if has_queue else "",
        )
        rare: set[str] = set()
        for column in _RARE_COLUMNS:
            value = getattr(flt, column)
            if value and not (column == "status" and value == "missing"):
                count = self._query(
                    f"SELECT COUNT(*) FROM (SELECT 1 FROM annotations WHERE config_hash = ? AND {column} = ? LIMIT ?)",
                    (flt.config_hash, value, RARE),
                )
                if int(count[0][0]) < RARE:
                    rare.add(column)
        conds, params = _conditions(flt, frozenset(rare))
        if queue and not has_queue:
            conds.append("0")  # asked for the queue's samples and there is no queue
        if after is not None:
            conds.append(f"({order}) > {key}")
            params.append(after)
        sql += "WHERE " + " AND ".join(conds) + f" ORDER BY {order} LIMIT ?"
        rows = self._query(sql, [flt.config_hash, flt.set_name, flt.set_name, *params, limit])
        return [_row(r) for r in rows]

    def gallery_choices(self, limit: int = 200) -> dict[str, list[str]]:
        """Values the filters can take: each of source, keyword, generator and split (at most ``limit``).

        Each column's distinct values are found by hopping along its index (one seek per value), so
        the cost follows the number of values, not of samples.
        """
        out: dict[str, list[str]] = {}
        for column in ("source", "keyword", "generator", "split"):
            rows = self._query(
                f"WITH RECURSIVE v(x) AS (SELECT MIN({column}) FROM samples UNION ALL "
                f"SELECT (SELECT MIN({column}) FROM samples WHERE {column} > v.x) FROM v WHERE v.x IS NOT NULL) "
                "SELECT x FROM v WHERE x IS NOT NULL LIMIT ?",
                (limit,),
            )
            out[column] = [str(r[0]) for r in rows]
        return out

    def gallery_stages(self, config_hash: str | None, limit: int = 50) -> list[str]:
        """The ``decided_by`` values of a configuration's annotations: its cascade stages and ``debate``.

        Found by hopping along the ``(config_hash, decided_by)`` index, one seek per value (empty outside
        a cascade).
        """
        if config_hash is None:
            return []
        rows = self._query(
            "WITH RECURSIVE v(x) AS (SELECT MIN(decided_by) FROM annotations WHERE config_hash = ?1 UNION ALL "
            "SELECT (SELECT MIN(decided_by) FROM annotations WHERE config_hash = ?1 AND decided_by > v.x) "
            "FROM v WHERE v.x IS NOT NULL) SELECT x FROM v WHERE x IS NOT NULL LIMIT ?2",
            (config_hash, limit),
        )
        return [str(r[0]) for r in rows]

    def gallery_configs(self) -> list[str]:
        """Configuration hashes of the store's runs, newest run first (cheap: the runs table only)."""
        rows = self._query(
            "SELECT config_hash, MAX(started_at) AS last FROM runs GROUP BY config_hash ORDER BY last DESC"
        )
        return [str(r[0]) for r in rows]

    def sample_annotations(self, sample_id: str) -> list[tuple[str, str, bool | None, float | None]]:
        """Every configuration's verdict on a sample: ``(config_hash, status, harmful, score)``, newest first."""
        rows = self._query(
            "SELECT config_hash, status, harmful, score FROM annotations WHERE sample_id = ? ORDER BY id DESC",
            (sample_id,),
        )
        return [(str(r[0]), str(r[1]), None if r[2] is None else bool(r[2]), r[3]) for r in rows]
