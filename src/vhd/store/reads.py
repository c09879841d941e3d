"""Reading annotations back from the store: resume sets, configuration hashes, iteration.

`AnnotationReads` is mixed into `vhd.store.sqlite.Store`, which provides ``_query`` and ``path``.
"""

from __future__ import annotations

import abc
import os
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any, Literal, overload

from vhd.errors import ConfigError
from vhd.records import Annotation, Kind, Role, Sample, Segment, Source, Status, Turn, Usage, Verdict
from vhd.store.rows import VerdictRow, annotation_from_row, loads
from vhd.store.segments import page_segments, with_segments

_FINAL = (Status.OK.value, Status.REFUSED.value, Status.UNPARSED.value, Status.TRUNCATED.value)
_RETRIED = (Status.UNPARSED.value, Status.TRUNCATED.value)
_CHUNK = 256
_ROLES = {r.value: r for r in Role}
_KINDS = {k.value: k for k in Kind}
_STATUSES = {s.value: s for s in Status}
_LOOKUP = 500
SAMPLE_FIELDS = "s.kind, s.path, s.source, s.keyword, s.generator, s.split, s.label, s.frames_json, s.meta_json"
_ANN_COLS = (
    "a.id, a.sample_id, a.run_id, a.config_hash, a.status, a.harmful, a.reason, "
    "a.categories_json, a.score, a.refused, a.prompt_tokens, a.completion_tokens, a.calls, "
    "a.cost, a.error, a.started_at, a.finished_at, a.decided_by"
)


RawTurn = tuple[Any, ...]
"""A turn as the store holds it: annotation id, role, round, text, prompt and completion tokens, latency,
refused (0 or 1), model, finish reason, reasoning tokens."""

ROW_ID, ROW_SAMPLE_ID, ROW_RUN_ID, ROW_CONFIG_HASH, ROW_STATUS, ROW_HARMFUL, ROW_REASON = range(7)
ROW_CATEGORIES, ROW_SCORE, ROW_REFUSED, ROW_PROMPT_TOKENS, ROW_COMPLETION_TOKENS, ROW_CALLS = range(7, 13)
ROW_COST, ROW_ERROR, ROW_STARTED_AT, ROW_FINISHED_AT, ROW_DECIDED_BY = range(13, 18)
ROW_KIND, ROW_PATH, ROW_SOURCE, ROW_KEYWORD, ROW_GENERATOR, ROW_SPLIT, ROW_LABEL, ROW_FRAMES, ROW_META = range(18, 27)
"""Positions in a raw annotation row (``SELECT {_ANN_COLS}, {SAMPLE_FIELDS}``, see `AnnotationPage`)."""
_ROW_NAMES = [*_ANN_COLS.split(", "), *SAMPLE_FIELDS.split(", ")]
_TURN_NAMES = [
    "annotation_id", "role", "round", "text", "prompt_tokens", "completion_tokens", "latency_s", "refused", "model",
    "finish_reason", "reasoning_tokens",
]  # fmt: skip
_TURN_SELECT = ", ".join(_TURN_NAMES)


def _annotation_conds(config_hash: str | None, run_id: str | None) -> tuple[list[str], list[Any]]:
    """The WHERE conditions (``s``: samples, ``a``: annotations) of `AnnotationReads.iter_annotation_pages`."""
    conds: list[str] = ["s.removed_at IS NULL"]
    params: list[Any] = []
    if config_hash:
        conds.append("a.config_hash = ?")
        params.append(config_hash)
    if run_id:
        conds.append("a.run_id = ?")
        params.append(run_id)
    if not config_hash:
        inner = "a2.sample_id = a.sample_id" + (" AND a2.run_id = ?" if run_id else "")
        conds.append(f"a.id = (SELECT MAX(a2.id) FROM annotations a2 WHERE {inner})")
        if run_id:
            params.append(run_id)
    return conds, params


@dataclass(frozen=True)
class AnnotationPage:
    """A page of annotations as the store holds them: what `AnnotationReads.iter_annotation_pages` yields.

    Readers that go through many rows (the exports) read cells straight from these tuples instead
    of building a `Sample`, an `Annotation` and its `Turn` objects per row; `pairs` builds them.

    Attributes:
        rows: One tuple per annotation, its cells at the ``ROW_*`` positions: the annotation's
            columns (``ROW_ID`` .. ``ROW_DECIDED_BY``) then its sample's (``ROW_KIND`` .. ``ROW_META``);
            JSON columns (categories, frames, meta) as stored text, flags as stored integers.
        turns: The turns of each annotation id in the page, in order, as `RawTurn` tuples (an
            annotation without turns has no key).
        segments: The segments of each annotation by ``(sample_id, config_hash)`` (segmented videos only).
    """

    rows: list[tuple[Any, ...]]
    turns: dict[int, list[RawTurn]]
    segments: dict[tuple[str, str], list[Segment]] = field(default_factory=dict)

    def pairs(self) -> Iterator[tuple[Sample, Annotation]]:
        """Yield the ``(sample, annotation)`` pair of each row, in order."""
        turns = self.turns
        for r in self.rows:
            raw = turns.get(r[ROW_ID])
            yield pair_from_row(r, [] if raw is None else turn_objects(raw), self.segments)

    def with_rows(self, rows: list[tuple[Any, ...]]) -> AnnotationPage:
        """The same page holding only these rows (a subset of its own, possibly with cells changed)."""
        return AnnotationPage(rows, self.turns, self.segments)


def turn_objects(raw: Sequence[RawTurn]) -> list[Turn]:
    """The `Turn` records of raw turns."""
    roles = _ROLES
    return [
        Turn(roles.get(t[1]) or Role(t[1]), t[2], t[3], t[4], t[5], t[6], bool(t[7]), t[8], t[9], t[10]) for t in raw
    ]


def pair_from_row(r: Sequence[Any], turns: list[Turn], segments: Any = None) -> tuple[Sample, Annotation]:
    """The sample and annotation of a row of ``SELECT {_ANN_COLS}, {SAMPLE_FIELDS}``, read by position.

    `vhd.store.rows.sample_from_row` and `annotation_from_row` read the same by name; by position
    it is several times cheaper, which counts on a million rows.
    """
    harmful, label, source, meta = r[5], r[24], r[20], r[26]
    sample = Sample(
        id=r[1],
        kind=_KINDS.get(r[18]) or Kind(r[18]),
        path=r[19],
        source=None if source is None else Source.parse(source),
        keyword=r[21],
        generator=r[22],
        split=r[23],
        harmful=None if label is None else bool(label),
        frames=loads(r[25]),
        meta=loads(meta),
    )
    ann = Annotation(
        sample_id=r[1],
        run_id=r[2],
        config_hash=r[3],
        verdict=Verdict(
            harmful=None if harmful is None else bool(harmful),
            reason=r[6],
            categories=loads(r[7]),
            score=r[8],
            status=_STATUSES.get(r[4]) or Status(r[4]),
            refused=bool(r[9]),
            segments=list((segments or {}).get((r[1], r[3]), ())),
        ),
        turns=turns,
        usage=Usage(calls=r[12], prompt_tokens=r[10], completion_tokens=r[11], cost=r[13]),
        error=r[14],
        started_at=r[15] or 0.0,
        finished_at=r[16] or 0.0,
        decided_by=r[17],
    )
    return sample, ann


def final_statuses(retry_unparsed: bool = False) -> list[str]:
    """The statuses that need no new attempt: ok, refused and (unless retried) unparsed and truncated."""
    return [s for s in _FINAL if not (retry_unparsed and s in _RETRIED)]


class AnnotationReads(abc.ABC):
    """Read-only queries over annotations and their turns."""

    path: Path

    @abc.abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read query."""

    @abc.abstractmethod
    def _tuples(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read query; rows as plain tuples (cheaper than `sqlite3.Row` when read by position)."""

    def final_ids(self, config_hash: str, *, retry_unparsed: bool = False) -> set[str]:
        """Return ids of samples whose annotation under this config needs no new attempt.

        Args:
            config_hash: The configuration.
            retry_unparsed: Treat unparsed results as not final (ask again).

        Returns:
            Sample ids with an ok, refused or (unless ``retry_unparsed``) unparsed result.
        """
        statuses = final_statuses(retry_unparsed)
        marks = ",".join("?" * len(statuses))
        rows = self._query(
            f"SELECT sample_id FROM annotations WHERE config_hash = ? AND status IN ({marks})",
            [config_hash, *statuses],
        )
        return {str(r[0]) for r in rows}

    def done_ids(self, config_hash: str, sample_ids: Sequence[str], *, retry_unparsed: bool = False) -> set[str]:
        """Of these samples, those whose annotation under this config needs no new attempt.

        Looks each sample up by id (500 to a query), so its cost follows the number asked, not the
        number of annotations stored.
        """
        statuses = final_statuses(retry_unparsed)
        marks = ",".join("?" * len(statuses))
        out: set[str] = set()
        for start in range(0, len(sample_ids), _LOOKUP):
            chunk = list(sample_ids[start : start + _LOOKUP])
            rows = self._query(  # "+status": search by (sample_id, config_hash), never walk a configuration
                f"SELECT sample_id FROM annotations WHERE config_hash = ? AND +status IN ({marks}) "
                f"AND sample_id IN ({','.join('?' * len(chunk))})",
                [config_hash, *statuses, *chunk],
            )
            out.update(str(r[0]) for r in rows)
        return out

    def config_hashes(self, prefix: str = "") -> list[str]:
        """The configuration hashes that have annotations, newest first, optionally by prefix."""
        rows = self._query(
            "SELECT config_hash, MAX(finished_at) AS last FROM annotations WHERE config_hash LIKE ? "
            "GROUP BY config_hash ORDER BY last DESC",
            (prefix.replace("%", "").replace("_", "") + "%",),
        )
        return [r["config_hash"] for r in rows]

    @overload
    def resolve_config_hash(self, prefix: str | None, *, latest: Literal[False] = False) -> str | None: ...

    @overload
    def resolve_config_hash(self, prefix: str | None, *, latest: Literal[True]) -> str: ...

    def resolve_config_hash(self, prefix: str | None, *, latest: bool = False) -> str | None:
        """Expand a configuration-hash prefix to the one full hash it names.

        Args:
            prefix: A configuration hash or its first characters; None or empty names none.
            latest: Without a prefix, return the newest configuration (the one with the most
                recently finished annotation) instead of None.

        Returns:
            The full hash; None when no prefix is given and ``latest`` is false.

        Raises:
            ConfigError: No configuration or several match the prefix (the message lists the
                known ones), or ``latest`` is asked of a store without annotations.
        """
        if not prefix:
            if not latest:
                return None
            hashes = self.config_hashes()
            if not hashes:
                raise ConfigError(f"store {self.path} has no annotation at all: annotate first or check --config-hash")
            return hashes[0]
        matches = self.config_hashes(prefix)
        if len(matches) != 1:
            known = ", ".join(h[:12] for h in self.config_hashes()) or "none"
            what = "no" if not matches else f"{len(matches)}"
            raise ConfigError(f"{what} configuration(s) match {prefix!r}; known: {known}")
        return matches[0]

    def final_verdicts(self) -> list[VerdictRow]:
        """Every final (ok, refused, unparsed or truncated) annotation of every sample not removed.

        Returns:
            One row per annotation, ordered by sample path, then oldest annotation first.
        """
        rows = self._query(
            "SELECT a.sample_id, a.config_hash, a.status, a.harmful, a.score, a.reason, s.path, s.kind, a.decided_by "
            "FROM annotations a JOIN samples s ON s.id = a.sample_id "
            f"WHERE s.removed_at IS NULL AND a.status IN ({', '.join(repr(x) for x in _FINAL)}) ORDER BY s.path, a.id"
        )
        return [
            VerdictRow(
                str(r[0]),
                str(r[1]),
                str(r[2]),
                None if r[3] is None else bool(r[3]),
                r[4],
                r[5] or "",
                str(r[6]),
                str(r[7]),
                r[8],
            )
            for r in rows
        ]

    def counts(self, config_hash: str) -> dict[str, int]:
        """Return how many annotations under this config have each status (a key for every status)."""
        out = {s.value: 0 for s in Status}
        rows = self._query(
            "SELECT status, COUNT(*) FROM annotations WHERE config_hash = ? GROUP BY status",
            (config_hash,),
        )
        out.update({str(r[0]): int(r[1]) for r in rows})
        return out

    def decided_by_counts(self, config_hash: str) -> dict[str, int]:
        """How many final annotations under this config each cascade stage (or ``debate``) decided.

        Empty for a configuration that ran without a cascade.
        """
        rows = self._query(
            "SELECT decided_by, COUNT(*) FROM annotations WHERE config_hash = ? AND decided_by IS NOT NULL "
            "AND status != 'error' GROUP BY decided_by ORDER BY COUNT(*) DESC",
            (config_hash,),
        )
        return {str(r[0]): int(r[1]) for r in rows}

    def get_annotation(self, sample_id: str, config_hash: str | None = None) -> Annotation | None:
        """Return a sample's annotation under a config, or its latest one when no hash is given."""
        where = "a.sample_id = ?" + (" AND a.config_hash = ?" if config_hash else "")
        params = (sample_id, config_hash) if config_hash else (sample_id,)
        rows = self._query(
            f"SELECT {_ANN_COLS} FROM annotations a WHERE {where} ORDER BY a.id DESC LIMIT 1",
            params,
        )
        if not rows:
            return None
        return with_segments(
            self._tuples, annotation_from_row(rows[0], self._turns([rows[0]["id"]]).get(rows[0]["id"], []))
        )[0]

    def annotations_for(self, sample_ids: Iterable[str], config_hash: str) -> dict[str, Annotation]:
        """The newest annotation of each sample under one configuration, read in batches: sample id to annotation.

        What a workflow reads after annotating (``summary.config_hash`` names the configuration);
        samples without an annotation under it are absent.
        """
        out: dict[str, Annotation] = {}
        ids = list(dict.fromkeys(sample_ids))
        for start in range(0, len(ids), _LOOKUP):
            chunk = ids[start : start + _LOOKUP]
            marks = ",".join("?" * len(chunk))
            rows = self._query(
                f"SELECT {_ANN_COLS} FROM annotations a WHERE a.config_hash = ? AND a.sample_id IN ({marks}) "
                "ORDER BY a.id",
                (config_hash, *chunk),
            )
            newest = {r["sample_id"]: r for r in rows}  # the later row (higher id) of a sample wins
            turns = self._turns([r["id"] for r in newest.values()])
            for sid, row in newest.items():
                out[sid] = annotation_from_row(row, turns.get(row["id"], []))
        with_segments(self._tuples, *out.values())
        return out

    def iter_annotations(
        self, config_hash: str | None = None, run_id: str | None = None, *, page: int = _CHUNK
    ) -> Iterator[tuple[Sample, Annotation]]:
        """Yield (sample, annotation) pairs ordered by sample path (`iter_annotation_rows` without the ids)."""
        for one in self.iter_annotation_pages(config_hash, run_id, page=page):
            yield from one.pairs()

    def iter_annotation_rows(
        self, config_hash: str | None = None, run_id: str | None = None, *, page: int = _CHUNK
    ) -> Iterator[tuple[int, Sample, Annotation]]:
        """Yield (annotation row id, sample, annotation) ordered by sample path, a page at a time.

        Removed samples are left out. Without a config hash, each sample yields only its latest
        annotation (among those of ``run_id`` when given). Pages are read by key (the last
        ``(path, sample id, annotation id)`` seen), not by offset, so every page costs the same
        however far into a large store it is, memory holds one page, and the store may be
        written to between items.

        Args:
            config_hash: Only annotations under this configuration.
            run_id: Only annotations written by this run.
            page: Annotations read per query.
        """
        for one in self.iter_annotation_pages(config_hash, run_id, page=page):
            for row, pair in zip(one.rows, one.pairs(), strict=True):
                yield (int(row[ROW_ID]), *pair)

    def iter_annotation_pages(
        self,
        config_hash: str | None = None,
        run_id: str | None = None,
        *,
        page: int = _CHUNK,
        cells: Collection[int] | None = None,
        turn_cells: Collection[int] | None = None,
    ) -> Iterator[AnnotationPage]:
        """Yield the annotations of `iter_annotations`, in the same order, as raw pages of ``page`` rows.

        The cheap way through a large store (no record objects); `AnnotationPage.pairs` gives
        the records of a page when they are wanted.

        Args:
            config_hash: Only annotations under this configuration.
            run_id: Only annotations written by this run.
            page: Annotations read per query.
            cells: Read only these ``ROW_*`` positions (and the annotation id, sample id and path,
                always read); the others hold None, which saves making a Python object per
                cell on a large store. Default: all. A page read so is not for `AnnotationPage.pairs`.
            turn_cells: The same for the positions of `RawTurn` (the annotation id always read).
        """
        select = ", ".join(
            name if cells is None or at in cells or at in (ROW_ID, ROW_SAMPLE_ID, ROW_PATH) else "NULL"
            for at, name in enumerate(_ROW_NAMES)
        )
        turn_select = ", ".join(
            name if turn_cells is None or at in turn_cells or at == 0 else "NULL" for at, name in enumerate(_TURN_NAMES)
        )
        conds, params = _annotation_conds(config_hash, run_id)
        # CROSS JOIN keeps samples outside: the walk follows index samples_path_id, never sorting the whole store
        sql = (
            f"SELECT {select} FROM samples s CROSS JOIN annotations a ON a.sample_id = s.id "
            f"WHERE {' AND '.join(conds)} AND (s.path, s.id, a.id) > (?, ?, ?) ORDER BY s.path, s.id, a.id LIMIT ?"
        )
        key: tuple[str, str, int] = ("", "", -1)
        while True:
            rows = self._tuples(sql, [*params, *key, page])
            if not rows:
                return
            yield AnnotationPage(
                rows, self._raw_turns([r[0] for r in rows], turn_select), page_segments(self._tuples, rows)
            )
            last = rows[-1]
            key = (str(last[ROW_PATH]), str(last[ROW_SAMPLE_ID]), int(last[ROW_ID]))
            if len(rows) < page:
                return

    def annotated_path_root(
        self, config_hash: str | None = None, run_id: str | None = None, kind: Kind | None = None
    ) -> str | None:
        """The deepest folder holding every sample `iter_annotation_pages` would yield (of ``kind``).

        Two index walks (the first and the last path in order), whatever the size of the store:
        the paths between two sorted paths share every folder the two share.

        Returns:
            The folder, or None when no sample is annotated so or the paths are not absolute.
        """
        conds, params = _annotation_conds(config_hash, run_id)
        if kind is not None:
            conds.append("s.kind = ?")
            params.append(kind.value)
        where = " AND ".join(conds)
        ends = []
        for order in ("", " DESC"):
            sql = (
                f"SELECT s.path FROM samples s CROSS JOIN annotations a ON a.sample_id = s.id "
                f"WHERE {where} AND s.path > '' ORDER BY s.path{order} LIMIT 1"  # a range: an index search
            )
            found = self._tuples(sql, params)
            if not found:
                return None
            ends.append(os.path.dirname(str(found[0][0])))
        if not all(os.path.isabs(end) for end in ends):
            return None  # paths stored relative (to no known folder): written as they are
        return os.path.commonpath(ends)

    def _raw_turns(self, ann_ids: Sequence[int], select: str = _TURN_SELECT) -> dict[int, list[RawTurn]]:
        marks = ",".join("?" * len(ann_ids))
        rows = self._tuples(
            f"SELECT {select} FROM turns WHERE annotation_id IN ({marks}) ORDER BY annotation_id, idx", list(ann_ids)
        )
        return {ann_id: list(turns) for ann_id, turns in groupby(rows, itemgetter(0))}

    def _turns(self, ann_ids: Sequence[int]) -> dict[int, list[Turn]]:
        return {ann_id: turn_objects(raw) for ann_id, raw in self._raw_turns(ann_ids).items()}
