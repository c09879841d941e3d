"""The files `vhd dedup` hashes, as jobs: a store's samples, or files, folders and manifests walked lazily."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from vhd.curate.fingerprint import Job
from vhd.fileio import display_path
from vhd.store.sqlite import Store

DISCOVERY_CACHE_KIB = 1024
"""Page cache of the on-disk set of paths met while walking the inputs (they come sorted)."""


def jobs_from_store(store: Store, settings: dict[str, int]) -> tuple[list[Job], dict[str, str], dict[str, str]]:
    """Jobs for a store's samples that are not removed, with ``path -> split`` and ``path -> sample id``."""
    from vhd.store.curation import active_samples

    jobs: list[Job] = []
    splits: dict[str, str] = {}
    ids: dict[str, str] = {}
    for row in active_samples(store):
        path = str(row["path"])
        frame_folder = row["kind"] == "video" and os.path.isdir(path)
        jobs.append(Job(len(jobs), path, str(row["kind"]), frame_folder, **settings))
        ids[path] = str(row["id"])
        if row["split"]:
            splits[path] = str(row["split"])
    return jobs, splits, ids


def jobs_from_paths(
    inputs: Sequence[str | Path],
    settings: dict[str, int],
    frame_folders: bool,
    unreadable: list[tuple[str, str]],
    splits: dict[str, str],
    allow_outside_paths: bool = False,
    store: Store | None = None,
    rows_left_out: list[str] | None = None,
) -> Iterator[Job]:
    """Discovery, streamed into jobs (paths met in an on-disk set with a small cache).

    Skipped inputs are appended to ``unreadable``, manifest splits put in ``splits``, and the
    reasons of manifest rows that could not be read at all also to ``rows_left_out``.
    """
    from vhd.labels.rules import known_sample
    from vhd.media.discover import Skipped, iter_discover
    from vhd.store.statindex import ScratchSet

    order, seen = 0, ScratchSet(DISCOVERY_CACHE_KIB)
    try:
        for found in iter_discover(
            inputs,
            frame_folders=frame_folders,
            allow_outside_paths=allow_outside_paths,
            known=lambda sample_id, path: known_sample(store, sample_id, path),
            first_seen=seen.add,
            record_new=seen.put_new,
        ):
            if isinstance(found, Skipped):
                unreadable.append((display_path(found.path), found.reason))
                if found.row_left_out and rows_left_out is not None:
                    rows_left_out.append(found.reason)
                continue
            path = display_path(found.path)
            if found.split:
                splits[path] = found.split
            yield Job(order, path, found.kind.value, found.is_frame_folder, **settings)
            order += 1
    finally:
        seen.close()
