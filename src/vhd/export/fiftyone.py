"""``fiftyone``: a folder in FiftyOne's own on-disk dataset format, written without FiftyOne.

FiftyOne documents ``fiftyone.types.FiftyOneDataset`` as "a disk representation of a Dataset ...
in a serialized JSON format along with its source media" (docs.voxel51.com, user guide, Exporting
FiftyOne Datasets, "FiftyOneDataset")::

    <dataset_dir>/
        metadata.json
        samples.json
        data/
            <filename1>.<ext>
            ...

It is the one documented format that holds images or videos with a ``Classification`` and any
custom fields. ``samples.json`` is ``{"samples": [...]}``, one ``Sample.to_dict()`` each: a
``filepath`` (relative to the folder), ``tags``, ``metadata`` and the fields, a label as a dict
with its ``_cls``. A ``metadata.json`` without a ``version`` key is read by FiftyOne's importer
for this format as written by ``Sample.to_dict()`` (its legacy reader, which FiftyOne keeps for
such folders); a video dataset says ``"media_type": "video"`` there and each sample names its
frame labels file (``frames/<id>.json``, ``{"frames": {}}``: vhd keeps no per-frame labels).

Each row becomes a sample with ``verdict``, a ``Classification`` (``label`` ``harmful`` or
``not_harmful``, ``confidence`` the judge's score; null when undecided), ``ground_truth`` (the
human label imported with the sample, when there is one), and the fields ``vhd_id``, ``reason``,
``categories``, ``severity``, ``status``, ``refused``, ``decided_by``, ``source``, ``keyword``,
``generator``, ``split`` (also a tag), ``config_hash``, ``run_id`` and, for a video with
time-span verdicts, ``segments`` (a list of `vhd.records.Segment` dicts, seconds). A FiftyOne
dataset holds one media type: images and videos together give ``OUT/images`` and ``OUT/videos``,
two datasets. The media are hard-linked into ``data/`` (copied across file systems), named by
their sha256, so the folder stands alone. Open it with
``fo.Dataset.from_dir(OUT, dataset_type=fo.types.FiftyOneDataset)``; FiftyOne itself runs on a
MongoDB server.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.export.base import ExportFormat, ExportRequest, ExportResult, paged_export
from vhd.fileio import atomic_folder, atomic_write, display_path
from vhd.records import Annotation, Kind, Sample, Status
from vhd.store.sqlite import Store

HARMFUL_LABEL = "harmful"
NOT_HARMFUL_LABEL = "not_harmful"
"""The ``Classification`` labels of ``verdict`` and ``ground_truth``."""

KIND_FOLDERS = {Kind.IMAGE: "images", Kind.VIDEO: "videos"}
"""The sub-datasets written when a store's rows hold both kinds."""


def classification(harmful: bool | None, confidence: float | None = None) -> dict[str, Any] | None:
    """A FiftyOne ``Classification`` as ``Sample.to_dict()`` writes it (None for no decision)."""
    if harmful is None:
        return None
    label = HARMFUL_LABEL if harmful else NOT_HARMFUL_LABEL
    out: dict[str, Any] = {"_cls": "Classification", "tags": [], "label": label}
    if confidence is not None:
        out["confidence"] = confidence
    return out


def sample_dict(sample: Sample, ann: Annotation, filepath: str) -> dict[str, Any]:
    """One row as a FiftyOne sample dict (``Sample.from_dict`` reads it): the fields listed above."""
    verdict = ann.verdict
    status = Status(verdict.status)
    decided = verdict.harmful if status in (Status.OK, Status.REFUSED) else None
    out: dict[str, Any] = {
        "filepath": filepath,
        "tags": [sample.split] if sample.split else [],
        "metadata": None,
        "vhd_id": sample.id,
        "verdict": classification(decided, verdict.score),
        "ground_truth": classification(sample.harmful),
        "reason": verdict.reason or None,
        "categories": list(verdict.categories),
        "severity": verdict.severity,
        "status": status.value,
        "refused": bool(verdict.refused),
        "decided_by": ann.decided_by,
        "source": None if sample.source is None else sample.source.value,
        "keyword": sample.keyword,
        "generator": sample.generator,
        "split": sample.split,
        "config_hash": ann.config_hash,
        "run_id": ann.run_id,
    }
    if verdict.segments:
        out["segments"] = [s.to_dict() for s in verdict.segments]
    return out


@dataclass
class _Part:
    """One FiftyOne dataset being built: its samples and media, by kind."""

    kind: Kind
    samples: list[dict[str, Any]] = field(default_factory=list)
    media: dict[str, Path] = field(default_factory=dict)  # data/ name -> source file


def _place_media(source: Path, target: Path) -> None:
    """Hard-link the file (no copy on the same file system), else copy it."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _write_part(folder: Path, part: _Part, name: str) -> None:
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    for file_name, source in part.media.items():
        _place_media(source, data / file_name)
    metadata: dict[str, Any] = {
        "name": name,
        "media_type": part.kind.value,
        "info": {"created_by": "vhd", "labels": {"verdict": [NOT_HARMFUL_LABEL, HARMFUL_LABEL]}},
    }
    if part.kind is Kind.VIDEO:
        frames = folder / "frames"
        frames.mkdir(exist_ok=True)
        for s in part.samples:
            s["frames"] = f"frames/{s['vhd_id']}.json"
            atomic_write(frames / f"{s['vhd_id']}.json", '{"frames": {}}\n')
    atomic_write(folder / "metadata.json", json.dumps(metadata, indent=1) + "\n")
    atomic_write(folder / "samples.json", json.dumps({"samples": part.samples}, ensure_ascii=False) + "\n")


class FiftyOneFormat(ExportFormat):
    """``fiftyone``: FiftyOne's ``FiftyOneDataset`` folder (samples.json, metadata.json, data/), no FiftyOne needed."""

    def __init__(self) -> None:
        self.missing: list[str] = []  # rows whose media file is gone (left out)

    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Write the dataset folder ``out`` (two, ``out/images`` and ``out/videos``, for both kinds)."""
        parts: dict[Kind, _Part] = {}
        for sample, ann in rows:
            source = Path(sample.path)
            if not source.is_file():
                self.missing.append(sample.id)
                continue
            part = parts.setdefault(sample.kind, _Part(sample.kind))
            file_name = sample.id + source.suffix.lower()
            part.media.setdefault(file_name, source)
            part.samples.append(sample_dict(sample, ann, f"data/{file_name}"))
        with atomic_folder(out) as building:
            if not parts:  # nothing selected: an empty dataset of the kind asked for
                _write_part(building, _Part(kind or Kind.IMAGE), out.name)
            elif len(parts) == 1:
                (only,) = parts.values()
                _write_part(building, only, out.name)
            else:
                for k, part in parts.items():
                    _write_part(building / KIND_FOLDERS[k], part, f"{out.name}-{KIND_FOLDERS[k]}")
        return [out]

    def export(self, db: Store, out: Path, request: ExportRequest) -> ExportResult:
        """The selected rows (`paged_export`), media read where the store has them, into ``out``."""
        media_paths = ExportRequest(
            config_hash=request.config_hash,
            include_unparsed=request.include_unparsed,
            kind=request.kind,
            run_id=request.run_id,
            absolute_paths=True,  # the media are read to be placed in data/; samples name them there
            push_to_hub=request.push_to_hub,
        )
        self.missing = []
        result = paged_export(self, db, out, media_paths)
        result.root = None
        result.written -= len(self.missing)
        for sample_id in self.missing:
            result.leave_out(sample_id, "media file missing")
        folders = [out / f for f in KIND_FOLDERS.values() if (out / f / "samples.json").is_file()] or [out]
        for folder in folders:
            result.notes.append(
                f"FiftyOne: fo.Dataset.from_dir({display_path(folder)!r}, dataset_type=fo.types.FiftyOneDataset)"
            )
        return result
