"""A store's annotations as a Hugging Face ``DatasetDict`` saved to disk, with a dataset card.

``vhd export --format hf -o DIR`` writes what ``datasets.load_from_disk(DIR)`` opens: one split
per vhd split (``train`` when samples have none), images and videos under one schema
(`features`): ``kind``; ``image`` an ``Image`` (null for videos); ``frames`` a list of images
(the video's sampled frames, null for images); ``video_path``; every annotation column typed
(bools as bools, lists as lists, nulls as nulls) and the debate's turns as a list of structs.
Rows are produced by a generator over the store (`Dataset.from_generator`), so memory does not
grow with the number of samples; a ``README.md`` dataset card (`card`) is written beside them.
``--push-to-hub REPO`` sends the same ``DatasetDict`` to the hub (private unless asked, the
token from ``HF_TOKEN``).

This module reads the store through its public readers only; the streaming export writer
planned for `vhd.store.export` can replace `rows` without changing the schema.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError, VhdError, require
from vhd.hub.result import HfExport
from vhd.records import Annotation, Kind, Sample, Status
from vhd.store.sqlite import Store, open_store

TOKEN_ENV = "HF_TOKEN"
"""Where ``--push-to-hub`` takes the hub token from."""

DEFAULT_SPLIT = "train"


def features() -> Any:
    """The schema every row has, images and videos alike (``datasets.Features``)."""
    ds: Any = require("datasets", "hf")
    s, b, f, i = ds.Value("string"), ds.Value("bool"), ds.Value("float64"), ds.Value("int64")
    turn = {
        "role": s,
        "round": ds.Value("int32"),
        "model": s,
        "text": s,
        "refused": b,
        "prompt_tokens": i,
        "completion_tokens": i,
        "latency_s": f,
    }
    return ds.Features(
        {
            "id": s,
            "kind": s,
            "path": s,
            "image": ds.Image(),
            "frames": ds.List(ds.Image()),
            "video_path": s,
            "frame_indices": ds.List(i),
            "source": s,
            "keyword": s,
            "generator": s,
            "split": s,
            "label": b,
            "harmful": b,
            "status": s,
            "refused": b,
            "reason": s,
            "score": f,
            "categories": ds.List(s),
            "turns": ds.List(turn),
            "config_hash": s,
            "run_id": s,
            "calls": i,
            "prompt_tokens": i,
            "completion_tokens": i,
            "cost": f,
            "annotated_at": ds.Value("timestamp[us, tz=UTC]"),
            "error": s,
            "meta": s,
        }
    )


def _media(sample: Sample, frames: int) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None, str | None]:
    """``(image, frames, problem)``: the file's bytes for an image, the sampled frames for a video."""
    path = Path(sample.path)
    if sample.kind is Kind.IMAGE:
        try:
            return {"bytes": path.read_bytes(), "path": path.name}, None, None
        except OSError as exc:
            return None, None, f"image not read ({exc.strerror or exc})"
    from vhd.media.load import MediaSettings, load_sample
    from vhd.records import MediaItem

    try:
        item = MediaItem(path=path, kind=Kind.VIDEO, is_frame_folder=path.is_dir())
        loaded = load_sample(item, MediaSettings(n_frames=max(1, len(sample.frames) or frames), fmt="png"))
    except VhdError as exc:
        return None, None, f"frames not read ({exc})"
    return None, [{"bytes": e.data, "path": f"{path.stem}_{k:04d}.png"} for k, e in enumerate(loaded.images)], None


def row(sample: Sample, ann: Annotation, *, frames: int = 5) -> tuple[dict[str, Any], str | None]:
    """One dataset row (see `features`) and the problem reading its media, if any."""
    from datetime import UTC, datetime

    image, video_frames, problem = _media(sample, frames)
    v, u = ann.verdict, ann.usage
    out = {
        "id": sample.id,
        "kind": sample.kind.value,
        "path": sample.path,
        "image": image,
        "frames": video_frames,
        "video_path": sample.path if sample.kind is Kind.VIDEO else None,
        "frame_indices": list(sample.frames) if sample.kind is Kind.VIDEO else None,
        "source": None if sample.source is None else sample.source.value,
        "keyword": sample.keyword,
        "generator": sample.generator,
        "split": sample.split,
        "label": sample.harmful,
        "harmful": True if Status(v.status) is Status.REFUSED else v.harmful,
        "status": Status(v.status).value,
        "refused": bool(v.refused),
        "reason": v.reason or None,
        "score": v.score,
        "categories": list(v.categories),
        "turns": [
            {
                "role": t.role.value,
                "round": t.round,
                "model": t.model,
                "text": t.text,
                "refused": t.refused,
                "prompt_tokens": t.prompt_tokens,
                "completion_tokens": t.completion_tokens,
                "latency_s": t.latency_s,
            }
            for t in ann.turns
        ],
        "config_hash": ann.config_hash,
        "run_id": ann.run_id,
        "calls": u.calls,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "cost": u.cost,
        "annotated_at": datetime.fromtimestamp(ann.finished_at, tz=UTC) if ann.finished_at else None,
        "error": ann.error,
        "meta": json.dumps(sample.meta, sort_keys=True, default=str) if sample.meta else None,
    }
    return out, problem


def _keep(ann: Annotation, include_unparsed: bool) -> bool:
    status = Status(ann.verdict.status)
    return include_unparsed or status is Status.REFUSED or (status is Status.OK and ann.verdict.harmful is not None)


def _rows(
    store: str, split: str, config_hash: str | None, kind: str | None, include_unparsed: bool, frames: int, tally: Any
) -> Iterator[dict[str, Any]]:
    """The rows of one split, read from the store as they are yielded (run in ``from_generator``)."""
    with Store(store) as db:
        for sample, ann in db.iter_annotations(config_hash=config_hash):
            if (sample.split or DEFAULT_SPLIT) != split or (kind and sample.kind.value != kind):
                continue
            if not _keep(ann, include_unparsed):
                continue
            out, problem = row(sample, ann, frames=frames)
            if problem and tally is not None:
                tally.append((sample.id, problem))
            yield out


def export_hf(
    store: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    config_hash: str | None = None,
    kind: str | None = None,
    include_unparsed: bool = False,
    frames: int = 5,
    push_to_hub: str | None = None,
    public: bool = False,
) -> HfExport:
    """Write a store's annotations as a ``DatasetDict`` folder with a dataset card.

    Args:
        store: The store.
        out: The folder to write (``datasets.load_from_disk(out)`` opens it); replaced if present.
        config_hash: Only annotations under this configuration (default: each sample's latest).
        kind: ``image`` or ``video`` only.
        include_unparsed: Also rows without a decision (``harmful`` null).
        frames: Frames per video when the store recorded none.
        push_to_hub: Also push to this hub repository (``user/name``); token from ``HF_TOKEN``.
        public: Make the pushed repository public (private by default).

    Raises:
        ConfigError: Nothing to export, or the hub refused the push.
        MissingDependencyError: ``datasets`` is not installed.
    """
    ds: Any = require("datasets", "hf")
    store = str(store)
    out_path = Path(out)
    result = HfExport(out=out_path)
    with open_store(store) as db:
        cats: Counter[str] = Counter()
        hashes: dict[str, None] = {}
        for sample, ann in db.iter_annotations(config_hash=config_hash):
            if kind and sample.kind.value != kind:
                continue
            if not _keep(ann, include_unparsed):
                result.left_out.append((sample.id, f"status {Status(ann.verdict.status).value}, no decision"))
                continue
            split = sample.split or DEFAULT_SPLIT
            result.splits[split] = result.splits.get(split, 0) + 1
            result.kinds[sample.kind.value] = result.kinds.get(sample.kind.value, 0) + 1
            result.harmful += bool(ann.verdict.harmful) or Status(ann.verdict.status) is Status.REFUSED
            cats.update(ann.verdict.categories)
            hashes[ann.config_hash] = None
        runs = [r for r in db.runs() if r.config_hash in hashes]
    if not result.splits:
        raise ConfigError(f"nothing to export from {store}: annotate samples first (or pass --include-unparsed)")
    result.categories = dict(cats.most_common())
    result.config_hashes = list(hashes)
    for r in runs:
        for role, spec in r.models.items():
            result.models.setdefault(role, [])
            if spec not in result.models[role]:
                result.models[role].append(spec)
    feats = features()
    bars_were_off = ds.is_progress_bar_enabled() is False
    ds.disable_progress_bars()  # vhd's own summary says what was written
    try:
        _write(ds, result, feats, store, out_path, config_hash, kind, include_unparsed, frames, push_to_hub, public)
    finally:
        if not bars_were_off:
            ds.enable_progress_bars()
    return result


def _write(
    ds: Any,
    result: HfExport,
    feats: Any,
    store: str,
    out_path: Path,
    config_hash: str | None,
    kind: str | None,
    include_unparsed: bool,
    frames: int,
    push_to_hub: str | None,
    public: bool,
) -> None:
    with tempfile.TemporaryDirectory(prefix="vhd-hf-") as cache:
        problems: list[tuple[str, str]] = []
        parts = {}
        for split in sorted(result.splits):
            gen_kwargs = {
                "store": store,
                "split": split,
                "config_hash": config_hash,
                "kind": kind,
                "include_unparsed": include_unparsed,
                "frames": frames,
                "tally": problems,
            }
            parts[split] = ds.Dataset.from_generator(_rows, features=feats, cache_dir=cache, gen_kwargs=gen_kwargs)
        result.media_problems = problems
        dd = ds.DatasetDict(parts)
        from vhd.fileio import atomic_folder, atomic_write
        from vhd.hub.card import dataset_card

        with atomic_folder(out_path) as building:  # a full disk leaves no partial dataset folder
            dd.save_to_disk(str(building))
            atomic_write(building / "README.md", dataset_card(result))
        if push_to_hub:
            push(dd, push_to_hub, private=not public)
            result.pushed_to = push_to_hub


def push(dd: Any, repo: str, *, private: bool = True) -> None:
    """Push a ``DatasetDict`` to the hub: private unless asked, the token from ``HF_TOKEN``.

    Raises:
        ConfigError: The hub cannot be reached (offline mode included) or refused; one line.
    """
    token = os.environ.get(TOKEN_ENV) or None
    try:
        dd.push_to_hub(repo, private=private, token=token)
    except Exception as exc:  # the hub library raises many types; each becomes one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"could not push to the hub repository {repo!r} ({type(exc).__name__}: {first}); the dataset is saved "
            f"locally; set {TOKEN_ENV} and check the network, then push again with --push-to-hub"
        ) from None
