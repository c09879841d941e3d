"""Row types of the store, and conversions between SQLite rows and vhd records (and errors)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from vhd.errors import StoreWriteError
from vhd.records import Annotation, Kind, Sample, Source, Status, Turn, Usage, Verdict


@dataclass(frozen=True)
class RunInfo:
    """One annotation run as recorded in the store.

    Attributes:
        id: Run id (uuid4 hex).
        config: The run's configuration, as given to `Store.start_run`.
        config_hash: Hash of everything that changes the debate's messages or decoding.
        models: Role name to ``backend:model`` spec.
        prompt_hash: Hash of the prompt templates used.
        vhd_version: The vhd version that ran it.
        command: The command line (secrets redacted).
        started_at: Unix time the run started.
        finished_at: Unix time it finished; None while running or after a crash.
        summary: What `Store.finish_run` recorded; None until then.
        policy_hash: The content hash of the policy it used (`Store.get_policy`); None for a run from
            before policies were recorded.
    """

    id: str
    config: dict[str, Any]
    config_hash: str
    models: dict[str, str]
    prompt_hash: str
    vhd_version: str
    command: str
    started_at: float
    finished_at: float | None
    summary: dict[str, Any] | None
    policy_hash: str | None = None


@dataclass(frozen=True)
class SkipInfo:
    """A file a run could not use.

    Attributes:
        run_id: The run that skipped it (None when recorded outside a run).
        path: The file.
        reason: Why it was skipped, one line.
        at: Unix time of the skip.
    """

    run_id: str | None
    path: str
    reason: str
    at: float


@dataclass(frozen=True)
class VerdictRow:
    """One annotation's decision with its sample's path and kind (see `Store.final_verdicts`).

    Attributes:
        sample_id: The sample.
        config_hash: The configuration the annotation was made under.
        status: ``ok``, ``refused`` or ``unparsed``.
        harmful: The decision; None when the answer could not be read.
        score: P(harmful), when known.
        reason: The verdict's reason ("" when none).
        path: The sample's file.
        kind: The sample's kind (``image``, ``video``).
        decided_by: The cascade stage that decided it, ``debate``, or None outside a cascade.
    """

    sample_id: str
    config_hash: str
    status: str
    harmful: bool | None
    score: float | None
    reason: str
    path: str
    kind: str
    decided_by: str | None = None


_KINDS = {k.value: k for k in Kind}
_STATUSES = {s.value: s for s in Status}
_EMPTY_JSON: dict[str, Any] = {"[]": list, "{}": dict}


def loads(text: str) -> Any:
    """JSON from a store column; the empty list and object (most rows) skip the parser."""
    empty = _EMPTY_JSON.get(text)
    return empty() if empty is not None else json.loads(text)


def dumps(value: Any) -> str:
    """JSON for a store column (UTF-8 kept, unknown types as strings)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def sample_from_row(r: sqlite3.Row, *, id_key: str = "id") -> Sample:
    """Build a `Sample` from a row holding the sample columns (the ``label`` column is `Sample.harmful`)."""
    return Sample(
        id=r[id_key],
        kind=_KINDS.get(r["kind"]) or Kind(r["kind"]),
        path=r["path"],
        source=None if r["source"] is None else Source.parse(r["source"]),
        keyword=r["keyword"],
        generator=r["generator"],
        split=r["split"],
        harmful=None if r["label"] is None else bool(r["label"]),
        frames=loads(r["frames_json"]),
        meta=loads(r["meta_json"]),
    )


def annotation_from_row(r: sqlite3.Row, turns: list[Turn]) -> Annotation:
    """Build an `Annotation` from an annotations row and its turns."""
    return Annotation(
        sample_id=r["sample_id"],
        run_id=r["run_id"],
        config_hash=r["config_hash"],
        verdict=Verdict(
            harmful=None if r["harmful"] is None else bool(r["harmful"]),
            reason=r["reason"],
            categories=loads(r["categories_json"]),
            score=r["score"],
            status=_STATUSES.get(r["status"]) or Status(r["status"]),
            refused=bool(r["refused"]),
            severity=r["severity"] if "severity" in r.keys() else None,  # noqa: SIM118 (a Row's `in` reads values)
        ),
        turns=turns,
        usage=Usage(
            calls=r["calls"],
            prompt_tokens=r["prompt_tokens"],
            completion_tokens=r["completion_tokens"],
            cost=r["cost"],
        ),
        error=r["error"],
        started_at=r["started_at"] or 0.0,
        finished_at=r["finished_at"] or 0.0,
        decided_by=r["decided_by"],
        policy=r["policy"] if "policy" in r.keys() else None,  # noqa: SIM118
    )


def run_from_row(r: sqlite3.Row) -> RunInfo:
    """Build a `RunInfo` from a runs row."""
    return RunInfo(
        id=r["id"],
        config=json.loads(r["config_json"]),
        config_hash=r["config_hash"],
        models=json.loads(r["models_json"]),
        prompt_hash=r["prompt_hash"],
        vhd_version=r["vhd_version"],
        command=r["command"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        summary=None if r["summary_json"] is None else json.loads(r["summary_json"]),
        policy_hash=r["policy_hash"] if "policy_hash" in r.keys() else None,  # noqa: SIM118
    )


def write_error(path: object, exc: sqlite3.OperationalError, what: str = "store") -> StoreWriteError:
    """A failed write as one line that says what happened (full disk, read-only, locked, I/O)."""
    text = str(exc)
    if "full" in text:
        return StoreWriteError(f"the disk holding {what} {path} is full ({text})", full=True)
    if "readonly" in text or "read-only" in text:
        return StoreWriteError(f"{what} {path} cannot be written: it is read-only ({text})")
    if "locked" in text or "busy" in text:
        return StoreWriteError(f"{what} {path} stayed locked by another process ({text})")
    return StoreWriteError(f"cannot write {what} {path} ({text})")
