"""The verdict rule and span text of a segmented video (`vhd.debate.segmented`)."""

from __future__ import annotations

from vhd.debate.segmented import VerdictRule, span_text
from vhd.records import Segment, Status


def _seg(start: float, end: float, harmful: bool | None) -> Segment:
    return Segment(start, end, harmful, reason="x" if harmful else "")


def test_the_verdict_rule() -> None:
    segments = [_seg(0, 2, True), _seg(2, 10, False), _seg(10, 11, True)]
    assert VerdictRule().decide(segments).harmful is True
    assert VerdictRule(min_segments=3).decide(segments).harmful is False
    assert VerdictRule(min_duration_s=2.5).decide(segments).harmful is True
    assert VerdictRule(min_duration_s=3.5).decide(segments).harmful is False
    undecided = VerdictRule(min_segments=3).decide([*segments, _seg(11, 12, None)])
    assert undecided.harmful is None and undecided.status is Status.UNPARSED
    assert "short of the rule (at least 3 harmful segments)" in VerdictRule(3).decide(segments).reason


def test_span_text() -> None:
    assert span_text(Segment(9.0, 10.5, True)) == "0:09-0:10.5"
    assert span_text(Segment(3599.96, 3725.0, True)) == "1:00:00-1:02:05"
