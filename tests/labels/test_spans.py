from __future__ import annotations

import math

import pytest

from vhd.labels.spans import check_spans, format_spans, parse_spans
from vhd.records import Segment


def _pairs(spans: list[Segment] | None) -> list[tuple[float, float]]:
    assert spans is not None
    return [(s.start_s, s.end_s) for s in spans]


def test_text_form_in_seconds_and_clock_times() -> None:
    spans = parse_spans(" 31-40.5 ; 1:02-1:10.25;0:00:01-0:00:02 ")
    assert _pairs(spans) == [(1.0, 2.0), (31.0, 40.5), (62.0, 70.25)]
    assert spans is not None and all(s.harmful is True and s.decided_by == "human" for s in spans)
    assert format_spans(spans) == "1-2; 31-40.5; 62-70.25"
    assert _pairs(parse_spans(format_spans(spans))) == _pairs(spans)


def test_json_forms() -> None:
    objects = [{"start_s": 3, "end_s": 4.5, "harmful": True}, {"start_s": 5, "end_s": 9, "harmful": False}]
    assert _pairs(parse_spans(objects)) == [(3.0, 4.5)]  # a span the export marks not harmful is skipped
    assert _pairs(parse_spans([[1, 2], ["0:03", "0:04"]])) == [(1.0, 2.0), (3.0, 4.0)]
    assert _pairs(parse_spans('[{"start_s": 1, "end_s": 2}]')) == [(1.0, 2.0)]  # JSON in a CSV cell
    assert parse_spans([]) == []
    assert parse_spans(None) is None and parse_spans("  ") is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("20-10", "span 20-10 ends before it starts"),
        ("5-5", "span 5-5 ends before it starts"),
        ("-3-5", "negative time"),
        ([[-3, 5]], "span -3-5 has a negative time"),
        ([[math.nan, 5]], "not a finite number"),
        ("nan-5", "is not START-END"),
        ([{"start_s": "x", "end_s": 2}], "start_s 'x' is not a time in seconds"),
        ("1-10; 5-20", "spans 1-10 and 5-20 overlap"),
        ("1-10; 1-10", "spans 1-10 and 1-10 overlap"),
        ("ten to twenty", "is not START-END"),
        ([{"start_s": 1}], "needs start_s and end_s"),
        ([[1, 2, 3]], "is not {start_s, end_s} or [start, end]"),
        ({"start_s": 1}, "must be a list of spans"),
        ("[1, 2", "is not valid JSON"),
    ],
)
def test_malformed_spans_are_one_line_errors(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("{", r"\{")) as err:
        parse_spans(value)
    assert "\n" not in str(err.value)


def test_touching_spans_are_fine() -> None:
    assert _pairs(check_spans([(5.0, 9.0), (0.0, 5.0)])) == [(0.0, 5.0), (5.0, 9.0)]
