"""The labelled set a benchmark runs on: labels read, media found, problems reported per row.

Labels come from the shared labels CSV or a VHD11K release file (`vhd.store.labels.read_labels`).
Relative media paths are resolved under ``media`` (default: the labels file's folder). Videos
may be files or folders of extracted frames. A row whose media is missing, whose category is
unknown, or whose content duplicates an earlier row is reported in `BenchSet.problems` with
its row number; the rest of the set is used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from vhd.errors import ConfigError, MediaError
from vhd.records import Kind, LabelledSample, MediaItem
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
) -> BenchSet:
    """Read a labelled set and find its media.

    Args:
        labels: A labels CSV, or a VHD11K annotation file (CSV or JSON).
        media: Folder relative media paths are under (default: the labels file's folder).
        taxonomy: The taxonomy of the ``categories`` column (default VHD11K's ten categories).

    Returns:
        The usable items and the problems, per row.

    Raises:
        ConfigError: The labels file cannot be read, or no row is usable.
    """
    from vhd.media.load import sample_id
    from vhd.store.labels import read_labels

    tax = taxonomy or default_taxonomy()
    if media is not None and not Path(media).is_dir():
        raise ConfigError(f"media folder {media} does not exist: pass the folder the labels' paths are under")
    label_set = read_labels(labels, root=media, taxonomy=tax)
    problems = [Problem(e.line, e.message) for e in label_set.errors]
    items: list[BenchItem] = []
    seen: dict[str, int] = {}
    for row in label_set:
        if row.path is None:
            problems.append(Problem(row.line, "row gives only an id: add a path column so the media can be found"))
            continue
        if not row.path.exists():
            problems.append(Problem(row.line, f"media {row.path} not found: check --media"))
            continue
        kind = _kind_of(row.path, row.kind)
        if kind is None:
            problems.append(Problem(row.line, f"{row.path} is not an image, a video or a frame folder"))
            continue
        codes: list[str] = []
        for name in row.categories:
            cat = tax.find(name)
            if cat is None:
                problems.append(Problem(row.line, f"unknown category {name!r} dropped", used=True))
            elif cat.code not in codes:
                codes.append(cat.code)
        try:
            sid = sample_id(MediaItem(path=row.path, kind=kind, is_frame_folder=row.path.is_dir()))
        except MediaError as exc:
            problems.append(Problem(row.line, f"{row.path}: {exc}"))
            continue
        if row.id is not None and row.id != sid:
            problems.append(Problem(row.line, f"id {row.id[:12]}... differs from the media's hash {sid[:12]}..."))
            continue
        if sid in seen:
            problems.append(Problem(row.line, f"duplicate media, same content as row {seen[sid]}"))
            continue
        seen[sid] = row.line
        items.append(
            BenchItem(
                id=sid,
                path=row.path,
                kind=kind,
                harmful=row.harmful,
                categories=codes if row.harmful else [],
                source=row.source,
                split=row.split,
                line=row.line,
            )
        )
    if not items:
        detail = f" (first problem: {problems[0]})" if problems else ""
        raise ConfigError(f"no usable row in {labels}{detail}: check the file and --media")
    problems.sort(key=lambda p: p.line)
    return BenchSet(items=items, problems=problems, source=Path(labels), taxonomy=tax)
