"""The columns of the JSON Lines and Parquet exports: one typed list, the one place to add a column.

Each `Column` gives its name, its Parquet type and how to compute its value from a sample and
its annotation; `record` builds a row from `RECORD_COLUMNS` and `parquet_schema` the Parquet
schema, so the two formats always hold the same columns with the same values. Another part of vhd
(or a plugin) adds a column with `add_column`, for example::

    add_column(Column("detector_score", lambda pa: pa.float64(), lambda s, a: s.meta.get("score")))

Types agree across formats: ``sample.meta`` is a JSON string in both (its keys differ per
sample, so no fixed struct fits); ``started_at`` / ``finished_at`` are UTC `datetime` values,
written as ISO-8601 text in JSON Lines and as ``timestamp[us, UTC]`` in Parquet.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vhd.errors import ConfigError
from vhd.records import Annotation, Kind, Role, Sample, Status


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
    """

    name: str
    arrow_type: Callable[[Any], Any]
    value: Callable[[Sample, Annotation], Any]
    doc: str = ""


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


RECORD_COLUMNS: list[Column] = [
    Column("sample", _sample_type, _sample_value, "the sample record; meta as a JSON string"),
    Column("source", _string, lambda s, a: None if s.source is None else s.source.value, "real or synthetic"),
    Column("generator", _string, lambda s, a: s.generator, "what made a synthetic sample (vhd generate)"),
    Column("prompt", _string, lambda s, a: s.meta.get("prompt"), "a synthetic sample's prompt text"),
    Column("seed", lambda pa: pa.int64(), _seed, "a synthetic sample's derived seed"),
    Column("verdict", _verdict_type, _verdict_value, "harmful, reason, categories, score, status, refused"),
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
    ),
    Column("config_hash", lambda pa: pa.string(), lambda s, a: a.config_hash, "the configuration"),
    Column("run_id", lambda pa: pa.string(), lambda s, a: a.run_id, "the run that wrote it"),
    Column("error", lambda pa: pa.string(), lambda s, a: a.error, "why the debate failed, if it did"),
    Column("started_at", _timestamp, lambda s, a: _utc(a.started_at), "when the debate started (UTC)"),
    Column("finished_at", _timestamp, lambda s, a: _utc(a.finished_at), "when it ended (UTC)"),
    Column("decided_by", _string, lambda s, a: a.decided_by, "the cascade stage that decided, or debate"),
    Column("turns", _turns_type, _turns_value, "every turn, in order"),
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


def parquet_schema() -> Any:
    """Return the pyarrow schema of the Parquet export, built from `RECORD_COLUMNS`."""
    import pyarrow as pa

    return pa.schema([(c.name, c.arrow_type(pa)) for c in RECORD_COLUMNS])
