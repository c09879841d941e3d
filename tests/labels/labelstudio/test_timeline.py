"""Harmful spans through Label Studio's TimelineLabels: frames <-> seconds, push, and the real export shapes.

The two files under data/ are what Label Studio 1.23.2 exported (JSON and JSON-MIN) for a video task
with ``fps`` 10 after a person drew two spans (frames 31-45 and 5-9) and chose Harmful.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import vhd
from tests.media.conftest import make_video
from vhd.labels.labelstudio import timeline as tl
from vhd.labels.labelstudio.convert import build_tasks, import_labelstudio, labeling_config, prediction
from vhd.labels.sets import load_labelled_set
from vhd.records import Kind, Segment
from vhd.store.sqlite import Store

DATA = Path(__file__).parent / "data"


def test_frames_and_seconds() -> None:
    assert tl.frames_from_seconds(1.0, 2.0, 10) == (11, 20)
    assert tl.seconds_from_frames(11, 20, 10) == (1.0, 2.0)
    assert tl.frames_from_seconds(0.0, 0.01, 24) == (1, 1)  # shorter than a frame: the frame it starts in
    for start, end in ((1, 1), (5, 9), (31, 45)):
        assert tl.frames_from_seconds(*tl.seconds_from_frames(start, end, 24), 24) == (start, end)


def test_prediction_carries_the_harmful_segments_as_regions() -> None:
    segments = [
        Segment(0.0, 1.0, False),
        Segment(1.0, 1.5, True, score=0.9),
        Segment(1.5, 2.0, True),  # joined with the one before: one span to review
        Segment(3.0, 4.0, None),
        Segment(5.0, 5.5, True),
    ]
    pred = prediction(True, "blood", 0.8, "vhd-debate-x", segments, fps=10)
    regions = [r for r in pred["result"] if r["type"] == "timelinelabels"]
    assert [r["value"] for r in regions] == [
        {"ranges": [{"start": 11, "end": 20}], "timelinelabels": ["Harmful"]},
        {"ranges": [{"start": 51, "end": 55}], "timelinelabels": ["Harmful"]},
    ]
    assert all(r["from_name"] == "spans" and r["to_name"] == "media" for r in regions)
    assert len({r["id"] for r in regions}) == 2
    assert not [r for r in prediction(True, None, None, "m")["result"] if r["type"] == "timelinelabels"]


def test_video_config_has_the_timeline() -> None:
    root = ET.fromstring(labeling_config(Kind.VIDEO, ["Violence"]))
    video = root.find("Video")
    assert video is not None and video.get("frameRate") == "$fps"
    spans = root.find("TimelineLabels")
    assert spans is not None and spans.get("name") == "spans" and spans.get("toName") == "media"
    assert [x.get("value") for x in spans.iter("Label")] == ["Harmful"]
    assert ET.fromstring(labeling_config(Kind.IMAGE, [])).find("TimelineLabels") is None


@pytest.fixture
def video_store(tmp_path: Path) -> tuple[Path, Path, str]:
    root = tmp_path / "root"
    make_video(root / "media" / "a.mp4", 12)
    store = tmp_path / "run.db"
    vhd.annotate([root / "media"], model="scripted:demo", store=store, progress=False)
    with Store(store) as db:
        sid = db.find_samples(str(root / "media" / "a.mp4"))[0].id
    return root, store, sid


def test_push_puts_the_verdicts_segments_in_the_video_task(
    video_store: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, store, _sid = video_store
    original = Store.get_annotation

    def with_segments(self: Store, *args: Any, **kwargs: Any) -> Any:
        ann = original(self, *args, **kwargs)
        if ann is not None:
            ann.verdict.harmful = True
            ann.verdict.segments = [Segment(0.25, 0.5, True), Segment(0.5, 1.0, False)]
        return ann

    monkeypatch.setattr(Store, "get_annotation", with_segments)
    (task,) = build_tasks(store=store, media_root=root)[Kind.VIDEO]
    assert task["data"]["fps"] == tl.FRAME_RATE == 24
    regions = [r for r in task["predictions"][0]["result"] if r["type"] == "timelinelabels"]
    assert [r["value"]["ranges"] for r in regions] == [[{"start": 7, "end": 12}]]


def _real(name: str, sid: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((DATA / name).read_text())
    for row in rows:
        (row.get("data") or row)["sample_id"] = sid  # the exported task named another store's sample
    return rows


@pytest.mark.parametrize("name", ["timeline-export-1.23.2.json", "timeline-export-min-1.23.2.json"])
def test_pull_reads_the_spans_people_drew(video_store: tuple[Path, Path, str], name: str) -> None:
    root, store, sid = video_store
    export = root.parent / name
    export.write_text(json.dumps(_real(name, sid)))
    res = import_labelstudio(export, store=store, name="drawn", media_root=root)
    assert (res.samples, res.harmful, res.skipped) == (1, 1, [])
    (item,) = load_labelled_set(store, "drawn")
    assert item.segments is not None
    # frames 5-9 and 31-45 at 10 fps
    assert [(s.start_s, s.end_s, s.harmful, s.decided_by) for s in item.segments] == [
        (pytest.approx(0.4), pytest.approx(0.9), True, "human"),
        (pytest.approx(3.0), pytest.approx(4.5), True, "human"),
    ]


def _one(store: Path, root: Path, result: list[dict[str, Any]], sid: str, **data: Any) -> Any:
    task = {"id": 7, "data": {"video": "/data/local-files/?d=media/a.mp4", "sample_id": sid, **data}}
    task["annotations"] = [{"id": 1, "result": result, "was_cancelled": False}]
    export = root.parent / "one.json"
    export.write_text(json.dumps([task]))
    return import_labelstudio(export, store=store, name="one", media_root=root)


def _region(start: Any, end: Any, label: str = "Harmful") -> dict[str, Any]:
    return {
        "from_name": "spans",
        "to_name": "media",
        "type": "timelinelabels",
        "value": {"ranges": [{"start": start, "end": end}], "timelinelabels": [label]},
    }


HARMFUL = {"from_name": "harmful", "to_name": "media", "type": "choices", "value": {"choices": ["Harmful"]}}
NOT = {"from_name": "harmful", "to_name": "media", "type": "choices", "value": {"choices": ["Not harmful"]}}


def test_drawn_spans_rules(video_store: tuple[Path, Path, str]) -> None:
    root, store, sid = video_store
    # overlapping regions (Label Studio allows them) are joined; the default frame rate is 24
    res = _one(store, root, [_region(1, 24), _region(12, 48), HARMFUL], sid)
    assert res.samples == 1
    (item,) = load_labelled_set(store, "one")
    assert item.segments is not None and [(s.start_s, s.end_s) for s in item.segments] == [(0.0, 2.0)]
    # spans drawn without the Harmful choice: the spans say it
    assert _one(store, root, [_region(3, 4)], sid, fps=10).harmful == 1
    # a region marked "Not harmful" is no span
    assert _one(store, root, [_region(3, 4, "Not harmful"), NOT], sid).harmful == 0
    (item,) = load_labelled_set(store, "one")
    assert item.segments is None
    bad = {
        "ends before": ([_region(9, 5), HARMFUL], {}, "range 9-5 is not frames first <= last from 1"),
        "frame 0": ([_region(0, 5), HARMFUL], {}, "range 0-5 is not frames"),
        "contradiction": ([_region(3, 4), NOT], {}, "marks harmful spans but chooses Not harmful"),
        "fps": ([_region(3, 4), HARMFUL], {"fps": "fast"}, "data.fps 'fast' is not a frame rate"),
        "zero fps": ([_region(3, 4), HARMFUL], {"fps": 0}, "not a positive frame rate"),
    }
    for case, (result, data, message) in bad.items():
        res = _one(store, root, result, sid, **data)
        assert res.samples == 0 and len(res.skipped) == 1, case
        assert message in res.skipped[0].reason and "\n" not in res.skipped[0].reason, (case, res.skipped[0].reason)
