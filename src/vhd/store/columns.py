"""The columns of the JSON Lines and Parquet exports: one typed list, the one place to add a column.

Each `Column` gives its name, its Parquet type and how to compute its value from a sample and
its annotation; `record` builds a row from `RECORD_COLUMNS` and `parquet_schema` the Parquet
schema, so the two formats always hold the same columns with the same values. Another part of vhd
(or a plugin) adds a column with `add_column`, for example::

    add_column(Column("detector_score", lambda pa: pa.float64(), lambda s, a: s.meta.get("score")))

Types agree across formats: ``sample.meta`` is a JSON string in both (its keys differ per
sample, so no fixed struct fits); ``started_at`` / ``finished_at`` are UTC `datetime` values,
written as ISO-8601 text in JSON Lines and as ``timestamp[us, UTC]`` in Parquet.

A built-in column also reads a whole raw page of the store (`Column.from_page`, and for the
nested ``turns`` `Column.arrow_from_page`): the exports' fast path, which builds no record
objects. A column without them (a plugin's) still works: `page_cells` builds the page's records
for it. The module is long (about 540 lines) because each column's two readers stay side by side.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vhd.errors import ConfigError
from vhd.records import Annotation, Kind, Role, Sample, Source, Status
from vhd.store.reads import (
    ROW_CALLS,
    ROW_CATEGORIES,
    ROW_COMPLETION_TOKENS,
    ROW_CONFIG_HASH,
    ROW_COST,
    ROW_DECIDED_BY,
    ROW_ERROR,
    ROW_FINISHED_AT,
    ROW_FRAMES,
    ROW_GENERATOR,
    ROW_HARMFUL,
    ROW_ID,
    ROW_KEYWORD,
    ROW_KIND,
    ROW_LABEL,
    ROW_META,
    ROW_PATH,
    ROW_PROMPT_TOKENS,
    ROW_REASON,
    ROW_REFUSED,
    ROW_RUN_ID,
    ROW_SAMPLE_ID,
    ROW_SCORE,
    ROW_SOURCE,
    ROW_SPLIT,
    ROW_STARTED_AT,
    ROW_STATUS,
    AnnotationPage,
)
from vhd.store.rows import loads


@dataclass(frozen=True)
class Column:
    """One column of the JSON Lines and Parquet exports.

    Attributes:
        name: The key (JSON Lines) and column name (Parquet).
        arrow_type: ``arrow_type(pyarrow)`` gives the Parquet type (pyarrow is passed in so
            nothing imports it before an export needs it).
        value: ``value(sample, annotation)``: the cell, as a JSON value, or a `datetime` (written
            as ISO-8601 text in JSON Lines, a timestamp in Parquet).
        doc: What the column holds.
        from_page: Optional: ``from_page(page)`` gives the column's cells for a whole raw
            `AnnotationPage`, equal to ``value`` of each row's records, without building the
            records (the fast path of the built-in exports). A column without it still works:
            `page_cells` builds the records of the page for it.
        arrow_from_page: Optional: ``arrow_from_page(pyarrow, page)`` gives the column of a page
            directly as an Arrow array of ``arrow_type`` (the Parquet export prefers it to
            ``from_page``): for nested columns, where building a dict per cell for pyarrow to
            convert costs more than the rest of the row.
    """

    name: str
    arrow_type: Callable[[Any], Any]
    value: Callable[[Sample, Annotation], Any]
    doc: str = ""
    from_page: Callable[[AnnotationPage], list[Any]] | None = None
    arrow_from_page: Callable[[Any, AnnotationPage], Any] | None = None


def _utc(seconds: float | None) -> datetime | None:
    return datetime.fromtimestamp(seconds, tz=UTC) if seconds else None


def _sample_value(sample: Sample, ann: Annotation) -> dict[str, Any]:
    # the keys and values of `Sample.to_dict`, without its deep copy (the export only reads them)
    return {
        "id": sample.id,
        "kind": Kind(sample.kind).value,
        "path": sample.path,
        "source": None if sample.source is None else sample.source.value,
        "keyword": sample.keyword,
        "generator": sample.generator,
        "split": sample.split,
        "label": sample.harmful,
        "frames": list(sample.frames),
        "meta": json.dumps(sample.meta, ensure_ascii=False, default=str, sort_keys=True) if sample.meta else "{}",
    }


def _turns_value(sample: Sample, ann: Annotation) -> list[dict[str, Any]]:
    # the keys and values of `Turn.to_dict`, without `dataclasses.asdict`
    return [
        {
            "role": Role(t.role).value,
            "round": t.round,
            "text": t.text,
            "prompt_tokens": t.prompt_tokens,
            "completion_tokens": t.completion_tokens,
            "latency_s": t.latency_s,
            "refused": t.refused,
            "model": t.model,
            "finish_reason": t.finish_reason,
            "reasoning_tokens": t.reasoning_tokens,
        }
        for t in ann.turns
    ]


def _sample_type(pa: Any) -> Any:
    return pa.struct(
        [
            ("id", pa.string()),
            ("kind", pa.string()),
            ("path", pa.string()),
            ("source", pa.string()),
            ("keyword", pa.string()),
            ("generator", pa.string()),
            ("split", pa.string()),
            ("label", pa.bool_()),
            ("frames", pa.list_(pa.int64())),
            ("meta", pa.string()),
        ]
    )


def _verdict_value(sample: Sample, ann: Annotation) -> dict[str, Any]:
    v = ann.verdict
    return {
        "harmful": v.harmful,
        "reason": v.reason,
        "categories": list(v.categories),
        "score": v.score,
        "status": Status(v.status).value,
        "refused": v.refused,
    }


def _verdict_type(pa: Any) -> Any:
    return pa.struct(
        [
            ("harmful", pa.bool_()),
            ("reason", pa.string()),
            ("categories", pa.list_(pa.string())),
            ("score", pa.float64()),
            ("status", pa.string()),
            ("refused", pa.bool_()),
        ]
    )


def _usage_type(pa: Any) -> Any:
    return pa.struct(
        [
            ("calls", pa.int64()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("cost", pa.float64()),
        ]
    )


def _turns_type(pa: Any) -> Any:
    turn = pa.struct(
        [
            ("role", pa.string()),
            ("round", pa.int64()),
            ("text", pa.string()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("latency_s", pa.float64()),
            ("refused", pa.bool_()),
            ("model", pa.string()),
            ("finish_reason", pa.string()),
            ("reasoning_tokens", pa.int64()),
        ]
    )
    return pa.list_(turn)


def _timestamp(pa: Any) -> Any:
    return pa.timestamp("us", tz="UTC")


def _seed(sample: Sample, ann: Annotation) -> int | None:
    seed = sample.meta.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _string(pa: Any) -> Any:
    return pa.string()


# -- the same cells from raw pages (`Column.from_page`): no Sample / Annotation / Turn objects ------

_KIND_VALUES = frozenset(k.value for k in Kind)
_SOURCE_VALUES = frozenset(s.value for s in Source)
_STATUS_VALUES = frozenset(s.value for s in Status)
_ROLE_VALUES = frozenset(r.value for r in Role)


def _source_text(text: str | None) -> str | None:
    # `Source.parse(text).value`: a stored value is normally already clean
    if text is None or text in _SOURCE_VALUES:
        return text
    source = Source.parse(text)
    return None if source is None else source.value


def _meta_text(text: str) -> str:
    if text == "{}":
        return text
    meta = loads(text)
    return json.dumps(meta, ensure_ascii=False, default=str, sort_keys=True) if meta else "{}"


_NO_META: dict[str, Any] = {}  # only read


def _page_metas(page: AnnotationPage) -> list[Any]:
    return [_NO_META if r[ROW_META] == "{}" else loads(r[ROW_META]) for r in page.rows]


def _page_sample(page: AnnotationPage) -> list[dict[str, Any]]:
    kinds, sources = _KIND_VALUES, _SOURCE_VALUES
    return [
        {
            "id": r[ROW_SAMPLE_ID],
            "kind": r[ROW_KIND] if r[ROW_KIND] in kinds else Kind(r[ROW_KIND]).value,
            "path": r[ROW_PATH],
            "source": (
                r[ROW_SOURCE] if r[ROW_SOURCE] is None or r[ROW_SOURCE] in sources else _source_text(r[ROW_SOURCE])
            ),
            "keyword": r[ROW_KEYWORD],
            "generator": r[ROW_GENERATOR],
            "split": r[ROW_SPLIT],
            "label": None if r[ROW_LABEL] is None else bool(r[ROW_LABEL]),
            "frames": [] if r[ROW_FRAMES] == "[]" else json.loads(r[ROW_FRAMES]),
            "meta": _meta_text(r[ROW_META]),
        }
        for r in page.rows
    ]


def _page_source(page: AnnotationPage) -> list[str | None]:
    return [_source_text(r[ROW_SOURCE]) for r in page.rows]


def _page_generator(page: AnnotationPage) -> list[str | None]:
    return [r[ROW_GENERATOR] for r in page.rows]


def _page_prompt(page: AnnotationPage) -> list[Any]:
    return [meta.get("prompt") for meta in _page_metas(page)]


def _page_seed(page: AnnotationPage) -> list[int | None]:
    return [
        seed if isinstance(seed := meta.get("seed"), int) and not isinstance(seed, bool) else None
        for meta in _page_metas(page)
    ]


def _page_verdict(page: AnnotationPage) -> list[dict[str, Any]]:
    statuses = _STATUS_VALUES
    return [
        {
            "harmful": None if r[ROW_HARMFUL] is None else bool(r[ROW_HARMFUL]),
            "reason": r[ROW_REASON],
            "categories": [] if r[ROW_CATEGORIES] == "[]" else json.loads(r[ROW_CATEGORIES]),
            "score": r[ROW_SCORE],
            "status": r[ROW_STATUS] if r[ROW_STATUS] in statuses else Status(r[ROW_STATUS]).value,
            "refused": bool(r[ROW_REFUSED]),
        }
        for r in page.rows
    ]


def _page_usage(page: AnnotationPage) -> list[dict[str, Any]]:
    return [
        {
            "calls": r[ROW_CALLS],
            "prompt_tokens": r[ROW_PROMPT_TOKENS],
            "completion_tokens": r[ROW_COMPLETION_TOKENS],
            "cost": r[ROW_COST],
        }
        for r in page.rows
    ]


def _page_cell(at: int) -> Callable[[AnnotationPage], list[Any]]:
    def cells(page: AnnotationPage) -> list[Any]:
        return [r[at] for r in page.rows]

    return cells


def _page_utc(at: int) -> Callable[[AnnotationPage], list[datetime | None]]:
    def cells(page: AnnotationPage) -> list[datetime | None]:
        return [datetime.fromtimestamp(r[at], tz=UTC) if r[at] else None for r in page.rows]

    return cells


def _page_turns(page: AnnotationPage) -> list[list[dict[str, Any]]]:
    roles, turns = _ROLE_VALUES, page.turns
    none: tuple[Any, ...] = ()
    return [
        [
            {
                "role": t[1] if t[1] in roles else Role(t[1]).value,
                "round": t[2],
                "text": t[3],
                "prompt_tokens": t[4],
                "completion_tokens": t[5],
                "latency_s": t[6],
                "refused": bool(t[7]),
                "model": t[8],
                "finish_reason": t[9],
                "reasoning_tokens": t[10],
            }
            for t in turns.get(r[ROW_ID], none)
        ]
        for r in page.rows
    ]


def _turns_arrow(pa: Any, page: AnnotationPage) -> Any:
    """The ``turns`` column of a page as an Arrow list of structs, built from flat columns (no dict per turn)."""
    turns, none = page.turns, ()
    offsets = [0]
    flat: list[Any] = []
    for r in page.rows:
        flat.extend(turns.get(r[ROW_ID], none))
        offsets.append(len(flat))
    fields = list(_turns_type(pa).value_type)
    if not flat:
        children = [pa.array([], type=f.type) for f in fields]
    else:
        cols = list(zip(*flat, strict=True))
        roles: Sequence[Any] = cols[1]
        if not _ROLE_VALUES.issuperset(roles):
            roles = [Role(x).value for x in roles]
        refused = pa.array(cols[7], type=pa.int64()).cast(pa.bool_())  # stored as 0 / 1
        children = [
            refused if f.name == "refused" else pa.array(values, type=f.type)
            for values, f in zip([roles, *cols[2:]], fields, strict=True)
        ]
    items = pa.StructArray.from_arrays(children, fields=fields)
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), items, type=_turns_type(pa))


def _struct_arrow(pa: Any, struct_type: Any, children: list[Any]) -> Any:
    """A struct array (no null structs) of ``struct_type`` from one list of cells per field.

    A list given as ``("flag", cells)`` holds stored 0 / 1 / NULL integers for a boolean field.
    """
    fields = list(struct_type)
    arrays = [
        pa.array(cells[1], type=pa.int64()).cast(pa.bool_())
        if isinstance(cells, tuple)
        else pa.array(cells, type=f.type)
        for cells, f in zip(children, fields, strict=True)
    ]
    return pa.StructArray.from_arrays(arrays, fields=fields)


def _sample_arrow(pa: Any, page: AnnotationPage) -> Any:
    rows = page.rows
    kinds = [r[ROW_KIND] for r in rows]
    if not _KIND_VALUES.issuperset(kinds):
        kinds = [Kind(k).value for k in kinds]
    sources = [r[ROW_SOURCE] for r in rows]
    if not _SOURCE_VALUES.issuperset(sources):
        sources = [_source_text(x) for x in sources]
    children = [
        [r[ROW_SAMPLE_ID] for r in rows],
        kinds,
        [r[ROW_PATH] for r in rows],
        sources,
        [r[ROW_KEYWORD] for r in rows],
        [r[ROW_GENERATOR] for r in rows],
        [r[ROW_SPLIT] for r in rows],
        ("flag", [r[ROW_LABEL] for r in rows]),
        [[] if r[ROW_FRAMES] == "[]" else json.loads(r[ROW_FRAMES]) for r in rows],
        [_meta_text(r[ROW_META]) for r in rows],
    ]
    return _struct_arrow(pa, _sample_type(pa), children)


def _verdict_arrow(pa: Any, page: AnnotationPage) -> Any:
    rows = page.rows
    statuses = [r[ROW_STATUS] for r in rows]
    if not _STATUS_VALUES.issuperset(statuses):
        statuses = [Status(x).value for x in statuses]
    children = [
        ("flag", [r[ROW_HARMFUL] for r in rows]),
        [r[ROW_REASON] for r in rows],
        [[] if r[ROW_CATEGORIES] == "[]" else json.loads(r[ROW_CATEGORIES]) for r in rows],
        [r[ROW_SCORE] for r in rows],
        statuses,
        ("flag", [r[ROW_REFUSED] for r in rows]),
    ]
    return _struct_arrow(pa, _verdict_type(pa), children)


def _usage_arrow(pa: Any, page: AnnotationPage) -> Any:
    rows = page.rows
    children = [[r[at] for r in rows] for at in (ROW_CALLS, ROW_PROMPT_TOKENS, ROW_COMPLETION_TOKENS, ROW_COST)]
    return _struct_arrow(pa, _usage_type(pa), children)


RECORD_COLUMNS: list[Column] = [
    Column(
        "sample", _sample_type, _sample_value, "the sample record; meta as a JSON string", _page_sample, _sample_arrow
    ),
    Column(
        "source",
        _string,
        lambda s, a: None if s.source is None else s.source.value,
        "real or synthetic",
        _page_source,
    ),
    Column(
        "generator",
        _string,
        lambda s, a: s.generator,
        "what made a synthetic sample (vhd generate)",
        _page_generator,
    ),
    Column("prompt", _string, lambda s, a: s.meta.get("prompt"), "a synthetic sample's prompt text", _page_prompt),
    Column("seed", lambda pa: pa.int64(), _seed, "a synthetic sample's derived seed", _page_seed),
    Column(
        "verdict",
        _verdict_type,
        _verdict_value,
        "harmful, reason, categories, score, status, refused",
        _page_verdict,
        _verdict_arrow,
    ),
    Column(
        "usage",
        _usage_type,
        lambda s, a: {
            "calls": a.usage.calls,
            "prompt_tokens": a.usage.prompt_tokens,
            "completion_tokens": a.usage.completion_tokens,
            "cost": a.usage.cost,
        },
        "calls, tokens and cost of the debate",
        _page_usage,
        _usage_arrow,
    ),
    Column("config_hash", _string, lambda s, a: a.config_hash, "the configuration", _page_cell(ROW_CONFIG_HASH)),
    Column("run_id", _string, lambda s, a: a.run_id, "the run that wrote it", _page_cell(ROW_RUN_ID)),
    Column("error", _string, lambda s, a: a.error, "why the debate failed, if it did", _page_cell(ROW_ERROR)),
    Column(
        "started_at",
        _timestamp,
        lambda s, a: _utc(a.started_at),
        "when the debate started (UTC)",
        _page_utc(ROW_STARTED_AT),
    ),
    Column(
        "finished_at", _timestamp, lambda s, a: _utc(a.finished_at), "when it ended (UTC)", _page_utc(ROW_FINISHED_AT)
    ),
    Column(
        "decided_by",
        _string,
        lambda s, a: a.decided_by,
        "the cascade stage that decided, or debate",
        _page_cell(ROW_DECIDED_BY),
    ),
    Column("turns", _turns_type, _turns_value, "every turn, in order", _page_turns, _turns_arrow),
]
"""The columns of the JSON Lines and Parquet exports, in order: the one place to add a column."""


def add_column(column: Column) -> None:
    """Add a column to the JSON Lines and Parquet exports (after the built-in ones).

    Raises:
        ConfigError: A column of that name exists.
    """
    if any(c.name == column.name for c in RECORD_COLUMNS):
        raise ConfigError(f"export column {column.name!r} exists already: choose another name")
    RECORD_COLUMNS.append(column)


def record(sample: Sample, ann: Annotation) -> dict[str, Any]:
    """Return the JSON Lines / Parquet record of one annotation: one key per `RECORD_COLUMNS` entry.

    Keys: ``sample`` (the full sample record, ``meta`` as a JSON string), ``source``,
    ``generator``, ``prompt`` and ``seed`` (a synthetic sample's provenance; None for real ones),
    ``verdict`` (harmful, reason, categories, score, status, refused), ``usage``, ``config_hash``,
    ``run_id``, ``error``, ``started_at`` and ``finished_at`` (UTC `datetime`, None when unknown),
    ``decided_by`` (the cascade stage that decided, ``debate``, or None outside a cascade) and
    ``turns`` (every turn in order), then any column added with `add_column`.
    """
    return {c.name: c.value(sample, ann) for c in RECORD_COLUMNS}


def page_cells(page: AnnotationPage, columns: list[Column]) -> list[list[Any]]:
    """Return the cells of each column for a raw page, column by column (equal to `record` of each row).

    A column with `Column.from_page` reads the raw rows; for one without it (a plugin's column)
    the page's records are built, once, and its ``value`` is called on each.
    """
    pairs: list[tuple[Sample, Annotation]] | None = None
    out: list[list[Any]] = []
    for c in columns:
        if c.from_page is not None:
            out.append(c.from_page(page))
            continue
        if pairs is None:
            pairs = list(page.pairs())
        value = c.value
        out.append([value(s, a) for s, a in pairs])
    return out


def parquet_schema() -> Any:
    """Return the pyarrow schema of the Parquet export, built from `RECORD_COLUMNS`."""
    import pyarrow as pa

    return pa.schema([(c.name, c.arrow_type(pa)) for c in RECORD_COLUMNS])
