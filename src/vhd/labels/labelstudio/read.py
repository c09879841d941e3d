"""Reading Label Studio's JSON export safely: parse, validate each task, pick its decision.

The export is a JSON list of tasks (Label Studio's documented "JSON" export)::

    [{"id": 7, "data": {...}, "annotations": [{"id": 12, "result": [{"from_name": "harmful",
      "to_name": "media", "type": "choices", "value": {"choices": ["Harmful"]}}, ...],
      "was_cancelled": false, "created_at": "...", "updated_at": "...", "completed_by": 1}]}]

Nothing in the file is trusted. `read_tasks` refuses, with one line that says what to do, only a
file that cannot be such a list at all (unreadable, not UTF-8 where it matters, not JSON, not a
list, no tasks). Everything else is judged task by task: `task_decision` returns the decision of
one task or the one-line reason it is left out, so one bad task never stops the others.

Hostile input handled here: bytes that are not UTF-8 (the task holding them is named), nesting
deeper than `MAX_DEPTH` (checked before `json` parses, so no `RecursionError`; the deep task is
named), integers longer than Python converts (4300 digits: kept as `HugeNumber`, named where a
number is needed; ids must be 64-bit, up to `MAX_ID`), wrong types at any level (the pydantic
models below, strict: ``"yes"`` is not ``true``), text with NUL or lone surrogates (never written to
the store). Repeated task ids are `vhd.labels.labelstudio.convert`'s to name.

Which annotation decides: the newest by ``updated_at`` (else ``created_at``), parsed as ISO 8601
(``Z``, offsets and fractions of a second; a time without an offset is UTC). When two are equally
new, or either time is missing or unparseable, the higher annotation ``id`` is the newer, then the
later one in the file. The same rule picks between tasks that name the same sample.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from vhd.errors import ConfigError
from vhd.fileio import json_depth
from vhd.labels.labelstudio import timeline as tl
from vhd.records import Segment

HARMFUL, NOT_HARMFUL = "Harmful", "Not harmful"
"""The two choices of the ``harmful`` control."""

MAX_DEPTH = 100
"""Deepest nesting of lists and objects allowed in one task (a real task is about 8 deep)."""

MAX_ID = 2**63 - 1
"""Largest task or annotation id read (Label Studio's ids are 64-bit database keys)."""

_FIX = "not Label Studio's export format; fix the task or export it again"
_AGAIN = "export the project from Label Studio again as JSON (Export > JSON) and pass that file"


class HugeNumber:
    """An integer literal too long to be an id or a count (kept unconverted: only its length)."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


@dataclass(frozen=True)
class TooDeep:
    """A task the depth guard refused to parse, kept in its place in the list."""

    depth: int


def _parse_int(literal: str) -> int | HugeNumber:
    try:
        return int(literal)
    except ValueError:  # more digits than Python converts (4300 by default)
        return HugeNumber(len(literal) - literal.startswith("-"))


_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]')


def _top_level_items(text: str, where: str) -> list[str | TooDeep]:
    """Split a JSON list into its items' texts without parsing them (for a file nested too deep)."""
    start = len(text) - len(text.lstrip())
    if not text.startswith("[", start):
        kind = {"{": "an object", '"': "a string", "n": "null", "t": "a boolean", "f": "a boolean"}
        raise ConfigError(f"{where} should be a list of tasks, not {kind.get(text[start], 'a number')}: {_AGAIN}")
    items: list[str | TooDeep] = []
    depth = deepest = 0
    begin = start + 1
    for match in _TOKEN.finditer(text, start + 1):
        char = text[match.start()]
        if char == '"':
            continue
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}" and depth:
            depth -= 1
        elif depth:  # a comma inside a task
            continue
        elif char == "}":
            raise ConfigError(f"{where} is not JSON: its brackets do not match; {_AGAIN}")
        else:  # a comma between tasks, or the list's closing bracket
            piece = text[begin : match.start()]
            items.append(TooDeep(deepest) if deepest > MAX_DEPTH else piece)
            begin, deepest = match.end(), 0
            if char == "]":
                if text[match.end() :].strip():
                    raise ConfigError(f"{where} is not JSON: text after the list of tasks; {_AGAIN}")
                if len(items) == 1 and isinstance(items[0], str) and not items[0].strip():
                    return []
                return items
    raise ConfigError(f"{where} is not JSON: its brackets never close; {_AGAIN}")


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float | HugeNumber):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else "not JSON"


def read_tasks(path: str | os.PathLike[str]) -> tuple[list[Any], bool]:
    """Read a Label Studio JSON export into its raw tasks, each still to be checked.

    Args:
        path: The export file.

    Returns:
        The tasks as parsed (a task too deep to parse is a `TooDeep` in its place), and whether
        the file held bytes that are not UTF-8 (kept as lone surrogates; `validate_task` names
        the task whose text holds them).

    Raises:
        ConfigError: The file cannot be a list of tasks (one line with what to do).
    """
    where = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read Label Studio export {where}: {exc.strerror or exc}; {_AGAIN}") from None
    bom = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    raw = raw[bom:]
    if not raw.strip():
        raise ConfigError(f"Label Studio export {where} is empty: {_AGAIN}")
    try:
        text, bad_byte = raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        text, bad_byte = raw.decode("utf-8", "surrogateescape"), bom + exc.start
    del raw
    if json_depth(text) > MAX_DEPTH + 1:  # the guard: json would recurse that deep (RecursionError)
        pieces = _top_level_items(text, where)
        tasks: list[Any] = [p if isinstance(p, TooDeep) else _loads(p, where, bad_byte) for p in pieces]
    else:
        data = _loads(text, where, bad_byte)
        if not isinstance(data, list):
            raise ConfigError(f"{where} should be a list of tasks, not {_json_kind(data)}: {_AGAIN}")
        tasks = data
    if not tasks:
        raise ConfigError(f"Label Studio export {where} holds no tasks: {_AGAIN}")
    return tasks, bad_byte is not None


def _loads(text: str, where: str, bad_byte: int | None) -> Any:
    try:
        try:
            return json.loads(text)
        except ValueError as exc:
            if isinstance(exc, json.JSONDecodeError):
                raise
            return json.loads(text, parse_int=_parse_int)  # an integer too long to convert: keep its length
    except RecursionError:  # unreachable behind the depth guard; kept as the last line of defence
        raise ConfigError(f"{where} is nested too deeply to be a Label Studio export: {_AGAIN}") from None
    except ValueError as exc:
        if bad_byte is not None:
            raise ConfigError(f"{where} is not UTF-8 (a bad byte at offset {bad_byte}): {_AGAIN}") from None
        detail = f"{exc.msg} at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else exc
        raise ConfigError(f"{where} is not JSON ({detail}): {_AGAIN}") from None


# --- the documented shape of a task (unknown keys are allowed and ignored) ------------------------


def _text(value: str, info: ValidationInfo) -> str:
    """Text that can be stored and printed: no NUL, no lone surrogates (undecodable bytes)."""
    if "\x00" in value:
        raise ValueError("holds a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        if (info.context or {}).get("not_utf8") and any("\udc80" <= c <= "\udcff" for c in value):
            raise ValueError("holds bytes that are not UTF-8") from None
        raise ValueError("holds characters that are not valid text (lone surrogates)") from None
    return value


Text = Annotated[str, AfterValidator(_text)]
Id = Annotated[int, Field(ge=0, le=MAX_ID)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class Value(_Strict):
    """A result's ``value``: ``choices`` for a Choices control, ``text`` for a TextArea, ``ranges`` for TimelineLabels.

    ``ranges`` and ``timelinelabels`` are checked where they are read (`task_decision`), so a
    region of another control that uses those keys never makes a task unreadable.
    """

    choices: list[Text] | None = None
    text: list[str] | None = None
    ranges: list[Any] | None = None
    timelinelabels: list[Any] | None = None

    @field_validator("text", mode="before")
    @classmethod
    def _texts(cls, value: Any, info: ValidationInfo) -> list[str] | None:
        if value is None:
            return None
        if isinstance(value, str):  # Label Studio writes a list; one string is read as one entry
            value = [value]
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise ValueError(f"should be a string or a list of strings, not {_json_kind(value)}")
        return [_text(t, info) for t in value]


class Result(_Strict):
    """One region of an annotation's ``result`` (relations have no ``from_name`` or ``value``)."""

    from_name: Text | None = None
    to_name: Text | None = None
    type: Text | None = None
    value: Value | None = None


class Annotation(_Strict):
    """One person's submission (or a cancelled one) on a task."""

    id: Id | None = None
    result: list[Result] | None = None
    was_cancelled: bool = False
    created_at: str | None = None
    updated_at: str | None = None
    completed_by: Any = None

    @field_validator("completed_by")
    @classmethod
    def _user(cls, value: Any) -> Any:
        if value is None or isinstance(value, dict) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise ValueError(f"should be a user id or a user object, not {_json_kind(value)}")


class Data(_Strict):
    """The task's ``data``: how it names its sample (as `vhd.labels.labelstudio.convert` exports it)."""

    sample_id: Text | None = None
    path: Text | None = None
    image: Text | None = None
    video: Text | None = None
    fps: Any = None


class Task(_Strict):
    """One task of the export (``predictions``, ``drafts``, ``meta``... are not read)."""

    id: Id | None = None
    data: Data
    annotations: list[Annotation] | None = None


_SHOULD_BE = {
    "model_type": "an object",
    "dict_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "true or false",
}


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".")


def problem(exc: ValidationError) -> str:
    """One line for a task that does not fit `Task`: the first problem, where it is, and a count."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    where, kind, got = _where(first["loc"]), first["type"], first.get("input")
    if kind == "missing":
        text = f"{where} is missing"
    elif isinstance(got, HugeNumber):
        text = f"{where} is a number of {got.digits} digits, not one Label Studio writes"
    elif kind in ("greater_than_equal", "less_than_equal"):
        text = f"{where} is outside 0 to 2**63 - 1, not an id Label Studio writes"
    elif kind in _SHOULD_BE:
        text = f"{where} should be {_SHOULD_BE[kind]}, not {_json_kind(got)}"
    elif kind == "value_error":
        text = f"{where} {first['ctx']['error']}"
    else:
        text = f"{where}: {first['msg']}"
    more = len(errors) - 1
    return text.strip() + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")


# --- the decision of a task --------------------------------------------------------------------


Stamp = tuple[datetime | None, int | None, int]
"""What orders annotations (and tasks naming one sample): time, annotation id, order in the file."""


@dataclass(frozen=True)
class Decision:
    """What a task's newest submitted annotation says, and when (to pick among several).

    Attributes:
        harmful: The Harmful / Not harmful choice.
        reason: The ``reason`` text, if any.
        categories: The ``categories`` choices.
        stamp: The annotation's time, id and the task's position (`is_newer` orders them).
        segments: A video's harmful spans drawn with ``TimelineLabels`` (`vhd.labels.labelstudio.timeline`);
            None when the annotation has none.
    """

    harmful: bool
    reason: str | None
    categories: tuple[str, ...]
    stamp: Stamp
    segments: tuple[Segment, ...] | None = None


def parse_time(text: str | None) -> datetime | None:
    """An ISO 8601 time (``Z``, offsets, fractions); no offset means UTC; None if unparseable."""
    if not text or len(text) > 64:
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def is_newer(a: Stamp, b: Stamp) -> bool:
    """Whether ``a`` is newer than ``b``: by time, else (a tie, a time missing) by id, then order."""
    if a[0] is not None and b[0] is not None and a[0] != b[0]:
        return a[0] > b[0]
    return (-1 if a[1] is None else a[1], a[2]) > (-1 if b[1] is None else b[1], b[2])


def stamp(ann: Annotation, order: int) -> Stamp:
    """An annotation's `Stamp`: ``updated_at``, else ``created_at``; its id; its order."""
    return (parse_time(ann.updated_at) or parse_time(ann.created_at), ann.id, order)


def newest(annotations: list[Annotation]) -> tuple[Stamp, Annotation] | None:
    """The newest annotation that was not cancelled (see the module's rule), with its `Stamp`."""
    best: tuple[Stamp, Annotation] | None = None
    for index, ann in enumerate(annotations):
        if not ann.was_cancelled:
            key = stamp(ann, index)
            if best is None or is_newer(key, best[0]):
                best = (key, ann)
    return best


def _quote(text: str) -> str:
    return repr(text[:40] + ("..." if len(text) > 40 else ""))


def task_decision(task: Task, order: int) -> Decision | str:
    """The decision of a valid task, or the one-line reason it has none.

    Args:
        task: The task.
        order: Its position in the file (breaks ties between tasks naming one sample).
    """
    annotations = task.annotations or []
    picked = newest(annotations)
    if picked is None:
        cancelled = f" ({len(annotations)} cancelled)" if annotations else ""
        return f"no submitted annotation{cancelled}: submit one in Label Studio, or leave the task out"
    (when, _, _), ann = picked
    this = "its newest annotation" + (f" (id {ann.id})" if ann.id is not None else "")
    chosen: list[str] = []
    reason: str | None = None
    categories: tuple[str, ...] = ()
    regions: list[tuple[Any, Any]] = []
    for res in ann.result or []:
        if res.value is None:
            continue
        if res.type == tl.TIMELINE_TYPE or (res.from_name == tl.SPANS and res.value.ranges is not None):
            regions.append((res.value.ranges, res.value.timelinelabels))
        elif res.from_name == "harmful":
            chosen += res.value.choices or []
        elif res.from_name == "reason" and res.value.text:
            reason = " ".join(res.value.text).strip() or reason
        elif res.from_name == "categories":
            categories = tuple(res.value.choices or ())
    said = {c.strip().lower() for c in chosen}
    unknown = [c for c in chosen if c.strip().lower() not in (HARMFUL.lower(), NOT_HARMFUL.lower())]
    if unknown:
        return f"{this} chooses {_quote(unknown[0])}, not {HARMFUL} or {NOT_HARMFUL}"
    spans = tl.region_spans(regions, task.data.fps) if regions else None
    if isinstance(spans, str):
        return f"{this}: {spans}"
    if not said and spans:
        said = {HARMFUL.lower()}  # harmful spans drawn without the choice: the spans say it
    if not said:
        return f"{this} has no {HARMFUL} / {NOT_HARMFUL} choice: choose one in Label Studio"
    if len(said) > 1:
        return f"{this} chooses both {HARMFUL} and {NOT_HARMFUL}: keep one in Label Studio"
    harmful = said == {HARMFUL.lower()}
    if spans and not harmful:
        return f"{this} marks harmful spans but chooses {NOT_HARMFUL}: remove the spans or choose {HARMFUL}"
    return Decision(harmful, reason, categories, (when, ann.id, order), None if spans is None else tuple(spans))


def validate_task(raw: Any, *, not_utf8: bool) -> Task | str:
    """A raw task as `Task`, or the one-line reason it is not one."""
    if isinstance(raw, TooDeep):
        return f"nested {raw.depth} levels deep (at most {MAX_DEPTH}): {_FIX}"
    try:
        return Task.model_validate(raw, context={"not_utf8": not_utf8})
    except ValidationError as exc:
        return f"{problem(exc)}: {_FIX}"


def raw_task_id(raw: Any) -> int | None:
    """The task's own ``id`` when it is a usable integer, to name a task that failed validation."""
    tid = raw.get("id") if isinstance(raw, dict) else None
    return tid if isinstance(tid, int) and not isinstance(tid, bool) and 0 <= tid <= MAX_ID else None
