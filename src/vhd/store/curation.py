"""Curation records in the store: duplicate marks, removals (takedowns), quarantined files, splits.

The tables come from migration ``0003_curation``:

- ``duplicates``: one row per sample of a duplicate cluster (two members or more): the cluster
  id (the kept sample's id), whether this sample is the one kept, how it matched the kept one
  (``exact`` same pixels, ``near`` perceptual hash) and the Hamming distance. Marks only: no
  sample is deleted.
- ``removals``: every sample taken out of the store on request, with who asked, when and why,
  and which files were deleted.
- ``quarantine``: files found on a hash block list and never registered as samples.

Each writer runs in one transaction, so a killed process leaves either all or none of a change.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from vhd.store.sqlite import Store


@dataclass(frozen=True)
class DuplicateMark:
    """One sample's place in a duplicate cluster.

    Attributes:
        sample_id: The sample.
        cluster: The cluster id: the id of the sample kept for it.
        kept: Whether this sample is the one kept.
        match: ``kept``, ``exact`` (same decoded pixels as the kept one) or ``near``.
        distance: Hamming distance between its perceptual hash and the kept sample's.
    """

    sample_id: str
    cluster: str
    kept: bool
    match: str
    distance: int


@dataclass(frozen=True)
class Removal:
    """A sample taken out of the store.

    Attributes:
        sample_id: The sample.
        path: Where its file was.
        reason: Why (a takedown request, a block-list hit, ...).
        requested_by: Who asked.
        deleted: Files deleted with it.
        at: Unix time of the removal.
    """

    sample_id: str
    path: str
    reason: str
    requested_by: str
    deleted: list[str]
    at: float


@dataclass(frozen=True)
class Quarantined:
    """A file kept out of the store because it is on a block list.

    Attributes:
        sha256: The file's sha256.
        path: Where it was found.
        reason: Which list entry it matched.
        moved_to: Where it was moved, if it was.
        at: Unix time.
    """

    sha256: str
    path: str
    reason: str
    moved_to: str | None
    at: float


def _chunks(values: Sequence[str], size: int = 500) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def mark_duplicates(
    store: Store, marks: Sequence[DuplicateMark], covered: Iterable[str], *, threshold: int, policy: str
) -> None:
    """Replace the duplicate marks of the samples a dedup run looked at, in one transaction.

    Rows of every sample in ``covered``, and of every cluster kept by one of them, are deleted
    first, so a sample that is no longer a duplicate loses its mark.

    Args:
        store: The store.
        marks: Members of clusters of two samples or more.
        covered: Ids of every sample the run looked at.
        threshold: The Hamming-distance threshold used.
        policy: The keep policy used.
    """
    ids = sorted(set(covered) | {m.sample_id for m in marks})
    now = time.time()
    with store._tx() as conn:
        for chunk in _chunks(ids):
            marks_sql = ",".join("?" * len(chunk))
            conn.execute(
                f"DELETE FROM duplicates WHERE sample_id IN ({marks_sql}) OR cluster IN ({marks_sql})", [*chunk, *chunk]
            )
        conn.executemany(
            "INSERT INTO duplicates (sample_id, cluster, kept, match, distance, threshold, policy, marked_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(m.sample_id, m.cluster, int(m.kept), m.match, m.distance, threshold, policy, now) for m in marks],
        )


def duplicate_marks(store: Store) -> list[DuplicateMark]:
    """Return every duplicate mark, grouped by cluster (kept sample first)."""
    rows = store._query(
        "SELECT sample_id, cluster, kept, match, distance FROM duplicates ORDER BY cluster, kept DESC, sample_id"
    )
    return [DuplicateMark(r[0], r[1], bool(r[2]), r[3], int(r[4])) for r in rows]


def excluded_samples(store: Store, *, duplicates: bool = True) -> dict[str, str]:
    """Sample ids that must not be annotated, each with the reason.

    Removed samples (takedowns) and quarantined files (hash block list) are always excluded, so
    no later run sends them to a model; duplicates that were not kept are excluded unless
    ``duplicates`` is False.
    """
    excluded: dict[str, str] = {}
    if duplicates:
        for r in store._query("SELECT sample_id, cluster FROM duplicates WHERE kept = 0"):
            excluded[str(r[0])] = f"duplicate of {str(r[1])[:12]} (marked by vhd dedup)"
    for r in store._query("SELECT sha256, reason FROM quarantine"):
        excluded[str(r[0])] = f"quarantined: {r[1]}"
    for r in store._query("SELECT id FROM samples WHERE removed_at IS NOT NULL"):
        excluded[str(r[0])] = "removed from the store (vhd remove)"
    return excluded


def active_samples(store: Store) -> list[dict[str, Any]]:
    """Return the samples not removed, in insertion order: id, kind, path, source, split, label."""
    rows = store._query(
        "SELECT id, kind, path, source, keyword, split, label FROM samples WHERE removed_at IS NULL ORDER BY rowid"
    )
    return [dict(r) for r in rows]


def removed_at(store: Store, sample_id: str) -> float | None:
    """Return when a sample was removed, or None when it is present (or unknown)."""
    rows = store._query("SELECT removed_at FROM samples WHERE id = ?", (sample_id,))
    return None if not rows or rows[0][0] is None else float(rows[0][0])


def latest_decisions(store: Store) -> dict[str, bool]:
    """Return each sample's harmful/unharmful decision from its latest annotation that has one."""
    rows = store._query(
        "SELECT a.sample_id, a.harmful FROM annotations a WHERE a.harmful IS NOT NULL AND a.id = "
        "(SELECT MAX(a2.id) FROM annotations a2 WHERE a2.sample_id = a.sample_id AND a2.harmful IS NOT NULL)"
    )
    return {str(r[0]): bool(r[1]) for r in rows}


def set_splits(store: Store, assignments: dict[str, str]) -> None:
    """Write every sample's split in one transaction.

    Args:
        store: The store.
        assignments: Sample id to split name.
    """
    with store._tx() as conn:
        conn.executemany("UPDATE samples SET split = ? WHERE id = ?", [(v, k) for k, v in sorted(assignments.items())])


def record_removal(
    store: Store, sample_id: str, path: str, reason: str, requested_by: str, deleted: Sequence[str]
) -> float:
    """Mark a sample removed and log the removal, in one transaction.

    Returns:
        The time recorded.
    """
    now = time.time()
    with store._tx() as conn:
        conn.execute("UPDATE samples SET removed_at = COALESCE(removed_at, ?) WHERE id = ?", (now, sample_id))
        conn.execute(
            "INSERT INTO removals (sample_id, path, reason, requested_by, deleted_json, at) VALUES (?, ?, ?, ?, ?, ?)",
            (sample_id, path, reason, requested_by, json.dumps(list(deleted), ensure_ascii=False), now),
        )
    return now


def add_deleted_files(store: Store, sample_id: str, deleted: Sequence[str]) -> None:
    """Add files deleted later (a second ``--delete-files`` run) to a sample's latest removal."""
    if not deleted:
        return
    with store._tx() as conn:
        row = conn.execute(
            "SELECT id, deleted_json FROM removals WHERE sample_id = ? ORDER BY id DESC LIMIT 1", (sample_id,)
        ).fetchone()
        if row is None:
            return
        files = [*json.loads(row[1]), *(d for d in deleted if d not in json.loads(row[1]))]
        conn.execute(
            "UPDATE removals SET deleted_json = ? WHERE id = ?", (json.dumps(files, ensure_ascii=False), row[0])
        )


def removals(store: Store) -> list[Removal]:
    """Return every recorded removal, oldest first."""
    rows = store._query("SELECT sample_id, path, reason, requested_by, deleted_json, at FROM removals ORDER BY id")
    return [Removal(r[0], r[1], r[2], r[3], json.loads(r[4]), float(r[5])) for r in rows]


def record_quarantine(store: Store, sha256: str, path: str, reason: str, moved_to: str | None) -> None:
    """Log a blocked file (once per content and path)."""
    with store._tx() as conn:
        conn.execute(
            "INSERT INTO quarantine (sha256, path, reason, moved_to, at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (sha256, path) DO UPDATE SET reason = excluded.reason, "
            "moved_to = COALESCE(excluded.moved_to, quarantine.moved_to)",
            (sha256, path, reason, moved_to, time.time()),
        )


def quarantined(store: Store) -> list[Quarantined]:
    """Return every quarantined file, oldest first."""
    rows = store._query("SELECT sha256, path, reason, moved_to, at FROM quarantine ORDER BY at, path")
    return [Quarantined(r[0], r[1], r[2], r[3], float(r[4])) for r in rows]
