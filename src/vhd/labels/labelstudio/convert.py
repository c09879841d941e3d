"""Label Studio round trip: send samples out as tasks with pre-annotations, bring decisions back.

Export writes Label Studio's JSON import format: a list of tasks, each
``{"data": {...}, "predictions": [{"model_version", "score", "result": [...]}]}``, where the
results pre-fill the labeling interface with the annotator's verdict (a ``choices`` result on the
``harmful`` control) and the judge's reason (a ``textarea`` result on ``reason``); the debate's
arguments travel in ``data`` and are shown beside the media. A video also gets a ``TimelineLabels``
control: its predicted harmful segments pre-fill it, and the spans people draw come back as the
label's spans (`vhd.labels.labelstudio.timeline`). The matching labeling configuration
(XML) is written next to it. Media are referenced as Label Studio local-file URLs
(``/data/local-files/?d=<path under the document root>``), or under any URL prefix.

Import reads Label Studio's JSON export (the same tasks, now with
``"annotations": [{"result": [...], "was_cancelled": false, ...}]``): the newest annotation that
was not cancelled decides; tasks without one, or that do not fit the format, are named and left
out (`vhd.labels.labelstudio.read` reads and checks the file).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from vhd.errors import ConfigError
from vhd.fileio import atomic_write
from vhd.labels.labelstudio import read as rd
from vhd.labels.labelstudio import timeline as tl
from vhd.labels.labelstudio.jsonmin import json_min_tasks
from vhd.labels.sets import LabelledItem, check_set_name, read_labelled_set, save_labelled_set
from vhd.records import Kind, Role, Sample, Segment
from vhd.store.sqlite import Store, StoreLike, using_store

HARMFUL, NOT_HARMFUL = rd.HARMFUL, rd.NOT_HARMFUL
"""The two choices of the ``harmful`` control."""

LOCAL_FILES = "/data/local-files/?d="
"""Label Studio's URL prefix for files under ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT``."""


@dataclass
class ExportResult:
    """What a Label Studio export wrote.

    Attributes:
        files: Task files written (one per media kind present), each with its ``.xml`` config.
        tasks: Tasks written in all.
        with_predictions: Tasks carrying the annotator's verdict as a pre-annotation.
    """

    files: list[Path] = field(default_factory=list)
    tasks: int = 0
    with_predictions: int = 0


def labeling_config(kind: Kind, categories: list[str]) -> str:
    """The labeling interface (XML) that the exported tasks fit.

    Args:
        kind: ``image`` tasks show ``$image``; ``video`` tasks show ``$video``.
        categories: Names offered by the optional multi-choice ``categories`` control.
    """
    if kind is Kind.IMAGE:
        media = '<Image name="media" value="$image"/>'
    else:  # the harmful spans on the video's time line (frames counted at the task's data.fps)
        media = (
            '<Video name="media" value="$video" frameRate="$fps" timelineHeight="80"/>\n'
            f'  <TimelineLabels name="{tl.SPANS}" toName="media">\n'
            f'    <Label value="{tl.SPAN_LABEL}" background="#d9534f"/>\n'
            "  </TimelineLabels>"
        )
    choices = "\n".join(f'    <Choice value="{_xml(c)}"/>' for c in categories)
    return f"""<View>
  {media}
  <Header value="Is this harmful?"/>
  <Choices name="harmful" toName="media" choice="single" showInline="true" required="true">
    <Choice value="{HARMFUL}"/>
    <Choice value="{NOT_HARMFUL}"/>
  </Choices>
  <Header value="Reason (short)"/>
  <TextArea name="reason" toName="media" maxSubmissions="1" editable="true"/>
  <Header value="Categories"/>
  <Choices name="categories" toName="media" choice="multiple">
{choices}
  </Choices>
  <Header value="Arguments for harmful"/>
  <Text name="affirmative" value="$affirmative"/>
  <Header value="Arguments against"/>
  <Text name="negative" value="$negative"/>
</View>
"""


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def media_url(path: str, media_root: str | os.PathLike[str] = "/", url_prefix: str = LOCAL_FILES) -> str:
    """The URL Label Studio loads a sample's media from (its path under ``media_root``)."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(media_root))
    if rel.startswith(".."):
        raise ConfigError(f"{path} is outside the media root {media_root}: pass a --media-root that holds it")
    return url_prefix + quote(Path(rel).as_posix(), safe="/")


def confidence(harmful: bool, p_harmful: float) -> float:
    """How sure a verdict is: P(harmful) for a harmful verdict, 1 - P(harmful) for a not-harmful one.

    Label Studio reads a prediction's ``score`` as the confidence of the predicted choice.
    """
    return p_harmful if harmful else 1.0 - p_harmful


def prediction(
    harmful: bool,
    reason: str | None,
    p_harmful: float | None,
    model_version: str,
    segments: Sequence[Segment] = (),
    fps: float = tl.FRAME_RATE,
) -> dict[str, Any]:
    """A Label Studio prediction pre-filling the ``harmful`` choice (and the ``reason`` text, the spans).

    Args:
        harmful: The verdict.
        reason: The judge's reason (left out when empty).
        p_harmful: The judge's P(harmful), or None; the prediction's ``score`` is its `confidence`.
        model_version: Names the configuration in Label Studio.
        segments: A video's segments; the harmful ones become ``TimelineLabels`` regions.
        fps: The frame rate the task's video is counted at (``data.fps``).
    """
    result: list[dict[str, Any]] = [
        {
            "from_name": "harmful",
            "to_name": "media",
            "type": "choices",
            "value": {"choices": [HARMFUL if harmful else NOT_HARMFUL]},
        }
    ]
    if reason:
        result.append({"from_name": "reason", "to_name": "media", "type": "textarea", "value": {"text": [reason]}})
    result += tl.span_regions(segments, fps)
    pred: dict[str, Any] = {"model_version": model_version, "result": result}
    if p_harmful is not None:
        pred["score"] = confidence(harmful, p_harmful)
    return pred


def build_tasks(
    *,
    store: StoreLike = "vhd.db",
    name: str | None = None,
    config_hash: str | None = None,
    media_root: str | os.PathLike[str] = "/",
    url_prefix: str = LOCAL_FILES,
) -> dict[Kind, list[dict[str, Any]]]:
    """Label Studio tasks (with pre-annotations) for a store's samples, by media kind.

    The arguments are `export_labelstudio`'s; the tasks are what it writes.
    """
    by_kind: dict[Kind, list[dict[str, Any]]] = {}
    with using_store(store, create=True) as db:
        if name is not None:
            wanted: list[tuple[str, str, LabelledItem | None]] = [
                (i.id, str(i.path), i) for i in read_labelled_set(db, name)
            ]
        else:
            seen = {s.id: s.path for s, _ in db.iter_annotations(config_hash=config_hash)}
            wanted = [(sid, str(p), None) for sid, p in seen.items()]
        for sid, path, item in wanted:
            sample = db.get_sample(sid)
            if sample is None:
                continue
            ann = db.get_annotation(sid, config_hash)
            kind = Kind(sample.kind)
            data: dict[str, Any] = {
                "image" if kind is Kind.IMAGE else "video": media_url(path, media_root, url_prefix),
                "sample_id": sid,
                "path": path,
                "affirmative": "",
                "negative": "",
            }
            if kind is Kind.VIDEO:
                data["fps"] = tl.FRAME_RATE  # the Video's frameRate: spans' frames are counted at it
            if item is not None:
                data["human_label"] = HARMFUL if item.harmful else NOT_HARMFUL
            task: dict[str, Any] = {"data": data}
            if ann is not None:
                data["affirmative"] = "\n\n".join(ann.arguments(Role.AFFIRMATIVE))
                data["negative"] = "\n\n".join(ann.arguments(Role.NEGATIVE))
                if ann.verdict.score is not None:
                    data["p_harmful"] = ann.verdict.score  # the raw judge score; the prediction's is a confidence
                if ann.verdict.harmful is not None:
                    model = f"vhd-debate-{ann.config_hash[:12]}"
                    task["predictions"] = [
                        prediction(
                            ann.verdict.harmful, ann.verdict.reason, ann.verdict.score, model, ann.verdict.segments
                        )
                    ]
            by_kind.setdefault(kind, []).append(task)
    return by_kind


def export_labelstudio(
    out: str | os.PathLike[str],
    *,
    store: StoreLike = "vhd.db",
    name: str | None = None,
    config_hash: str | None = None,
    media_root: str | os.PathLike[str] = "/",
    url_prefix: str = LOCAL_FILES,
) -> ExportResult:
    """Write Label Studio tasks (with pre-annotations) and their labeling config.

    Args:
        out: The tasks file (``.json``); the config goes to the same name with ``.xml``. When
            both images and videos are present, videos go to ``<stem>-videos.json``.
        store: The store.
        name: Export the samples of this labelled set (default: every annotated sample).
        config_hash: Take verdicts from this configuration (default: each sample's latest).
        media_root: Folder that media paths are made relative to (Label Studio's
            ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT``).
        url_prefix: Prefix of media URLs (default Label Studio's local-files route).

    Returns:
        The files written and task counts.
    """
    from vhd.labels.files import CATEGORIES

    out_path = Path(out)
    result = ExportResult()
    by_kind = build_tasks(store=store, name=name, config_hash=config_hash, media_root=media_root, url_prefix=url_prefix)
    result.with_predictions = sum("predictions" in t for tasks in by_kind.values() for t in tasks)
    if not by_kind:
        raise ConfigError(f"nothing to export from {store}: annotate samples or import a labelled set first")
    categories = [n for _, n in CATEGORIES]
    for kind, tasks in sorted(by_kind.items(), key=lambda kv: kv[0].value):
        target = out_path
        if len(by_kind) > 1 and kind is Kind.VIDEO:
            target = out_path.with_name(f"{out_path.stem}-videos{out_path.suffix or '.json'}")
        atomic_write(target, json.dumps(tasks, indent=2, ensure_ascii=False) + "\n")
        atomic_write(target.with_suffix(".xml"), labeling_config(kind, categories))
        result.files.append(target)
        result.tasks += len(tasks)
    return result


@dataclass
class SkippedTask:
    """A task of a Label Studio export that was left out.

    Attributes:
        position: Its place in the file's list of tasks (1-based).
        task_id: Label Studio's task ``id``, when the task has a usable one.
        reason: Why, in one line, with what to do.
    """

    position: int
    task_id: int | None
    reason: str

    @property
    def name(self) -> str:
        """``task <id>``, or ``item <position> of the list`` for a task without a usable id."""
        return f"task {self.task_id}" if self.task_id is not None else f"item {self.position} of the list"


@dataclass
class LabelStudioImport:
    """What a Label Studio import read and wrote.

    Attributes:
        name: The labelled set written.
        source: The export file read.
        tasks: Tasks in the file.
        decided: Tasks whose decision was used (several may name one sample).
        samples: Samples labelled (rows written to the set): one per sample, the newest decision.
        harmful: Of those, labelled harmful.
        skipped: The tasks left out because they are unusable, in file order.
        undecided: Tasks nobody decided yet (no annotation, or only cancelled ones: skipped in
            Label Studio), in file order. Not a fault: the JSON-MIN export leaves them out.
    """

    name: str
    source: str
    tasks: int = 0
    decided: int = 0
    samples: int = 0
    harmful: int = 0
    skipped: list[SkippedTask] = field(default_factory=list)
    undecided: list[SkippedTask] = field(default_factory=list)


class _Samples:
    """Finds the sample a task names, remembering each reference (200,000 tasks, few samples)."""

    def __init__(self, db: Store, media_root: str | os.PathLike[str] = "/") -> None:
        self.db = db
        self.media_root = media_root
        self.by_id: dict[str, Sample | None] = {}
        self.by_ref: dict[str, list[Sample]] = {}

    def find(self, data: rd.Data) -> Sample | str:
        if data.sample_id:
            if data.sample_id not in self.by_id:
                self.by_id[data.sample_id] = self.db.get_sample(data.sample_id)
            sample = self.by_id[data.sample_id]
            if sample is not None:
                return sample
        ref = data.path or path_from_url(data.image or data.video or "", self.media_root)
        if not ref and not data.sample_id:
            return "names no sample: its data needs sample_id, path, or a local-files image / video URL"
        if "\x00" in ref:
            return "its media URL names a path with a NUL character: fix data.image / data.video"
        if ref and not data.path and os.path.commonpath([top := os.path.abspath(self.media_root), ref]) != top:
            return "its media URL leads outside the media root (a '..' in it): fix data.image / data.video"
        if ref and ref not in self.by_ref:
            self.by_ref[ref] = self.db.find_samples(ref)
        found = self.by_ref.get(ref, [])
        if len(found) > 1:
            return f"its path names {len(found)} samples in the store: give data.sample_id instead"
        if not found:
            return "its sample is not in the store: import it with `vhd label` first"
        return found[0]


def import_labelstudio(
    path: str | os.PathLike[str],
    *,
    store: StoreLike = "vhd.db",
    name: str = "labelstudio",
    media_root: str | os.PathLike[str] = "/",
) -> LabelStudioImport:
    """Read people's decisions from a Label Studio JSON export into a labelled set.

    Reads Label Studio's JSON export and its JSON-MIN export (one flat row per annotation, see
    `json_min_tasks`). Each task is tied to a sample by ``data.sample_id`` (as exported by
    `export_labelstudio`), else by ``data.path`` or the local-file URL (``/data/local-files/?d=``,
    with or without the server's address) read under ``media_root``, which must name a sample
    the store holds. A task that does not fit Label Studio's export format, has no usable
    decision, repeats an earlier task's ``id`` or names no stored sample is left out with a
    one-line reason; the others are imported. A task nobody decided (no annotation, or only
    cancelled ones) is undecided, not a fault, so JSON and JSON-MIN exports agree.
    Several tasks naming one sample give one label: the newest decision (see
    `vhd.labels.labelstudio.read` for the rule).

    Args:
        path: The export file.
        store: The store.
        name: The labelled set to write.
        media_root: Label Studio's ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT``: local-file URLs
            name paths under it.

    Returns:
        Counts of tasks and samples, and the tasks left out.

    Raises:
        ConfigError: The file cannot be a Label Studio export (unreadable, not JSON, not a list
            of tasks, no tasks), or the set name is not valid.
    """
    check_set_name(name)
    tasks, not_utf8 = rd.read_tasks(path)
    tasks = json_min_tasks(tasks)
    out = LabelStudioImport(name=name, source=os.path.abspath(path), tasks=len(tasks))
    best: dict[str, tuple[rd.Decision, Sample]] = {}
    first_of: dict[int, int] = {}
    with using_store(store, create=True) as db:
        samples = _Samples(db, media_root)
        for index in range(len(tasks)):
            raw, tasks[index] = tasks[index], None  # free each raw task once it is read
            position = index + 1
            task = rd.validate_task(raw, not_utf8=not_utf8)
            if isinstance(task, str):
                out.skipped.append(SkippedTask(position, rd.raw_task_id(raw), task))
                continue
            del raw
            if task.id is not None and task.id in first_of:
                why = f"repeats task id {task.id} of item {first_of[task.id]}; the first copy counts"
                out.skipped.append(SkippedTask(position, None, why))
                continue
            if task.id is not None:
                first_of[task.id] = position
            decision = rd.task_decision(task, position)
            if isinstance(decision, str):  # nobody decided yet (not a fault), or an unusable decision
                undecided = rd.newest(task.annotations or []) is None
                (out.undecided if undecided else out.skipped).append(SkippedTask(position, task.id, decision))
                continue
            sample = samples.find(task.data)
            if isinstance(sample, str):
                out.skipped.append(SkippedTask(position, task.id, sample))
                continue
            out.decided += 1
            held = best.get(sample.id)
            if held is None or rd.is_newer(decision.stamp, held[0].stamp):
                best[sample.id] = (decision, sample)
        items = [
            LabelledItem(
                id=sample.id,
                path=sample.path,
                kind=sample.kind,
                harmful=d.harmful,
                reason=d.reason,
                categories=list(d.categories),
                segments=None if d.segments is None or sample.kind is not Kind.VIDEO else list(d.segments),
            )
            for d, sample in best.values()
        ]
        out.samples = save_labelled_set(db, name, items, source=out.source) if items else 0
    out.harmful = sum(i.harmful for i in items)
    return out


def path_from_url(url: str, media_root: str | os.PathLike[str] = "/") -> str:
    """The file a Label Studio local-files URL names under ``media_root`` ("" for other URLs).

    Takes ``/data/local-files/?d=REL`` as vhd writes it and ``http://HOST/data/local-files/?d=REL``
    as a server may return it.
    """
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(url)
    if parts.path.rstrip("/") != LOCAL_FILES.split("?")[0].rstrip("/"):
        return ""
    rel = parse_qs(parts.query).get("d", [""])[0]
    if not rel:
        return ""
    return os.path.normpath(os.path.join(os.path.abspath(media_root), rel.lstrip("/")))
