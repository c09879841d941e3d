"""Label Studio round trip: send samples out as tasks with pre-annotations, bring decisions back.

Export writes Label Studio's JSON import format: a list of tasks, each
``{"data": {...}, "predictions": [{"model_version", "score", "result": [...]}]}``, where the
results pre-fill the labeling interface with the annotator's verdict (a ``choices`` result on the
``harmful`` control) and the judge's reason (a ``textarea`` result on ``reason``); the debate's
arguments travel in ``data`` and are shown beside the media. The matching labeling configuration
(XML) is written next to it. Media are referenced as Label Studio local-file URLs
(``/data/local-files/?d=<path under the document root>``), or under any URL prefix.

Import reads Label Studio's JSON export (the same tasks, now with
``"annotations": [{"result": [...], "was_cancelled": false, ...}]``): the newest annotation that
was not cancelled decides; tasks without one are reported and left out.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from vhd.align.labels import LabelledItem, check_set_name, read_labelled_set, save_labelled_set
from vhd.errors import ConfigError
from vhd.fileio import atomic_write
from vhd.records import Kind, Role
from vhd.store.sqlite import Store

HARMFUL, NOT_HARMFUL = "Harmful", "Not harmful"
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
    media = '<Image name="media" value="$image"/>' if kind is Kind.IMAGE else '<Video name="media" value="$video"/>'
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


def _prediction(verdict_harmful: bool, reason: str, score: float | None, model_version: str) -> dict[str, Any]:
    result: list[dict[str, Any]] = [
        {
            "from_name": "harmful",
            "to_name": "media",
            "type": "choices",
            "value": {"choices": [HARMFUL if verdict_harmful else NOT_HARMFUL]},
        }
    ]
    if reason:
        result.append({"from_name": "reason", "to_name": "media", "type": "textarea", "value": {"text": [reason]}})
    pred: dict[str, Any] = {"model_version": model_version, "result": result}
    if score is not None:
        pred["score"] = score
    return pred


def export_labelstudio(
    out: str | os.PathLike[str],
    *,
    store: str | os.PathLike[str] = "vhd.db",
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
    from vhd.store.labels import CATEGORIES

    out_path = Path(out)
    by_kind: dict[Kind, list[dict[str, Any]]] = {}
    result = ExportResult()
    with Store(store) as db:
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
            if item is not None:
                data["human_label"] = HARMFUL if item.harmful else NOT_HARMFUL
            task: dict[str, Any] = {"data": data}
            if ann is not None:
                data["affirmative"] = "\n\n".join(ann.arguments(Role.AFFIRMATIVE))
                data["negative"] = "\n\n".join(ann.arguments(Role.NEGATIVE))
                if ann.verdict.harmful is not None:
                    model = f"vhd-debate-{ann.config_hash[:12]}"
                    task["predictions"] = [
                        _prediction(ann.verdict.harmful, ann.verdict.reason, ann.verdict.score, model)
                    ]
                    result.with_predictions += 1
            by_kind.setdefault(kind, []).append(task)
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


def _decision(task: dict[str, Any]) -> tuple[bool, str | None, tuple[str, ...]] | None:
    annotations = [a for a in task.get("annotations") or [] if isinstance(a, dict) and not a.get("was_cancelled")]
    if not annotations:
        return None
    latest = max(
        enumerate(annotations), key=lambda ia: (str(ia[1].get("updated_at") or ia[1].get("created_at") or ""), ia[0])
    )[1]
    harmful: bool | None = None
    reason: str | None = None
    categories: tuple[str, ...] = ()
    for res in latest.get("result") or []:
        value = res.get("value") or {}
        if res.get("from_name") == "harmful" and value.get("choices"):
            choice = str(value["choices"][0]).strip().lower()
            harmful = choice == HARMFUL.lower() if choice in (HARMFUL.lower(), NOT_HARMFUL.lower()) else None
        elif res.get("from_name") == "reason" and value.get("text"):
            reason = " ".join(str(t) for t in value["text"]).strip() or None
        elif res.get("from_name") == "categories":
            categories = tuple(str(c) for c in value.get("choices") or [])
    return None if harmful is None else (harmful, reason, categories)


def read_labelstudio_export(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a Label Studio JSON export (a list of tasks)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read Label Studio export {path}: {exc}; export the project as JSON") from None
    if not isinstance(data, list) or not all(isinstance(t, dict) for t in data):
        raise ConfigError(f"{path} is not a Label Studio JSON export (a list of tasks): export the project as JSON")
    return data


def import_labelstudio(
    path: str | os.PathLike[str], *, store: str | os.PathLike[str] = "vhd.db", name: str = "labelstudio"
) -> tuple[int, list[tuple[int, str]]]:
    """Read people's decisions from a Label Studio JSON export into a labelled set.

    Each task is tied to a sample by ``data.sample_id`` (as exported by `export_labelstudio`),
    else by ``data.path`` or the local-file URL, which must name a sample the store holds.

    Args:
        path: The export file.
        store: The store.
        name: The labelled set to write.

    Returns:
        Rows imported, and ``(task number, reason)`` for each task left out.
    """
    check_set_name(name)
    tasks = read_labelstudio_export(path)
    items: list[LabelledItem] = []
    skipped: list[tuple[int, str]] = []
    with Store(store) as db:
        for number, task in enumerate(tasks, start=1):
            data = task.get("data") or {}
            decision = _decision(task)
            if decision is None:
                skipped.append((number, "no submitted annotation with a Harmful / Not harmful choice"))
                continue
            sample = db.get_sample(str(data.get("sample_id") or "")) if data.get("sample_id") else None
            if sample is None:
                ref = data.get("path") or _path_from_url(str(data.get("image") or data.get("video") or ""))
                found = db.find_samples(ref) if ref else []
                sample = found[0] if len(found) == 1 else None
            if sample is None:
                skipped.append((number, "its sample is not in the store: import it with `vhd label` first"))
                continue
            harmful, reason, categories = decision
            items.append(
                LabelledItem(
                    id=sample.id,
                    path=Path(sample.path),
                    kind=sample.kind,
                    harmful=harmful,
                    reason=reason,
                    categories=list(categories),
                )
            )
        save_labelled_set(db, name, items, source=os.path.abspath(path))
    return len(items), skipped


def _path_from_url(url: str) -> str:
    if url.startswith(LOCAL_FILES):
        return "/" + unquote(url[len(LOCAL_FILES) :]).lstrip("/")
    return ""
