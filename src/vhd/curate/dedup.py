"""Find exact and near-duplicate images and videos, report them, and mark them in a store.

Exact duplicates share their decoded pixels (found by hashing them, whatever the file format);
near duplicates have perceptual hashes (pHash) within a Hamming distance, found with a
multi-index hash table rather than by comparing every pair (`vhd.curate.hashindex`). Videos
are compared by their sampled frames. Files are clustered and one file per cluster is kept by a
policy (`vhd.curate.clusters`). Nothing is ever deleted: `apply_marks` records the clusters in
the store, where `vhd split` keeps each cluster on one side.

pHash is robust to resizing, re-encoding, brightness and contrast changes, and crops of a few
percent; it does not match larger crops, padding, flips or rotations (known misses).

The report (`DedupResult.write_report`) is one row per file as CSV, or the same rows with a
summary as JSON. CSV columns: ``path``, ``cluster`` (the kept file's sha256; a file alone in its
cluster has its own), ``cluster_size``, ``kept`` (yes/no), ``match`` (kept, exact or near),
``distance`` (pHash Hamming distance to the kept file), ``kind``, ``sha256``, ``width``,
``height``, ``bytes``, ``split``, ``error`` (unreadable files have only ``path`` and ``error``).
JSON: ``{"threshold", "keep", "counts", "clusters": [{"id", "kept", "members": [...]}],
"leaks": [...], "unreadable": [...], "files": [rows as in the CSV]}``, clusters listing only
those of two files or more.

Memory: fingerprints stream from the hashing workers into compact arrays and an on-disk scratch
table (`vhd.curate.fptable`), so a run holds well under 100 bytes per file; `DedupResult.members`
reads them back in batches, and the reports are written row by row.

Example:
    >>> result = find_duplicates(["photos/"], threshold=10, keep="largest")  # doctest: +SKIP
    >>> result.write_report("clusters.csv")  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import itertools
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from vhd.curate.clusters import DEFAULT_THRESHOLD, check_settings, link
from vhd.curate.dedup_jobs import jobs_from_paths, jobs_from_store
from vhd.curate.fingerprint import Fingerprint, Job, iter_fingerprints
from vhd.curate.fptable import FingerprintTable
from vhd.curate.jsonstream import write_object
from vhd.curate.members import ClusterView, Member
from vhd.errors import ConfigError
from vhd.execution import Executor, ExecutorOptions
from vhd.fileio import atomic_write, escape_cell, open_regular
from vhd.progress import ProgressFn, renamed_on_progress
from vhd.store.sqlite import Store

_SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class Leak:
    """A duplicate cluster whose files sit in more than one split.

    Attributes:
        cluster: The cluster id.
        splits: Split name to number of files in it.
        paths: The cluster's files.
    """

    cluster: str
    splits: dict[str, int]
    paths: list[str]


@dataclass
class DedupResult:
    """What `find_duplicates` found.

    Attributes:
        members: Every usable file with its cluster, grouped by cluster (kept file first): from
            `find_duplicates`, a `ClusterView` reading them back from a scratch file.
        unreadable: ``(path, reason)`` for files that could not be read or decoded.
        splits: File path to split, where known (from the store or a manifest).
        sample_ids: File path to sample id, for files whose sample is in the store.
        leaks: Clusters spanning two splits or more.
        rows_left_out: Of the unreadable entries, the reasons of manifest rows that could not be
            read at all (malformed, a NUL byte, JSON nested too deep...): ``vhd dedup`` exits 1.
        threshold: The distance threshold used.
        keep: The keep policy used.
        elapsed_s: Wall time.
    """

    members: Sequence[Member] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    splits: dict[str, str] = field(default_factory=dict)
    sample_ids: dict[str, str] = field(default_factory=dict)
    leaks: list[Leak] = field(default_factory=list)
    rows_left_out: list[str] = field(default_factory=list)
    threshold: int = DEFAULT_THRESHOLD
    keep: str = "largest"
    elapsed_s: float = 0.0

    def grouped(self) -> Iterator[Member]:
        """Members of clusters of two files or more, in order (singletons are skipped unread)."""
        if isinstance(self.members, ClusterView):
            return self.members.in_clusters()
        return (m for m in self.members if m.size > 1)

    @property
    def duplicates(self) -> list[Member]:
        """Members that are not kept (the files a cleaned dataset would drop)."""
        return [m for m in self.grouped() if not m.kept]

    @property
    def clusters(self) -> dict[str, list[Member]]:
        """Clusters of two files or more, by id, kept file first."""
        out: dict[str, list[Member]] = {}
        for m in self.grouped():
            out.setdefault(m.cluster, []).append(m)
        return out

    def counts(self) -> dict[str, int]:
        """Files, clusters, duplicates by match kind, unreadable files, unread manifest rows and leaks."""
        if isinstance(self.members, ClusterView):
            found = self.members.counts()
        else:
            matches = Counter(m.match for m in self.members)
            found = {
                "files": len(self.members),
                "clusters": len({m.cluster for m in self.members if m.size > 1}),
                "exact": matches.get("exact", 0),
                "near": matches.get("near", 0),
            }
        return {
            **found,
            "unreadable": len(self.unreadable),
            "rows_left_out": len(self.rows_left_out),
            "leaks": len(self.leaks),
        }

    def close(self) -> None:
        """Drop the scratch file behind `members` (they can no longer be read)."""
        if isinstance(self.members, ClusterView):
            self.members.close()

    def split_of(self, member: Member) -> str | None:
        """The split of a member's file, when known."""
        return self.splits.get(member.fp.path)

    def write_report(self, path: str | os.PathLike[str]) -> Path:
        """Write the report as CSV (one row per file) or JSON, chosen by the file's suffix."""
        return write_dedup_report(self, Path(path))


def is_store_file(path: str | os.PathLike[str]) -> bool:
    """Whether a path is an SQLite database (a vhd store), judged by its first bytes."""
    try:
        with open_regular(path) as fh:
            return fh.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


@renamed_on_progress
def find_duplicates(
    inputs: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    threshold: int = DEFAULT_THRESHOLD,
    keep: str = "largest",
    store: Store | None = None,
    jobs: int | None = None,
    frame_folders: bool = False,
    n_frames: int = 5,
    first_frames: int = 4000,
    max_pixels: int = 64_000_000,
    progress: ProgressFn | None = None,
    allow_outside_paths: bool = False,
    executor: str | Executor = "local",
    executor_options: ExecutorOptions | None = None,
) -> DedupResult:
    """Find duplicate clusters among files, folders and manifests, or among a store's samples.

    Args:
        inputs: Media files, folders and manifests; or a single vhd store file, whose samples
            (not removed) are checked.
        threshold: Largest pHash Hamming distance of a near duplicate (0-64; 10 by default:
            distinct photos sit 20 or more apart).
        keep: Which file of a cluster is kept: ``largest``, ``first`` or ``quality``.
        store: A store giving sample ids and splits for the files (and where `apply_marks`
            writes); when ``inputs`` is a store file it is opened instead.
        jobs: Worker processes for decoding and hashing (default: all CPUs).
        frame_folders: Treat folders of numbered frames as videos.
        n_frames: Frames sampled per video.
        first_frames: Window of frames sampled from.
        max_pixels: Images declaring more pixels are reported unreadable.
        progress: Called as ``progress(done, total, stage=...)`` now and then; stages
            are ``hash`` and ``link``.
        allow_outside_paths: Accept manifest rows whose paths lead outside the manifest's folder
            (rows naming a sample of ``store`` are always accepted).
        executor: Where files are hashed: ``local`` (``jobs`` processes here) or ``ray`` (Ray
            actors reading the files by path: a filesystem shared with the driver).
        executor_options: Workers, Ray address, CPUs per worker.

    Returns:
        The clusters, unreadable files, and clusters leaking across splits.

    Raises:
        ConfigError: Bad threshold or policy, or an input that does not exist.
        MissingDependencyError: imagehash (``vhd[dedup]``) or PyAV for videos is missing.
    """
    start = time.perf_counter()
    paths = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    if not paths:
        raise ConfigError("nothing to check: give files, folders, manifests or a store")
    check_settings(threshold, keep)
    settings = {"n_frames": n_frames, "first_frames": first_frames, "max_pixels": max_pixels}
    result = DedupResult(threshold=threshold, keep=keep)
    discovered = 0
    if len(paths) == 1 and is_store_file(paths[0]):
        with Store(paths[0], create=True) as db:
            job_list, result.splits, result.sample_ids = jobs_from_store(db, settings)
        jobs_in: Iterable[Job] = job_list
        discovered = len(job_list)
    else:
        from vhd.media.discover import check_inputs

        check_inputs([os.fspath(p) for p in paths])
        jobs_in = jobs_from_paths(
            [os.fspath(p) for p in paths],
            settings,
            frame_folders,
            result.unreadable,
            result.splits,
            allow_outside_paths,
            store,
            result.rows_left_out,
        )

    workers = max(1, jobs if jobs else (os.cpu_count() or 1))

    def hashed(done: int) -> None:
        if progress is not None:
            progress(done, max(done, discovered), stage="hash")  # unknown while folders are walked

    from vhd.execution import executor as find_executor

    runner = find_executor(executor, executor_options)
    table = FingerprintTable()
    try:
        for fp in iter_fingerprints(jobs_in, workers, hashed, executor=None if runner.in_process else runner):
            table.add(fp)
        total = len(table) + len(table.errors)
        result.unreadable.extend((path, error) for _, path, error in sorted(table.errors))

        def linked(done: int) -> None:
            if progress is not None:
                progress(done, total, stage="link")

        result.members = link(table, threshold=threshold, keep=keep, on_done=linked)
    except BaseException:
        table.close()
        raise
    if store is not None:
        _attach_store(result, store, table.scan())
    result.leaks = find_leaks(result)
    result.elapsed_s = time.perf_counter() - start
    return result


def _attach_store(result: DedupResult, store: Store, fps: Iterable[Fingerprint]) -> None:
    """Record which files are samples of the store, and their splits."""
    for fp in fps:
        if not fp.sha256 or fp.path in result.sample_ids:
            continue
        sample = store.get_sample(fp.sha256)
        if sample is not None:
            result.sample_ids[fp.path] = sample.id
            if sample.split:
                result.splits[fp.path] = sample.split


def find_leaks(result: DedupResult) -> list[Leak]:
    """Return the clusters whose files sit in more than one split (train/test leakage)."""
    leaks: list[Leak] = []
    for cluster_id, members in result.clusters.items():
        splits = Counter(s for s in (result.split_of(m) for m in members) if s)
        if len(splits) > 1:
            leaks.append(Leak(cluster_id, dict(sorted(splits.items())), [m.fp.path for m in members]))
    return leaks


def apply_marks(result: DedupResult, store: Store) -> tuple[int, int]:
    """Mark the clusters in the store (one transaction); nothing is deleted.

    Only files that are samples of the store can be marked; the others are counted.

    Args:
        result: A `find_duplicates` result computed with this store (or on it).
        store: The store.

    Returns:
        ``(samples marked, files not in the store)``.
    """
    from vhd.store.curation import DuplicateMark, mark_duplicates

    _attach_store(result, store, (m.fp for m in result.members))
    ids = result.sample_ids
    by_cluster: dict[str, dict[str, DuplicateMark]] = {}
    missing = 0
    for m in result.members:
        sid = ids.get(m.fp.path)
        if sid is None:
            missing += 1
            continue
        if m.size < 2:
            continue
        group = by_cluster.setdefault(m.cluster, {})
        old = group.get(sid)
        if old is None or (m.kept and not old.kept):  # two paths of one sample: the kept one wins
            group[sid] = DuplicateMark(sid, m.cluster, m.kept, m.match, m.distance)
    marks = [mark for group in by_cluster.values() if len(group) > 1 for mark in group.values()]
    mark_duplicates(store, marks, ids.values(), threshold=result.threshold, policy=result.keep)
    return len(marks), missing


def describe(result: DedupResult) -> list[str]:
    """Summary lines for a terminal."""
    c = result.counts()
    lines = [
        f"checked {c['files']} file(s) in {result.elapsed_s:.1f} s: {c['clusters']} duplicate cluster(s), "
        f"{c['exact']} exact and {c['near']} near duplicate(s) (threshold {result.threshold}, keep {result.keep})",
    ]
    if c["unreadable"]:
        lines.append(f"{c['unreadable']} file(s) could not be read:")
        lines += [f"  {path}: {reason}" for path, reason in result.unreadable[:10]]
        if c["unreadable"] > 10:
            lines.append(f"  ... {c['unreadable'] - 10} more in the report")
    if c["rows_left_out"]:
        lines.append(f"{c['rows_left_out']} manifest row(s) could not be read and were left out (listed above)")
    for leak in result.leaks[:10]:
        spread = ", ".join(f"{k} {v}" for k, v in leak.splits.items())
        lines.append(f"LEAK: cluster {leak.cluster[:12]} spans splits ({spread}): {'; '.join(leak.paths[:3])}")
    if len(result.leaks) > 10:
        lines.append(f"... {len(result.leaks) - 10} more leaking cluster(s) in the report")
    return lines


REPORT_COLUMNS = (
    "path",
    "cluster",
    "cluster_size",
    "kept",
    "match",
    "distance",
    "kind",
    "sha256",
    "width",
    "height",
    "bytes",
    "split",
    "error",
)
"""Columns of the CSV report, in order."""


def report_rows(result: DedupResult) -> list[dict[str, Any]]:
    """Return one row per file (clusters together, kept file first), then unreadable files."""
    return list(iter_report_rows(result))


def iter_report_rows(result: DedupResult) -> Iterator[dict[str, Any]]:
    """Yield the rows of `report_rows` one at a time."""
    for m in result.members:
        yield (
            {
                "path": m.fp.path,
                "cluster": m.cluster,
                "cluster_size": m.size,
                "kept": "yes" if m.kept else "no",
                "match": m.match,
                "distance": m.distance,
                "kind": m.fp.kind,
                "sha256": m.fp.sha256,
                "width": m.fp.width,
                "height": m.fp.height,
                "bytes": m.fp.size,
                "split": result.split_of(m) or "",
                "error": "",
            }
        )
    for path, reason in result.unreadable:
        yield {**dict.fromkeys(REPORT_COLUMNS, ""), "path": path, "error": reason}


def _csv(result: DedupResult) -> Any:
    def write(fh: IO[str]) -> None:
        writer = csv.DictWriter(fh, fieldnames=REPORT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: escape_cell(v) for k, v in row.items()} for row in iter_report_rows(result))

    return write


def _clusters(result: DedupResult) -> Iterator[dict[str, Any]]:
    """The report's clusters one at a time (the members of one cluster come together)."""
    current: list[Member] = []
    for m in itertools.chain(result.grouped(), [None]):
        if current and (m is None or m.cluster != current[0].cluster or m.kept):
            yield {
                "id": current[0].cluster,
                "kept": current[0].fp.path,
                "members": [{"path": c.fp.path, "match": c.match, "distance": c.distance} for c in current],
            }
            current = []
        if m is not None:
            current.append(m)


def _json(result: DedupResult) -> Any:
    def write(fh: IO[str]) -> None:
        write_object(
            fh,
            [
                ("threshold", result.threshold),
                ("keep", result.keep),
                ("counts", result.counts()),
                ("clusters", _clusters(result)),
                ("leaks", [{"cluster": x.cluster, "splits": x.splits, "paths": x.paths} for x in result.leaks]),
                ("unreadable", [{"path": p, "reason": r} for p, r in result.unreadable]),
                ("files", iter_report_rows(result)),
            ],
        )

    return write


def write_dedup_report(result: DedupResult, path: Path) -> Path:
    """Write the report atomically as CSV (``.csv``) or JSON (``.json``).

    Raises:
        ConfigError: Any other suffix.
    """
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return atomic_write(path, _csv(result))
    if suffix == ".json":
        return atomic_write(path, _json(result))
    raise ConfigError(f"unknown report format {path.suffix or '(no suffix)'!r}: name the report .csv or .json")
