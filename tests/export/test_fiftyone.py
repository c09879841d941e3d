"""`vhd export --format fiftyone`: FiftyOne's documented FiftyOneDataset folder, written without FiftyOne.

FiftyOne needs a MongoDB server, which cannot run here, so the folder is checked against the
documented layout (docs.voxel51.com, "Exporting FiftyOne Datasets", FiftyOneDataset:
``metadata.json``, ``samples.json``, ``data/``) and read back the way FiftyOne's importer for a
folder without a ``version`` reads it: ``{"samples": [...]}``, each filepath joined to the folder,
each label a dict with its ``_cls``, a video's frame labels file named by ``frames``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

import vhd
from tests.annotate.test_api import make_images
from vhd.cli.main import main
from vhd.export import EXPORT_FORMATS
from vhd.records import Annotation, Kind, Sample, Segment, Status, Verdict

LABEL_FIELDS = {"_cls", "tags", "label", "confidence"}


def read_like_fiftyone(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What FiftyOne's importer of this format reads: metadata, then each sample with its media path joined."""
    metadata = json.loads((folder / "metadata.json").read_text())
    assert "version" not in metadata  # the Sample.to_dict() samples of the documented format, not a DB dump
    samples = json.loads((folder / "samples.json").read_text())["samples"]
    for s in samples:
        s["filepath"] = os.path.join(folder, s["filepath"])
        if metadata.get("media_type") == "video":
            assert json.loads((folder / s.pop("frames")).read_text()) == {"frames": {}}
    return metadata, samples


def test_fiftyone_is_a_registered_format_without_an_extra() -> None:
    assert "fiftyone" in EXPORT_FORMATS and EXPORT_FORMATS.entry("fiftyone").extra is None  # plain JSON


def test_images_export_as_one_documented_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_images(tmp_path / "m", 3)
    db = tmp_path / "s.db"
    vhd.annotate([tmp_path / "m"], model="scripted:demo", store=db, progress=False)
    out = tmp_path / "fo"
    assert main(["export", str(db), "--format", "fiftyone", "-o", str(out)]) == 0
    assert "fo.types.FiftyOneDataset" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["data", "metadata.json", "samples.json"]
    metadata, samples = read_like_fiftyone(out)
    assert metadata["media_type"] == "image" and len(samples) == 3
    for s in samples:
        assert Path(s["filepath"]).is_file() and Path(s["filepath"]).parent == out / "data"
        media = Path(s["filepath"])
        assert hashlib.sha256(media.read_bytes()).hexdigest() == media.stem == s["vhd_id"]  # the sample's own bytes
        verdict = s["verdict"]
        assert verdict["_cls"] == "Classification" and set(verdict) <= LABEL_FIELDS
        assert verdict["label"] in ("harmful", "not_harmful") and isinstance(verdict["confidence"], float)
        assert s["status"] == "ok" and isinstance(s["categories"], list) and s["reason"]
        assert {"filepath", "tags", "metadata", "vhd_id", "severity", "config_hash", "run_id"} <= set(s)
        assert s["ground_truth"] is None  # no human label imported
    sizes = sorted(p.stat().st_size for p in (out / "data").iterdir())
    assert sizes == sorted(p.stat().st_size for p in (tmp_path / "m").glob("*.png"))


def test_images_and_videos_are_two_datasets_and_segments_are_kept(tmp_path: Path) -> None:
    from tests.media.conftest import make_video
    from vhd.export.fiftyone import FiftyOneFormat

    make_images(tmp_path / "m", 1)
    make_video(tmp_path / "m" / "clip.mp4", 12)
    image = Sample(id="a" * 64, path=str(tmp_path / "m" / "img_000.png"), kind=Kind.IMAGE, split="test", harmful=True)
    video = Sample(id="b" * 64, path=str(tmp_path / "m" / "clip.mp4"), kind=Kind.VIDEO)
    gone = Sample(id="c" * 64, path=str(tmp_path / "m" / "gone.png"), kind=Kind.IMAGE)
    span = Segment(start_s=0.0, end_s=1.5, harmful=True, score=0.9, reason="a fight", categories=["V"])
    rows = [
        (image, Annotation(image.id, "r1", "cfg", Verdict(True, "violence", ["V"], score=0.8, severity="high"))),
        (video, Annotation(video.id, "r1", "cfg", Verdict(True, "a fight", score=0.7, segments=[span]))),
        (gone, Annotation(gone.id, "r1", "cfg", Verdict(None, "", status=Status.UNPARSED))),
    ]
    fmt = FiftyOneFormat()
    assert fmt.write(tmp_path / "fo", rows, None) == [tmp_path / "fo"]
    assert fmt.missing == [gone.id]
    assert sorted(p.name for p in (tmp_path / "fo").iterdir()) == ["images", "videos"]
    meta, (img,) = read_like_fiftyone(tmp_path / "fo" / "images")
    assert meta["media_type"] == "image" and img["tags"] == ["test"] and img["severity"] == "high"
    assert img["ground_truth"] == {"_cls": "Classification", "tags": [], "label": "harmful"}
    assert img["verdict"] == {"_cls": "Classification", "tags": [], "label": "harmful", "confidence": 0.8}
    meta, (vid,) = read_like_fiftyone(tmp_path / "fo" / "videos")
    assert meta["media_type"] == "video" and Path(vid["filepath"]).suffix == ".mp4"
    assert vid["segments"] == [span.to_dict()] and "segments" not in img


def test_a_segmented_video_in_the_store_keeps_its_segments(tmp_path: Path) -> None:
    from tests.media.conftest import make_video
    from vhd.store import Store

    make_video(tmp_path / "m" / "clip.mp4", 12)
    video = Sample(id="d" * 64, path=str(tmp_path / "m" / "clip.mp4"), kind=Kind.VIDEO, frames=[0, 5])
    spans = [
        Segment(start_s=0.0, end_s=1.0, harmful=False, score=0.1, reason="a street"),
        Segment(start_s=1.0, end_s=2.0, harmful=True, score=0.9, reason="a fight", categories=["V"], severity="high"),
    ]
    db = tmp_path / "s.db"
    with Store(db) as store:
        run = store.start_run({}, "cfg", {}, "p")
        verdict = Verdict(True, "a fight", ["V"], score=0.9, severity="high", segments=spans)
        store.save_annotation(Annotation(video.id, run, "cfg", verdict), video)
    result = vhd.export.export(db, "fiftyone", tmp_path / "fo")
    assert result.written == 1 and result.files == [tmp_path / "fo"]
    meta, (vid,) = read_like_fiftyone(tmp_path / "fo")
    assert meta["media_type"] == "video" and "severity" in vid  # the verdict's level, as the store keeps it
    assert vid["segments"] == [s.to_dict() for s in spans]  # each span's severity included
    assert vid["verdict"] == {"_cls": "Classification", "tags": [], "label": "harmful", "confidence": 0.9}
