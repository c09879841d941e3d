"""The review app's gallery queries: filtered, keyset-paged listings of samples with their verdicts.

`Gallery` is mixed into `vhd.store.sqlite.Store`. Rows come in a stable order (ingest order, path,
or the review queue's rank) and the next page starts after the last sample shown (keyset
pagination: no ``OFFSET``, so page 1,000 costs what page 1 costs). Filters are columns of the
sample, of its annotation under one configuration, of the labelled set under review, or of the
review queue (`vhd.store.gallery_filter`: a new filter is one more field of `GalleryFilter`, one
more condition in `conditions` and, if it can be looked up, one more `Driver`).

A page is found from an index, never by reading the store until enough rows match: each active
filter's matching samples are first counted through its index, up to `RARE`. A filter that nothing
matches answers an empty page at once. If one has fewer than `RARE` matches, the rarest is listed
(``s.rowid IN (...)``) and only its samples are checked against the other filters. Otherwise, in
ingest order, the shortest index that lists samples in that order is walked (a configuration's
facet, a column of the samples, or the blocks that can hold an absence), so a page costs at most
the length of that index; in path or queue order the order's own index is walked.

The review queue (`vhd review-queue`'s CSV) is loaded into a temporary table of this connection
with `load_queue`, so its order and its detector votes join like any other column.

Without a configuration (``GalleryFilter.latest``) each row shows the sample's newest verdict, and every
filter, order and histogram reads that same verdict through the pseudo-configuration `NEWEST` of the
index (migration ``gallery_newest``). Score
order walks ``gallery_scores`` from the top; disagreement order walks the ``configs`` disagreement
first, then its negation. This module is a little long (about 460 lines) on purpose: the page
planner and every order that shares its keyset walks stay in one place.
"""

from __future__ import annotations

import abc
import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vhd.store.gallery_filter import (
    DECISIONS,
    DISAGREEMENTS,
    NEWEST,
    REVIEW_STATES,
    SORTS,
    STATUSES,
    Driver,
    GalleryFilter,
    conditions,
    drivers,
    ranges,
)

__all__ = [
    "DECISIONS",
    "DISAGREEMENTS",
    "NEWEST",
    "PATH_RARE",
    "RARE",
    "REVIEW_STATES",
    "SORTS",
    "STATUSES",
    "WALK_COUNT",
    "Gallery",
    "GalleryFilter",
    "GalleryRow",
    "QueueEntry",
]


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
    "FROM {source} {queue_join} "
    "LEFT JOIN annotations a ON {annotation} "
    "LEFT JOIN labelled_sets l ON l.name = ? AND l.sample_id = s.id "
    "LEFT JOIN review_state rs ON rs.set_name = ? AND rs.sample_id = s.id "
)

_ONE_CONFIG = "a.sample_id = s.id AND a.config_hash = ?"
_LATEST = "a.id = (SELECT MAX(a2.id) FROM annotations a2 WHERE a2.sample_id = s.id)"
"""Without a configuration each sample shows its newest annotation, whichever configuration made it."""

_AFTER = "(SELECT rowid FROM samples WHERE id = ?)"
_SCORE_AFTER = (
    "(SELECT a3.score, s3.rowid FROM samples s3 JOIN annotations a3 ON a3.sample_id = s3.id "
    "AND a3.config_hash = ? WHERE s3.id = ?)"
)
_NEWEST_SCORE_AFTER = (
    "(SELECT a3.score, s3.rowid FROM samples s3 JOIN annotations a3 ON a3.id = "
    "(SELECT MAX(a4.id) FROM annotations a4 WHERE a4.sample_id = s3.id) WHERE s3.id = ?)"
)
_ORDER = {  # (order, the key of the sample a page starts after); score order is built in gallery_page
    "ingest": ("s.rowid", _AFTER),
    "path": ("s.path, s.rowid", "(SELECT path, rowid FROM samples WHERE id = ?)"),
    "queue": ("q.rank", "(SELECT rank FROM temp.review_queue WHERE sample_id = ?)"),
}

RARE = 20_000
"""A filter with fewer matching samples than this is answered from its index alone: its samples are
listed first (``s.rowid IN (...)``) and only they are checked against the other filters."""

PATH_RARE = 2_000
"""In path order a listed filter's samples are all sorted by path before the first page: only a filter
with fewer matches than this is listed; a commoner one is checked along the path index."""

WALK_COUNT = 200_000
"""When no filter is rare, the ones whose index can be walked in ingest order are counted up to this to
find the shortest walk."""


def _select(flt: GalleryFilter, source: str, has_queue: bool) -> tuple[str, list[Any]]:
    """The gallery's SELECT over ``source`` and the parameters of its joins."""
    sql = _SELECT.format(
        source=source,
        annotation=_LATEST if flt.latest and not flt.config_hash else _ONE_CONFIG,
        rank="q.rank" if has_queue else "NULL",
        queue_join="JOIN temp.review_queue q ON q.sample_id = s.id" if has_queue else "",
    )
    config = [] if flt.latest and not flt.config_hash else [flt.config_hash]
    return sql, [*config, flt.set_name, flt.set_name]


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

        Every active filter is first counted through its index (up to `RARE`); a filter nothing matches
        answers an empty page at once, and the rarest filter drives the query (see the module docstring).

        Args:
            flt: The filters.
            sort: One of `SORTS`; ``queue`` needs a loaded queue and lists only its samples; ``score``
                lists only the samples with a score under ``flt.config_hash``; ``disagreement`` puts
                first the samples another configuration decided otherwise (ingest order without a
                configuration).
            after: The last sample id of the previous page (None: the first page).
            limit: Page size.

        Returns:
            The rows; fewer than ``limit`` at the end.
        """
        if sort == "disagreement":
            return self._disagreement_page(flt, after, limit)
        queue = sort == "queue" or flt.queue_only or flt.disagreement == "detector"
        has_queue = queue and bool(self._query("SELECT 1 FROM temp.sqlite_master WHERE name = 'review_queue'"))
        if queue and not has_queue:
            return []  # asked for the queue's samples and there is no queue
        sort = sort if sort in SORTS and (sort != "queue" or has_queue) else "ingest"
        view = flt.view()
        config = self._gallery_config(view)
        if sort == "score" and config is None:
            return []  # no scores without a configuration that has annotations
        drivers = self._drivers(flt, config, has_queue and sort != "queue", sort)
        if drivers is None or any(d.count == 0 for d in drivers):
            return []
        rare = {"ingest": RARE, "path": PATH_RARE, "score": PATH_RARE}.get(sort, 0)
        listed = [d for d in drivers if d.count < min(rare, d.list_below or rare)]
        walks = [d for d in drivers if d.walk is not None or d.blocks is not None] if sort == "ingest" else []
        conds, params = conditions(flt, config)
        source = "samples s"
        if sort == "score":  # highest P(harmful) first; samples without a score are not in this order
            order, cmp = "a.score DESC, s.rowid DESC", "(a.score, s.rowid) <"
            key, key_params = (_SCORE_AFTER, [view, after]) if flt.config_hash else (_NEWEST_SCORE_AFTER, [after])
            if not listed:  # walk the configuration's score index from the top
                source = "gallery_scores g CROSS JOIN samples s ON s.rowid = g.sample"
                order, cmp = "g.score DESC, g.sample DESC", "(g.score, g.sample) <"
                conds.insert(0, "g.config = ?")
                params[:0] = [config]
            else:
                conds.append("a.score IS NOT NULL")
        else:
            order, key = _ORDER[sort]
            cmp, key_params = f"({order}) >", [after]
        if listed:  # the rarest filter's few samples, then the other filters on them
            best = min(listed, key=lambda d: d.count)
            conds.insert(0, f"s.rowid IN ({best.rows})")
            params[:0] = best.params
        elif walks:  # the shortest index that lists its samples in ingest order
            best = min(walks, key=lambda d: d.count)
            if best.walk is None:
                assert best.blocks is not None
                return self._page_by_ranges(flt, config, ranges(best.blocks), after, limit, has_queue)
            source, order, walk_params = best.walk
            cmp, key = f"({order}) >", _AFTER
            if walk_params:  # the walked facet: its (config, facet) prefix of the index
                conds.insert(0, "g.config = ? AND g.facet = ?")
                params[:0] = walk_params
        sql, join_params = _select(flt, source, has_queue)
        if after is not None:
            conds.append(f"{cmp} {key}")
            params.extend(key_params)
        sql += "WHERE " + " AND ".join(conds) + f" ORDER BY {order} LIMIT ?"
        rows = self._query(sql, [*join_params, *params, limit])
        return [_row(r) for r in rows]

    def _disagreement_page(self, flt: GalleryFilter, after: str | None, limit: int) -> list[GalleryRow]:
        """Samples on which another configuration decided otherwise first, then the others, each part in ingest order.

        Two keyset walks one after the other: the ``disagreement="configs"`` filter, then its negation
        (``"agree"``); a page that ends the first part goes on with the start of the second.
        """
        if flt.disagreement is not None or flt.view() is None:
            return self.gallery_page(flt, after=after, limit=limit)  # nothing to put first
        split, rest = replace(flt, disagreement="configs"), replace(flt, disagreement="agree")
        if after is not None and not self._matches(split, after):
            return self.gallery_page(rest, after=after, limit=limit)
        rows = self.gallery_page(split, after=after, limit=limit)
        if len(rows) < limit:
            rows += self.gallery_page(rest, limit=limit - len(rows))
        return rows

    def _matches(self, flt: GalleryFilter, sample_id: str) -> bool:
        """Whether one sample passes a filter (one row checked)."""
        sql, join_params = _select(flt, "samples s", has_queue=False)
        conds, params = conditions(flt, self._gallery_config(flt.view()))
        rows = self._query(sql + "WHERE s.id = ? AND " + " AND ".join(conds), [*join_params, sample_id, *params])
        return bool(rows)

    def _page_by_ranges(
        self,
        flt: GalleryFilter,
        config: int | None,
        ranges: list[tuple[int, int]],
        after: str | None,
        limit: int,
        has_queue: bool,
    ) -> list[GalleryRow]:
        """An ingest-ordered page visiting only the rowid ranges that can hold an absence, one after another."""
        start = 0
        if after is not None:
            found = self._query(_AFTER[1:-1], (after,))
            if not found:
                return []  # as a keyset query answers for a sample that is not in the store
            start = int(found[0][0]) + 1
        sql, join_params = _select(flt, "samples s", has_queue)
        conds, params = conditions(flt, config)
        sql += "WHERE s.rowid BETWEEN ? AND ? AND " + " AND ".join(conds) + " ORDER BY s.rowid LIMIT ?"
        out: list[GalleryRow] = []
        for lo, hi in ranges:
            if hi < start:
                continue
            got = self._query(
                sql,
                [*join_params, max(lo, start), hi, *params, limit - len(out)],
            )
            out.extend(_row(r) for r in got)
            if len(out) >= limit:
                break
        return out

    def _gallery_config(self, config_hash: str | None) -> int | None:
        """The ``gallery_configs`` id of a configuration (None: none given, or nothing annotated under it)."""
        if config_hash is None:
            return None
        rows = self._query("SELECT id FROM gallery_configs WHERE config_hash = ?", (config_hash,))
        return int(rows[0][0]) if rows else None

    def _absent(self, kind: str, key: str) -> list[int]:
        """Blocks holding a sample with no annotation under a configuration (``a``) or no label in a set (``l``)."""
        rows = self._query(
            "SELECT b.block FROM gallery_blocks b LEFT JOIN gallery_blocks x "
            "ON x.kind = ? AND x.key = ? AND x.block = b.block "
            "WHERE b.kind = 's' AND b.key = '' AND b.n > IFNULL(x.n, 0) ORDER BY b.block",
            (kind, key),
        )
        return [int(r[0]) for r in rows]

    def _drivers(self, flt: GalleryFilter, config: int | None, queue: bool, sort: str) -> list[Driver] | None:
        """An index-backed `Driver` for each active filter that has one, counted; None: nothing can match.

        A lone filter walked in ingest order is only checked for one match (its walk stops at a page);
        otherwise each is counted up to `RARE`, and when none is rare the walkable ones up to
        `WALK_COUNT` (each up to the shortest so far), to walk the shortest.
        """
        out = drivers(flt, config, queue, self._absent)
        if out is None:
            return None
        walkable = [d for d in out if sort == "ingest" and (d.walk is not None or d.blocks is not None)]
        alone = len(out) == 1 and len(walkable) == 1
        for d in out:
            if d.blocks is None:
                found = self._count(d, 1 if alone else RARE)
                d.count = found if not alone or found == 0 else max(RARE, 1)  # one match: walked, not listed
        if len(walkable) > 1 and min(d.count for d in out) >= RARE:
            shortest = WALK_COUNT
            for d in sorted(walkable, key=lambda d: d.walk is not None):  # the blocks' counts are known
                if d.walk is not None:
                    d.count = self._count(d, shortest)
                shortest = min(shortest, d.count)
        return out

    def _count(self, d: Driver, cap: int) -> int:
        """How many samples a driver lists, up to ``cap`` (at least 1)."""
        found = self._query(f"SELECT COUNT(*) FROM ({d.rows} LIMIT ?)", (*d.params, max(cap, 1)))
        return int(found[0][0])

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

        ``config_hash`` `NEWEST`: those of each sample's newest verdict (its ``b:`` facets). Found
        by hopping along the ``(config_hash, decided_by)`` index, one seek per value (empty outside
        a cascade).
        """
        if config_hash is None:
            return []
        if config_hash == NEWEST:  # the stages of the newest verdicts: hop along their ``b:`` facets
            config = self._gallery_config(NEWEST)
            rows = self._query(
                "WITH RECURSIVE v(x) AS (SELECT MIN(facet) FROM gallery_facets WHERE config = ?1 AND facet > 'b:' "
                "AND facet < 'b;' UNION ALL SELECT (SELECT MIN(facet) FROM gallery_facets WHERE config = ?1 "
                "AND facet > v.x AND facet < 'b;') FROM v WHERE v.x IS NOT NULL) "
                "SELECT substr(x, 3) FROM v WHERE x IS NOT NULL LIMIT ?2",
                (config, limit),
            )
            return [str(r[0]) for r in rows]
        rows = self._query(
            "WITH RECURSIVE v(x) AS (SELECT MIN(decided_by) FROM annotations WHERE config_hash = ?1 UNION ALL "
            "SELECT (SELECT MIN(decided_by) FROM annotations WHERE config_hash = ?1 AND decided_by > v.x) "
            "FROM v WHERE v.x IS NOT NULL) SELECT x FROM v WHERE x IS NOT NULL LIMIT ?2",
            (config_hash, limit),
        )
        return [str(r[0]) for r in rows]

    def gallery_histograms(self, config_hash: str, bins: int = 10) -> tuple[list[int], dict[str, int]]:
        """How a configuration's verdicts spread: counts of P(harmful) in ``bins`` equal bins, and per category.

        ``config_hash`` `NEWEST` counts each sample's newest verdict (what the gallery shows by default).

        Read from the gallery's indexes (``gallery_scores``, the ``c:`` facets of ``gallery_facets``), which
        keep a removed sample's verdict: the counts include taken-down samples. The cost follows the
        configuration's annotations, so callers cache the answer on large stores.

        Returns:
            ``(score counts from low to high, category name -> samples)``; empty when nothing is annotated
            under the configuration.
        """
        config = self._gallery_config(config_hash)
        if config is None:
            return [], {}
        rows = self._query(
            "SELECT MIN(MAX(CAST(score * ?1 AS INTEGER), 0), ?1 - 1), COUNT(*) FROM gallery_scores "
            "WHERE config = ?2 GROUP BY 1",
            (bins, config),
        )
        scores = [0] * bins
        for b, n in rows:
            scores[int(b)] += int(n)
        rows = self._query(
            "SELECT substr(facet, 3), COUNT(*) FROM gallery_facets WHERE config = ? AND facet >= 'c:' "
            "AND facet < 'c;' GROUP BY facet",
            (config,),
        )
        return scores, {str(r[0]): int(r[1]) for r in rows}

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
