"""A video's segments in the store: written as they finish, final with the annotation, read back with it."""

from __future__ import annotations

from tests.store.conftest import Builder
from vhd.records import Kind, Segment
from vhd.store import Store


def _segments() -> list[Segment]:
    return [
        Segment(0.0, 4.0, False, 0.1, "ordinary street", [], None, "screen"),
        Segment(4.0, 7.5, True, 0.9, "violence", ["violence"], None, "debate"),
    ]


def test_segments_saved_one_by_one_are_what_a_resumed_run_finds(store: Store, run_id: str, build: Builder) -> None:
    video = build.sample("v", Kind.VIDEO)
    first, second = _segments()
    store.save_segment(video.id, "cfgA", run_id, 0, first, calls=1)
    assert store.stored_segments(video.id, "cfgA") == {0: first}
    assert store.stored_segments(video.id, "cfgB") == {}
    store.save_segment(video.id, "cfgA", run_id, 1, second, calls=6)
    assert store.stored_segments(video.id, "cfgA") == {0: first, 1: second}
    assert store.segment_calls(video.id, "cfgA") == 7
    assert store.stored_segment_calls(video.id, "cfgA") == {0: 1, 1: 6}
    assert store.stored_segment_calls(video.id, "cfgB") == {}


def test_reads_fill_the_verdict_segments(store: Store, run_id: str, build: Builder) -> None:
    video, image = build.sample("v", Kind.VIDEO), build.sample("i")
    ann = build.annotation(video, run_id)
    ann.verdict.segments = _segments()
    store.save_segment(video.id, "cfgA", run_id, 1, _segments()[1], calls=6)
    store.save_annotation(ann, video)
    store.save_annotation(build.annotation(image, run_id), image)
    assert store.segment_calls(video.id, "cfgA") == 6  # the calls recorded while the run went are kept
    got = store.get_annotation(video.id, "cfgA")
    assert got is not None and got.verdict.segments == _segments()
    by_id = store.annotations_for([video.id, image.id], "cfgA")
    assert by_id[video.id].verdict.segments == _segments()
    assert by_id[image.id].verdict.segments == []
    pairs = {s.id: a for s, a in store.iter_annotations("cfgA")}
    assert pairs[video.id].verdict.segments == _segments()
    assert pairs[image.id].verdict.segments == []
