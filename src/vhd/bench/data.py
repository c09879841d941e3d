"""The labelled set a benchmark runs on: labels read, media found, problems reported per row.

Labels come from the shared labels CSV or a VHD11K release file (`vhd.labels.files.read_labels`).
Relative media paths are resolved under ``media`` (default: the labels file's folder); where
paths may lead, remaps and duplicates follow `vhd.labels.rules.LabelOptions`. Videos may be
files or folders of extracted frames. A row whose media is missing, whose category is unknown,
or that names the same sample (path, id or content) as another row is reported in
`BenchSet.problems` with its row number; the rest of the set is used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from vhd.boundary import ItemFailure, guarded
from vhd.errors import ConfigError, MediaError
from vhd.labels.rules import NOT_FOUND_HINT, LabelOptions, settle_duplicates
from vhd.records import Kind, LabelledSample, LabelRow, MediaItem
from vhd.taxonomy.taxonomy import Taxonomy, default_taxonomy

UNHARMFUL = "unharmful"
"""The multi-class label of an unharmful sample (and of an unharmful prediction)."""


BenchItem = LabelledSample
"""One labelled sample of the benchmark (`LabelledSample`: ``id`` is the prediction cache's key,
``categories`` the ground-truth category codes of a harmful sample, ``split`` the split
``--calibrate`` fits on)."""


@dataclass(frozen=True)
class Problem:
    """A row left out, or used with a caveat.

    Attributes:
        line: Row number in the labels file.
        message: What is wrong, one line.
        used: Whether the row still counts (e.g. an unknown category is dropped, the row kept).
    """

    line: int
    message: str
    used: bool = False

    def __str__(self) -> str:
        return f"row {self.line}: {self.message}" + (" (row kept)" if self.used else "")


@dataclass
class BenchSet:
    """A labelled benchmark set.

    Attributes:
        items: The usable samples, in file order.
        problems: Rows left out or kept with a caveat, each with its row number.
        source: The labels file.
        taxonomy: The taxonomy the categories are codes of.
    """

    items: list[BenchItem]
    problems: list[Problem]
    source: Path
    taxonomy: Taxonomy

    def __len__(self) -> int:
        return len(self.items)


def _kind_of(path: Path, given: Kind | None) -> Kind | None:
    from vhd.media.discover import frame_folder_frames, kind_for

    if path.is_dir():
        return Kind.VIDEO if frame_folder_frames(path) is not None else None
    return given or kind_for(path)


def load_bench_set(
    labels: str | os.PathLike[str],
    *,
    media: str | os.PathLike[str] | None = None,
    taxonomy: Taxonomy | None = None,
    options: LabelOptions | None = None,
    store: str | os.PathLike[str] | None = None,
) -> BenchSet:
    """Read a labelled set and find its media.

    Args:
        labels: A labels CSV, or a VHD11K annotation file (CSV or JSON).
        media: Folder relative media paths are under (default: the labels file's folder);
            ``options.media`` wins when both are given.
        taxonomy: The taxonomy of the ``categories`` column (default VHD11K's ten categories).
        options: ``--path-prefix``, ``--allow-outside-paths`` and ``--duplicates``
            (`LabelOptions`).
        store: A vhd store the labels refer to: rows naming its samples (by id or path) may
            lead anywhere on disk, and rows giving only an id take the stored sample's path.

    Returns:
        The usable items and the problems, per row.

    Raises:
        ConfigError: The labels file cannot be read, or no row is usable.
    """
    from dataclasses import replace

    from vhd.labels.files import read_labels
    from vhd.store.sqlite import open_store

    tax = taxonomy or default_taxonomy()
    opts = options or LabelOptions()
    if opts.media is None and media is not None:
        opts = replace(opts, media=media)
    if opts.media is not None and not Path(opts.media).is_dir():
        raise ConfigError(f"media folder {opts.media} does not exist: pass the folder the labels' paths are under")
    if store is None:
        label_set = read_labels(labels, taxonomy=tax, options=opts)
        stored: dict[str, Path] = {}
    else:
        with open_store(store) as db:
            label_set = read_labels(labels, taxonomy=tax, options=opts, store=db)
            stored = {r.id: Path(s.path) for r in label_set.rows if r.id and (s := db.get_sample(r.id)) is not None}
    problems = [Problem(e.line, e.message) for e in label_set.errors]
    problems += [Problem(n.line, n.message) for n in label_set.notes]
    found: list[BenchItem] = []
    for row in label_set:
        item = guarded(_item, row, tax, problems, stored.get(row.id or ""))
        if isinstance(item, ItemFailure):
            problems.append(Problem(row.line, item.reason))
        elif item is not None:
            found.append(item)
    settled = settle_duplicates([(i.line, [i.id], i.harmful) for i in found], opts.duplicates, "content")
    items = [found[k] for k in settled.keep]
    problems += [Problem(line, msg) for line, msg in [*settled.dropped, *settled.merged]]
    if not items:
        detail = f" (first problem: {min(problems, key=lambda p: p.line)})" if problems else ""
        raise ConfigError(f"no usable row in {labels}{detail}: check the file and --media")
    problems.sort(key=lambda p: p.line)
    return BenchSet(items=items, problems=problems, source=Path(labels), taxonomy=tax)


def _item(row: LabelRow, tax: Taxonomy, problems: list[Problem], stored: Path | None) -> BenchItem | None:
    """The benchmark item of one row, or None (with the reason added to ``problems``)."""
    from vhd.media.load import sample_id

    path = row.path if row.path is not None else stored
    if path is None:
        why = "row gives only an id: add a path column (or pass --store) so the media can be found"
        problems.append(Problem(row.line, why))
        return None
    if not path.exists():
        problems.append(Problem(row.line, f"media {path} not found: {NOT_FOUND_HINT}"))
        return None
    kind = _kind_of(path, row.kind)
    if kind is None:
        problems.append(Problem(row.line, f"{path} is not an image, a video or a frame folder"))
        return None
    codes: list[str] = []
    for name in row.categories:
        cat = tax.find(name)
        if cat is None:
            problems.append(Problem(row.line, f"unknown category {name!r} dropped", used=True))
        elif cat.code not in codes:
            codes.append(cat.code)
    try:
        sid = sample_id(MediaItem(path=path, kind=kind, is_frame_folder=path.is_dir()))
    except (MediaError, OSError) as exc:
        problems.append(Problem(row.line, f"{path}: {exc}"))
        return None
    if row.id is not None and row.id != sid:
        problems.append(Problem(row.line, f"id {row.id[:12]}... differs from the media's hash {sid[:12]}..."))
        return None
    return BenchItem(
        id=sid,
        path=str(path),
        kind=kind,
        harmful=row.harmful,
        categories=codes if row.harmful else [],
        reason=row.reason,
        source=row.source,
        split=row.split,
        line=row.line,
        segments=row.segments if kind is Kind.VIDEO else None,
    )
