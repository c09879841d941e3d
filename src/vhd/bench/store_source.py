"""A vhd store (``vhd annotate``'s SQLite file) as the labelled set of a benchmark.

Each sample's latest annotation gives its label: harmful yes/no from the verdict, categories
from ``Verdict.categories`` (names or codes, as ``vhd categorize`` wrote them), the severity
level from ``Verdict.severity``. Samples whose
latest annotation has no decision (``unparsed`` or ``error``), whose media is gone or changed,
or whose categories are unknown are reported in `BenchSet.problems`, numbered by their position
in the store's listing (ordered by path), with the sample's path in the message.
"""

from __future__ import annotations

import os
from pathlib import Path

from vhd.bench.data import BenchItem, BenchSet, Problem
from vhd.errors import ConfigError, MediaError
from vhd.store.sqlite import StoreLike, store_path
from vhd.taxonomy.taxonomy import Taxonomy, default_taxonomy

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_store_file(path: str | os.PathLike[str]) -> bool:
    """Whether a file is an SQLite database (a vhd store) rather than a labels CSV or JSON."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def load_bench_set_from_store(
    store: StoreLike,
    *,
    config_hash: str | None = None,
    run_id: str | None = None,
    taxonomy: Taxonomy | None = None,
) -> BenchSet:
    """Read a labelled set from a vhd store.

    Args:
        store: The store file (``vhd annotate --store``).
        config_hash: Only annotations under this configuration (default: each sample's latest).
        run_id: Only annotations written by this run.
        taxonomy: The taxonomy category names and codes are resolved in (default VHD11K's).

    Returns:
        The usable items and the problems, per sample.

    Raises:
        ConfigError: The store is missing or unreadable, or no sample is usable.
    """
    store = store_path(store)
    from vhd.media.load import sample_id
    from vhd.records import MediaItem, Status
    from vhd.store.sqlite import open_store

    tax = taxonomy or default_taxonomy()
    items: list[BenchItem] = []
    problems: list[Problem] = []
    with open_store(store) as db:
        pairs = list(db.iter_annotations(config_hash=config_hash, run_id=run_id))
    for line, (sample, ann) in enumerate(pairs, start=1):
        verdict, where = ann.verdict, sample.path
        if verdict.harmful is None or verdict.status in (Status.UNPARSED, Status.ERROR):
            problems.append(
                Problem(line, f"{where}: latest annotation is {verdict.status.value}, no decision: re-run vhd annotate")
            )
            continue
        media_path = Path(sample.path)
        if not media_path.exists():
            problems.append(Problem(line, f"media {where} not found: restore the file or re-ingest it"))
            continue
        try:
            digest = sample_id(MediaItem(path=media_path, kind=sample.kind, is_frame_folder=media_path.is_dir()))
        except MediaError as exc:
            problems.append(Problem(line, f"{where}: {exc}"))
            continue
        if digest != sample.id:
            problems.append(Problem(line, f"{where} changed since it was annotated (hash differs): re-annotate it"))
            continue
        codes: list[str] = []
        for name in verdict.categories if verdict.harmful else []:
            cat = tax.find(name)
            if cat is None:
                problems.append(Problem(line, f"{where}: unknown category {name!r} dropped", used=True))
            elif cat.code not in codes:
                codes.append(cat.code)
        items.append(
            BenchItem(
                id=sample.id,
                path=str(media_path),
                kind=sample.kind,
                harmful=bool(verdict.harmful),
                categories=codes,
                source=sample.source,
                split=sample.split,
                line=line,
                severity=verdict.severity if verdict.harmful else None,
            )
        )
    if not items:
        detail = f" (first problem: {problems[0]})" if problems else " (no annotation in it)"
        raise ConfigError(f"no usable sample in store {store}{detail}: annotate it first with vhd annotate")
    return BenchSet(items=items, problems=problems, source=Path(store), taxonomy=tax)
