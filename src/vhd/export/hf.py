"""A store's annotations as a Hugging Face ``DatasetDict`` saved to disk, with a dataset card.

``vhd export --format hf -o DIR`` writes what ``datasets.load_from_disk(DIR)`` opens: one split
per vhd split (``train`` when samples have none), images and videos under one schema
(`features`): the export's own columns, with the names and types of the JSON Lines and Parquet
exports (`vhd.export.schema.RECORD_COLUMNS`; ``frames`` are a video's frame indices there too),
``harmful`` a ``ClassLabel`` so splits can be stratified on it, then the media: ``image`` (an
``Image``, null for videos) and ``video_frames`` (the sampled frames the debate saw, as images,
null for images). Videos are frames rather than a ``datasets.Video``: decoding that feature needs
torchcodec, which vhd does not install, and the frames are what the models judged.
Rows are produced by a generator over the store (`Dataset.from_generator`), so memory does not
grow with the number of samples; a ``README.md`` dataset card (`card`) is written beside them.
``--push-to-hub REPO`` sends the same ``DatasetDict`` to the hub (private unless asked, the
token from ``HF_TOKEN``). ``path`` is relative to the samples' common folder
(or ``relative_to``); absolute local paths only on request, and never pushed.

This module reads the store through its public readers only; the streaming export writer
planned for `vhd.export` can replace `rows` without changing the schema.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError, VhdError, require
from vhd.export.base import ExportFormat, ExportRequest, ExportResult, path_root, relative_path
from vhd.export.hf_result import HfExport
from vhd.export.schema import HARMFUL_NAMES as schema_harmful_names
from vhd.records import Annotation, Kind, Sample, Status
from vhd.store.sqlite import Store, StoreLike, open_store, store_path

TOKEN_ENV = "HF_TOKEN"
"""Where ``--push-to-hub`` takes the hub token from."""

DEFAULT_SPLIT = "train"

HARMFUL_NAMES = schema_harmful_names
"""The ``harmful`` column's class names in the dataset (``ClassLabel``: 0 not harmful, 1 harmful)."""


def features() -> Any:
    """The schema every row has, images and videos alike (``datasets.Features``).

    The export's columns (`vhd.export.schema.hf_features`: what the JSON Lines and Parquet exports
    load as when read with those features; ``harmful`` a ``ClassLabel``, `HARMFUL_NAMES`, so that
    ``train_test_split(stratify_by_column="harmful")`` works), then the media: ``image`` (an
    ``Image``, null for videos) and ``video_frames`` (the video's sampled frames as images, null
    for images).
    """
    ds: Any = require("datasets", "hf")
    from vhd.export.schema import hf_features

    feats = dict(hf_features())
    feats["image"] = ds.Image()
    feats["video_frames"] = ds.List(ds.Image())
    return ds.Features(feats)


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


def row(
    sample: Sample, ann: Annotation, *, frames: int = 5, root: str | None = None
) -> tuple[dict[str, Any], str | None]:
    """One dataset row (see `features`) and the problem reading its media, if any.

    Args:
        sample: The sample (its media are read from ``sample.path``).
        ann: Its annotation.
        frames: Frames per video when the store recorded none.
        root: Write ``path`` relative to this folder (None: as stored).
    """
    from vhd.export.schema import record

    image, video_frames, problem = _media(sample, frames)
    out = record(sample, ann)
    if root is not None:
        out["path"] = relative_path(sample.path, root)
    if out["harmful"] is not None:
        out["harmful"] = int(out["harmful"])  # the ClassLabel's index
    out["image"] = image
    out["video_frames"] = video_frames
    return out, problem


def _keep(ann: Annotation, include_unparsed: bool) -> bool:
    status = Status(ann.verdict.status)
    return include_unparsed or status is Status.REFUSED or (status is Status.OK and ann.verdict.harmful is not None)


def _rows(
    store: str,
    split: str,
    config_hash: str | None,
    kind: str | None,
    include_unparsed: bool,
    frames: int,
    tally: Any,
    root: str | None = None,
) -> Iterator[dict[str, Any]]:
    """The rows of one split, read from the store as they are yielded (run in ``from_generator``)."""
    with Store(store) as db:
        for sample, ann in db.iter_annotations(config_hash=config_hash):
            if (sample.split or DEFAULT_SPLIT) != split or (kind and sample.kind.value != kind):
                continue
            if not _keep(ann, include_unparsed):
                continue
            out, problem = row(sample, ann, frames=frames, root=root)
            if problem and tally is not None:
                tally.append((sample.id, problem))
            yield out


def export_hf(
    store: StoreLike,
    out: str | os.PathLike[str],
    *,
    config_hash: str | None = None,
    kind: str | None = None,
    include_unparsed: bool = False,
    frames: int = 5,
    relative_to: str | os.PathLike[str] | None = None,
    absolute_paths: bool = False,
    push_to_hub: str | None = None,
    public: bool = False,
) -> HfExport:
    """Write a store's annotations as a ``DatasetDict`` folder with a dataset card.

    Args:
        store: The store: an open `Store` or its path.
        out: The folder to write (``datasets.load_from_disk(out)`` opens it); replaced if present.
        config_hash: Only annotations under this configuration (default: each sample's latest).
        kind: ``image`` or ``video`` only.
        include_unparsed: Also rows without a decision (``harmful`` null).
        frames: Frames per video when the store recorded none.
        relative_to: Write ``path`` relative to this folder. By default they
            are relative to the deepest folder holding every exported sample (`HfExport.root`).
        absolute_paths: Write them as stored (absolute local paths); refused with ``push_to_hub``.
        push_to_hub: Also push to this hub repository (``user/name``); token from ``HF_TOKEN``.
        public: Make the pushed repository public (private by default).

    Raises:
        ConfigError: Nothing to export, the hub refused the push, or ``absolute_paths`` with
            ``push_to_hub`` (refused before anything is written).
        MissingDependencyError: ``datasets`` is not installed.
    """
    if absolute_paths and push_to_hub:
        raise ConfigError(
            "--push-to-hub never sends absolute local paths: drop --absolute-paths (paths are then written "
            "relative to the samples' common folder, or to --relative-to DIR)"
        )
    ds: Any = require("datasets", "hf")
    store = str(store_path(store))  # the rows' generator opens it again
    out_path = Path(out)
    result = HfExport(out=out_path)
    with open_store(store) as db:
        want = None if kind is None else Kind(kind)
        root = path_root(db, relative_to, absolute_paths, config_hash=config_hash, kind=want)
        result.root = None if root is None else Path(root)
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
            refused = Status(ann.verdict.status) is Status.REFUSED
            result.harmful += bool(ann.verdict.harmful)
            result.refused += refused
            result.refused_harmful += refused and bool(ann.verdict.harmful)
            cats.update(ann.verdict.categories)
            hashes[ann.config_hash] = None
        runs = [r for r in db.runs() if r.config_hash in hashes]
    if not result.splits:
        raise ConfigError(f"nothing to export from {store}: annotate samples first (or pass --include-unparsed)")
    result.categories = dict(cats.most_common())
    result.config_hashes = list(hashes)
    for r in runs:
        debate = r.config.get("debate")
        rule = debate.get("refusal_is_harmful", True) if isinstance(debate, dict) else True
        result.refusal_is_harmful[r.config_hash] = bool(rule)
        for role, spec in r.models.items():
            result.models.setdefault(role, [])
            if spec not in result.models[role]:
                result.models[role].append(spec)
    feats = features()
    bars_were_off = ds.is_progress_bar_enabled() is False
    ds.disable_progress_bars()  # vhd's own summary says what was written
    try:
        rows = {"store": store, "config_hash": config_hash, "kind": kind, "include_unparsed": include_unparsed}
        _write(ds, result, feats, out_path, {**rows, "frames": frames, "root": root}, push_to_hub, public)
    finally:
        if not bars_were_off:
            ds.enable_progress_bars()
    return result


def _write(
    ds: Any,
    result: HfExport,
    feats: Any,
    out_path: Path,
    rows: dict[str, Any],
    push_to_hub: str | None,
    public: bool,
) -> None:
    """Build each split from `_rows` (``rows``: its arguments but the split), save, write the card, push."""
    with tempfile.TemporaryDirectory(prefix="vhd-hf-") as cache:
        problems: list[tuple[str, str]] = []
        parts = {}
        for split in sorted(result.splits):
            gen_kwargs = {**rows, "split": split, "tally": problems}
            parts[split] = ds.Dataset.from_generator(_rows, features=feats, cache_dir=cache, gen_kwargs=gen_kwargs)
        result.media_problems = problems
        dd = ds.DatasetDict(parts)
        from vhd.export.hf_card import dataset_card
        from vhd.fileio import atomic_folder, atomic_write

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


class HfFormat(ExportFormat):
    """``hf``: a ``DatasetDict`` folder (one split per vhd split) with its dataset card; `export_hf`.

    It reads the store itself (each sample's media and split), so it overrides `ExportFormat.export`;
    a caller holding only ``(sample, annotation)`` records cannot build it (`write` says so).
    """

    def write(self, out: Path, rows: Iterable[tuple[Sample, Annotation]], kind: Kind | None) -> list[Path]:
        """Refused: the dataset needs the store (media, splits); `vhd.export.export` builds it."""
        raise ConfigError("the hf format is written from a store: call vhd.export.export(store, 'hf', out)")

    def export(self, db: Store, out: Path, request: ExportRequest) -> ExportResult:
        """Write the dataset folder (`export_hf`) and say what it holds in `ExportResult.notes`."""
        if request.run_id is not None:
            raise ConfigError("the hf format exports by configuration, not by run: drop the run id")
        res = export_hf(
            db,
            out,
            config_hash=request.config_hash,
            kind=None if request.kind is None else request.kind.value,
            include_unparsed=request.include_unparsed,
            relative_to=request.relative_to,
            absolute_paths=request.absolute_paths,
            push_to_hub=request.push_to_hub,
            public=request.public,
        )
        result = ExportResult(files=[res.out], written=res.written, root=res.root)
        result.details = {
            "splits": res.splits,
            "kinds": res.kinds,
            "harmful": res.harmful,
            "refused": res.refused,
            "refused_harmful": res.refused_harmful,
            "categories": res.categories,
            "models": res.models,
            "config_hashes": res.config_hashes,
            "media_problems": res.media_problems,
            "pushed_to": res.pushed_to,
        }
        for sample_id, why in res.left_out:
            result.leave_out(sample_id, why)
        splits = ", ".join(f"{name} {count}" for name, count in sorted(res.splits.items()))
        result.notes.append(f"splits: {splits}; open it with datasets.load_from_disk({str(res.out)!r})")
        result.notes.append(f"dataset card: {res.out / 'README.md'}")
        result.notes.extend(f"written without media: {sid[:12]}: {why}" for sid, why in res.media_problems[:10])
        if res.pushed_to:
            result.notes.append(f"pushed to the hub: {res.pushed_to} ({'public' if request.public else 'private'})")
        return result
