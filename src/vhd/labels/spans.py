"""Harmful spans in a labels file: where in a video a person saw the harm.

A labels row may carry a ``segments`` column (CSV) or key (JSON, JSON Lines): the video's harmful
spans, each a start and an end in seconds from the start of the video. Written as

- text (a CSV cell): ``START-END`` pairs separated by ``;``, each time in seconds (``12.5``) or
  as ``M:SS`` / ``H:MM:SS`` (``1:02.5``), e.g. ``12.5-20; 1:02-1:10``;
- JSON (a JSON file, a JSON Lines file, or a CSV cell starting with ``[``): a list of objects
  with ``start_s`` and ``end_s`` (the shape of an export's ``segments`` column; objects whose
  ``harmful`` is false are not harmful spans and are skipped), or of ``[start, end]`` pairs.

Each span must have ``0 <= start < end`` with finite times, and the spans of one row must not
overlap (spans that touch are fine; `vhd.bench.metrics.segments` joins them). An empty cell (or
no key) says nothing about time; an empty list says there is no harmful span, which only an
unharmful row may say.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from vhd.records import Segment

_TIME = r"\d+(?::\d{1,2}){0,2}(?:\.\d*)?"
_PAIR = re.compile(rf"\s*({_TIME})\s*-\s*({_TIME})\s*")
FORMAT_HINT = "write START-END seconds separated by ';' (e.g. 12.5-20; 31-40) or a JSON list of {start_s, end_s}"
"""How a span cell is written, for messages."""


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{what} {value!r} is not a time in seconds")
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    if re.fullmatch(_TIME, text):
        total = 0.0
        for part in text.split(":"):
            total = total * 60 + float(part)
        return total
    try:
        return float(text)  # "-3", "nan", "1e3": checked below
    except ValueError:
        raise ValueError(f"{what} {text[:20]!r} is not a time in seconds; {FORMAT_HINT}") from None


def _label(x: float) -> str:
    return f"{x:g}"


def check_spans(pairs: Sequence[tuple[float, float]]) -> list[Segment]:
    """Validate ``(start_s, end_s)`` pairs and return them as human `Segment` objects in time order.

    Raises:
        ValueError: A time that is not finite or is negative, an end not after its start, or two
            spans that overlap (a repeated span included); the message names the span.
    """
    spans: list[tuple[float, float]] = []
    for start, end in pairs:
        name = f"span {_label(start)}-{_label(end)}"
        if not (math.isfinite(start) and math.isfinite(end)):
            raise ValueError(f"{name} has a time that is not a finite number of seconds")
        if start < 0 or end < 0:
            raise ValueError(f"{name} has a negative time: times count seconds from the start of the video")
        if end <= start:
            raise ValueError(f"{name} ends before it starts: write START-END with END after START")
        spans.append((start, end))
    spans.sort()
    for (a0, a1), (b0, b1) in pairwise(spans):
        if b0 < a1:
            raise ValueError(
                f"spans {_label(a0)}-{_label(a1)} and {_label(b0)}-{_label(b1)} overlap: merge them into one span"
            )
    return [Segment(start_s=a, end_s=b, harmful=True, decided_by="human") for a, b in spans]


def _json_pairs(items: list[Any]) -> list[tuple[float, float]]:
    pairs: list[tuple[float, float]] = []
    for item in items:
        if isinstance(item, dict):
            keys = {str(k).lower(): v for k, v in item.items()}
            if "start_s" not in keys or "end_s" not in keys:
                raise ValueError(f"span {json.dumps(item)[:40]} needs start_s and end_s")
            if keys.get("harmful") is False:
                continue
            pairs.append((_seconds(keys["start_s"], "start_s"), _seconds(keys["end_s"], "end_s")))
        elif isinstance(item, list | tuple) and len(item) == 2:
            pairs.append((_seconds(item[0], "start"), _seconds(item[1], "end")))
        else:
            raise ValueError(f"span {json.dumps(item)[:40]} is not {{start_s, end_s}} or [start, end]")
    return pairs


def parse_spans(value: Any) -> list[Segment] | None:
    """The harmful spans of one labels row's ``segments`` value (None: the row gives none).

    Args:
        value: A CSV cell's text, or a JSON value (a list of objects or pairs); None or an empty
            cell gives None.

    Returns:
        The spans as human `Segment` objects (``harmful=True``, ``decided_by="human"``) in time
        order; an empty list when the value is an empty list.

    Raises:
        ValueError: A value that is not spans, or a bad span (see `check_spans`), in one line.
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"segments {text[:40]!r} is not valid JSON ({exc.msg}); {FORMAT_HINT}") from None
        else:
            pairs = []
            for part in text.split(";"):
                if not part.strip():
                    continue
                m = _PAIR.fullmatch(part)
                if m is None:
                    if part.strip().startswith("-"):
                        raise ValueError(f"span {part.strip()[:30]!r} has a negative time: times count from 0")
                    raise ValueError(f"span {part.strip()[:30]!r} is not START-END; {FORMAT_HINT}")
                pairs.append((_seconds(m.group(1), "start"), _seconds(m.group(2), "end")))
            return check_spans(pairs)
    if not isinstance(value, list):
        raise ValueError(f"segments must be a list of spans; {FORMAT_HINT}")
    return check_spans(_json_pairs(value))


def format_spans(spans: Sequence[Segment]) -> str:
    """Spans as a CSV cell ``START-END; START-END`` (seconds), the text form `parse_spans` reads."""
    return "; ".join(f"{_label(s.start_s)}-{_label(s.end_s)}" for s in spans)
