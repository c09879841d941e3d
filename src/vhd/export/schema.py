"""The export schema: one typed, flat column list, the one place to add a column.

Every export that holds vhd's own columns is derived from `RECORD_COLUMNS`: JSON Lines and
Parquet write exactly these columns, the Hugging Face export writes them and adds its media
columns (`vhd.export.hf`), and `arrow_schema`, `hf_features` and `json_schema` describe them for
pyarrow, ``datasets`` and JSON Schema readers, so a sample reads the same in every format. Each
`Column` gives its name, its Arrow type and how to compute its value from a sample and its
annotation; another part of vhd (or a plugin) adds a column with `add_column`, for example::

    add_column(Column("detector_score", lambda pa: pa.float64(), lambda s, a: s.meta.get("score")))

The columns are flat (one per field; no column is named ``sample``, which would hide
``DataFrame.sample``); only ``frames`` (ints), ``categories`` (strings), ``turns`` and
``segments`` (structs) are lists. Types agree across formats: ``meta`` is a JSON string everywhere (``'{}'`` when empty;
its keys differ per sample, so no fixed struct fits); ``started_at`` / ``finished_at`` are UTC
`datetime` values, ``timestamp[us, UTC]`` in Arrow and ISO-8601 text in JSON Lines; a column that
is null in every row keeps its type, and so does an empty list, when the file is read with the
schema (`vhd.export.read_table`, ``datasets.load_dataset("json", ...,
features=hf_features())``).

A built-in column also reads a whole raw page of the store (`Column.from_page`, and for the
nested ``turns`` `Column.arrow_from_page`): the exports' fast path, which builds no record
objects. A column without them (a plugin's) still works: `page_cells` builds the page's records
for it. The module is long (about 510 lines) because each column's two readers stay side by side.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vhd.errors import ConfigError
from vhd.records import Annotation, Kind, Role, Sample, Source, Status, credentials_trust
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
    ROW_POLICY,
    ROW_PROMPT_TOKENS,
    ROW_REASON,
    ROW_REFUSED,
    ROW_RUN_ID,
    ROW_SAMPLE_ID,
    ROW_SCORE,
    ROW_SEVERITY,
    ROW_SOURCE,
    ROW_SPLIT,
    ROW_STARTED_AT,
    ROW_STATUS,
    AnnotationPage,
)
from vhd.store.rows import loads


@dataclass(frozen=True)
class Column:
    """One column of the exports (JSON Lines, Parquet, the Hugging Face dataset).

    Attributes:
        name: The key (JSON Lines) and column name (Parquet, ``datasets``).
        arrow_type: ``arrow_type(pyarrow)`` gives the Arrow type, from which the Parquet,
            ``datasets`` and JSON Schema types derive (pyarrow is passed in so nothing imports it
            before an export needs it).
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


def _meta_value(sample: Sample, ann: Annotation) -> str:
    return json.dumps(sample.meta, ensure_ascii=False, default=str, sort_keys=True) if sample.meta else "{}"


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


def _segments_type(pa: Any) -> Any:
    segment = pa.struct(
        [
            ("start_s", pa.float64()),
            ("end_s", pa.float64()),
            ("harmful", pa.bool_()),
            ("score", pa.float64()),
            ("reason", pa.string()),
            ("categories", pa.list_(pa.string())),
            ("severity", pa.string()),
            ("decided_by", pa.string()),
        ]
    )
    return pa.list_(segment)


def _page_segments(page: AnnotationPage) -> list[list[dict[str, Any]]]:
    found, none = page.segments, ()
    return [[s.to_dict() for s in found.get((r[ROW_SAMPLE_ID], r[ROW_CONFIG_HASH]), none)] for r in page.rows]


def _timestamp(pa: Any) -> Any:
    return pa.timestamp("us", tz="UTC")


def _seed(sample: Sample, ann: Annotation) -> int | None:
    seed = sample.meta.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _string(pa: Any) -> Any:
    return pa.string()


def _bool(pa: Any) -> Any:
    return pa.bool_()


def _int(pa: Any) -> Any:
    return pa.int64()


def _float(pa: Any) -> Any:
    return pa.float64()


def _ints(pa: Any) -> Any:
    return pa.list_(pa.int64())


def _strings(pa: Any) -> Any:
    return pa.list_(pa.string())


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


def _page_kind(page: AnnotationPage) -> list[str]:
    kinds = [r[ROW_KIND] for r in page.rows]
    return kinds if _KIND_VALUES.issuperset(kinds) else [Kind(k).value for k in kinds]


def _page_source(page: AnnotationPage) -> list[str | None]:
    sources = [r[ROW_SOURCE] for r in page.rows]
    return sources if _SOURCE_VALUES.issuperset(sources) else [_source_text(x) for x in sources]


def _page_status(page: AnnotationPage) -> list[str]:
    statuses = [r[ROW_STATUS] for r in page.rows]
    return statuses if _STATUS_VALUES.issuperset(statuses) else [Status(x).value for x in statuses]


def _page_meta(page: AnnotationPage) -> list[str]:
    return [_meta_text(r[ROW_META]) for r in page.rows]


def _page_prompt(page: AnnotationPage) -> list[Any]:
    return [meta.get("prompt") for meta in _page_metas(page)]


def _page_seed(page: AnnotationPage) -> list[int | None]:
    return [
        seed if isinstance(seed := meta.get("seed"), int) and not isinstance(seed, bool) else None
        for meta in _page_metas(page)
    ]


def _page_credentials(page: AnnotationPage) -> list[str | None]:
    return [credentials_trust(meta) for meta in _page_metas(page)]


def _page_cell(at: int) -> Callable[[AnnotationPage], list[Any]]:
    def cells(page: AnnotationPage) -> list[Any]:
        return [r[at] for r in page.rows]

    return cells


def _page_flag(at: int, *, nullable: bool = True) -> Callable[[AnnotationPage], list[bool | None]]:
    """A stored 0 / 1 (/ NULL) flag as a bool (None stays None when ``nullable``, else False)."""

    def cells(page: AnnotationPage) -> list[bool | None]:
        if nullable:
            return [None if r[at] is None else bool(r[at]) for r in page.rows]
        return [bool(r[at]) for r in page.rows]

    return cells


def _page_list(at: int) -> Callable[[AnnotationPage], list[list[Any]]]:
    """A stored JSON list (``'[]'`` read without parsing)."""

    def cells(page: AnnotationPage) -> list[list[Any]]:
        return [[] if r[at] == "[]" else json.loads(r[at]) for r in page.rows]

    return cells


def _page_utc(at: int) -> Callable[[AnnotationPage], list[datetime | None]]:
    def cells(page: AnnotationPage) -> list[datetime | None]:
        return [datetime.fromtimestamp(r[at], tz=UTC) if r[at] else None for r in page.rows]

    return cells


def _severity_value(sample: Sample, ann: Annotation) -> str | None:
    return ann.verdict.severity if ann.verdict.harmful else None


def _page_severity(page: AnnotationPage) -> list[str | None]:
    # stored only with a harmful verdict (`Store.save_annotation`); a refusal-made harmful has none
    return [r[ROW_SEVERITY] if r[ROW_HARMFUL] == 1 else None for r in page.rows]


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


RECORD_COLUMNS: list[Column] = [
    Column("id", _string, lambda s, a: s.id, "the sample's sha256", _page_cell(ROW_SAMPLE_ID)),
    Column("kind", _string, lambda s, a: Kind(s.kind).value, "image or video", _page_kind),
    Column("path", _string, lambda s, a: s.path, "the media file (or frame folder)", _page_cell(ROW_PATH)),
    Column(
        "source",
        _string,
        lambda s, a: None if s.source is None else s.source.value,
        "real or synthetic",
        _page_source,
    ),
    Column("keyword", _string, lambda s, a: s.keyword, "the keyword it was found with", _page_cell(ROW_KEYWORD)),
    Column("generator", _string, lambda s, a: s.generator, "what made a synthetic sample", _page_cell(ROW_GENERATOR)),
    Column("split", _string, lambda s, a: s.split, "train, test, ... (vhd split)", _page_cell(ROW_SPLIT)),
    Column("label", _bool, lambda s, a: s.harmful, "a human label given with the sample", _page_flag(ROW_LABEL)),
    Column("frames", _ints, lambda s, a: list(s.frames), "a video's sampled frame indices", _page_list(ROW_FRAMES)),
    Column("meta", _string, _meta_value, "other manifest fields, as JSON text ('{}' when none)", _page_meta),
    Column("prompt", _string, lambda s, a: s.meta.get("prompt"), "a synthetic sample's prompt text", _page_prompt),
    Column("seed", _int, _seed, "a synthetic sample's derived seed", _page_seed),
    Column(
        "credentials",
        _string,
        lambda s, a: credentials_trust(s.meta),
        "the file's C2PA manifest: trusted, untrusted (a claim only) or invalid; null without one",
        _page_credentials,
    ),
    Column(
        "harmful",
        _bool,
        lambda s, a: a.verdict.harmful,
        "the verdict (null when undecided, and when the judge refused: see status)",
        _page_flag(ROW_HARMFUL),
    ),
    Column("reason", _string, lambda s, a: a.verdict.reason, "the judge's reason", _page_cell(ROW_REASON)),
    Column(
        "categories",
        _strings,
        lambda s, a: list(a.verdict.categories),
        "harm categories",
        _page_list(ROW_CATEGORIES),
    ),
    Column("score", _float, lambda s, a: a.verdict.score, "the judge's P(harmful)", _page_cell(ROW_SCORE)),
    Column(
        "status",
        _string,
        lambda s, a: Status(a.verdict.status).value,
        "ok, refused, unparsed, truncated or error",
        _page_status,
    ),
    Column(
        "refused",
        _bool,
        lambda s, a: bool(a.verdict.refused),
        "a model refused",
        _page_flag(ROW_REFUSED, nullable=False),
    ),
    Column("calls", _int, lambda s, a: a.usage.calls, "model calls of the debate", _page_cell(ROW_CALLS)),
    Column("prompt_tokens", _int, lambda s, a: a.usage.prompt_tokens, "prompt tokens", _page_cell(ROW_PROMPT_TOKENS)),
    Column(
        "completion_tokens",
        _int,
        lambda s, a: a.usage.completion_tokens,
        "completion tokens",
        _page_cell(ROW_COMPLETION_TOKENS),
    ),
    Column("cost", _float, lambda s, a: a.usage.cost, "dollars, when prices are configured", _page_cell(ROW_COST)),
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
    Column(
        "segments",
        _segments_type,
        lambda s, a: [seg.to_dict() for seg in a.verdict.segments],
        "a segmented video's spans with their verdicts (vhd annotate --segments); empty otherwise",
        _page_segments,
    ),
    Column(
        "severity",
        _string,
        _severity_value,
        "the policy's severity level of a harmful verdict; null when not harmful or the policy has no scale",
        _page_severity,
    ),
    Column(
        "policy",
        _string,
        lambda s, a: a.policy,
        "name@version of the policy the run used (vhd annotate --policy); null for runs before policies",
        _page_cell(ROW_POLICY),
    ),
]
"""The export columns, in order: the one place to add a column."""


def add_column(column: Column) -> None:
    """Add a column to every export (JSON Lines, Parquet, the Hugging Face dataset), after the built-in ones.

    Raises:
        ConfigError: A column of that name exists.
    """
    if any(c.name == column.name for c in RECORD_COLUMNS):
        raise ConfigError(f"export column {column.name!r} exists already: choose another name")
    RECORD_COLUMNS.append(column)


def record(sample: Sample, ann: Annotation) -> dict[str, Any]:
    """Return the export record of one annotation: one key per `RECORD_COLUMNS` entry, in order.

    The sample (``id``, ``kind``, ``path``, ``source``, ``keyword``, ``generator``, ``split``,
    ``label``, ``frames``, ``meta`` as JSON text), a synthetic sample's ``prompt`` and ``seed``,
    ``credentials`` (the trust of the file's C2PA manifest), the verdict (``harmful``, ``reason``,
    ``categories``, ``score``, ``status``, ``refused``),
    the usage (``calls``, ``prompt_tokens``, ``completion_tokens``, ``cost``), ``config_hash``,
    ``run_id``, ``error``, ``started_at`` and ``finished_at`` (UTC `datetime`, None when unknown),
    ``decided_by`` (the cascade stage that decided, ``debate``, or None outside a cascade),
    ``turns`` (every turn in order), ``segments`` (a segmented video's spans, each a
    `vhd.records.Segment.to_dict`; empty for images and unsegmented videos), ``severity`` (the
    policy's level of a harmful verdict) and ``policy`` (``name@version`` of the run's policy), then
    any column added with `add_column`.
    """
    return {c.name: c.value(sample, ann) for c in RECORD_COLUMNS}


def json_default(value: object) -> object:
    """``json.dumps``'s ``default`` for a record: a `datetime` as ISO-8601 text (the JSON Lines form)."""
    if isinstance(value, datetime):
        return value.isoformat(timespec="microseconds")
    return str(value)


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


def arrow_schema() -> Any:
    """Return the Arrow schema of the export (`RECORD_COLUMNS`): Parquet's, and the one JSON Lines is read with."""
    import pyarrow as pa

    return pa.schema([(c.name, c.arrow_type(pa)) for c in RECORD_COLUMNS])


parquet_schema = arrow_schema
"""The Parquet schema: `arrow_schema` (the name earlier versions used)."""


HARMFUL_NAMES = ["not_harmful", "harmful"]
"""``harmful``'s class names where ``datasets`` reads it (a ``ClassLabel``: 0 not harmful, 1 harmful)."""


def hf_features() -> Any:
    """Return the ``datasets.Features`` of the export's columns: the HF export's, media aside.

    Every column has the type of `arrow_schema` (converted by ``datasets``) except ``harmful``, a
    ``ClassLabel`` (`HARMFUL_NAMES`) as in the HF export (``vhd export --format hf``), so that
    ``train_test_split(stratify_by_column="harmful")`` works whichever file the dataset came from.
    ``datasets.load_dataset("json", data_files="a.jsonl", features=hf_features())`` (or
    ``"parquet"``) reads a JSON Lines or Parquet export with exactly the HF export's features,
    ``image`` and ``video_frames`` aside: timestamps as timestamps, all-null columns and empty
    lists typed, ``harmful`` true/false read as the class index 1/0.
    """
    import datasets

    feats = datasets.Features.from_arrow_schema(arrow_schema())
    feats["harmful"] = datasets.ClassLabel(names=HARMFUL_NAMES)
    return feats


def _json_type(pa: Any, t: Any) -> dict[str, Any]:
    """The JSON Schema of a value of Arrow type ``t`` (every value may be null)."""
    if pa.types.is_boolean(t):
        return {"type": ["boolean", "null"]}
    if pa.types.is_integer(t):
        return {"type": ["integer", "null"]}
    if pa.types.is_floating(t):
        return {"type": ["number", "null"]}
    if pa.types.is_timestamp(t):
        return {"type": ["string", "null"], "format": "date-time"}
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return {"type": ["string", "null"]}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": ["array", "null"], "items": _json_type(pa, t.value_type)}
    if pa.types.is_struct(t):
        fields = list(t)
        return {
            "type": ["object", "null"],
            "properties": {f.name: _json_type(pa, f.type) for f in fields},
            "required": [f.name for f in fields],
            "additionalProperties": False,
        }
    raise ConfigError(f"export columns of Arrow type {t} have no JSON Schema: use a string, number, list or struct")


def json_schema() -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) of one line of the JSON Lines export, from `arrow_schema`.

    Every column is present in every line; a cell may be null. Timestamps are ISO-8601 text
    (``format: date-time``).
    """
    import pyarrow as pa

    docs = {c.name: c.doc for c in RECORD_COLUMNS}
    properties = {}
    for f in arrow_schema():
        prop = _json_type(pa, f.type)
        if docs.get(f.name):
            prop["description"] = docs[f.name]
        properties[f.name] = prop
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "vhd annotation export (one JSON Lines record)",
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
