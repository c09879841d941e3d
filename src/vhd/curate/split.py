"""Split a store's samples into train and test, balanced and free of duplicate leakage.

Following the paper's splits (section 4.3), every stratum harmful/unharmful x real/synthetic
gets the same test fraction. Each duplicate cluster recorded by `vhd dedup --apply` is one unit
that goes wholly to one side, so no near duplicate of a test sample is trained on.

Labels come, for each sample, from the first of: a labels CSV (by id, then by path; read by
`vhd.labels.files.read_labels` with `vhd.labels.rules.LabelOptions`, its rows left out
listed in `SplitResult.label_problems`), the sample's latest annotation that has a decision, the
label its manifest gave. Samples with none form their own ``unlabelled`` stratum; samples without
a source form an ``unknown`` one. The ``--out`` CSV (``id,path,split,harmful``) reads back as a
labels file (``vhd label``) and as a manifest.

The assignment is deterministic for a seed and a store's content: units are ordered by a
seeded shuffle of their sorted ids, larger units first, and each goes to the test side when that
brings the stratum's test count closer to its target.

Example:
    >>> with Store("run.db") as store:  # doctest: +SKIP
    ...     result = split_store(store, test=0.2, seed=13)
"""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from vhd.errors import ConfigError
from vhd.labels.rules import LabelOptions
from vhd.store.sqlite import Store, StoreLike, using_store

TRAIN = "train"
TEST = "test"


@dataclass
class SplitResult:
    """What `split_store` decided.

    Attributes:
        assignments: Sample id to ``train`` or ``test``.
        strata: Stratum name to ``{"train": n, "test": n}``.
        units: Number of units (duplicate clusters count once).
        labels_from: How many labels came from each source (``labels-csv``, ``annotation``,
            ``manifest``, ``none``).
        written: Whether the store was updated.
        harmful: Sample id to the label the split used (None: unlabelled).
        label_problems: ``row N: why`` for every labels file row left out or merged.
        rows_left_out: How many labels file rows were left out (not counting merged repeats).
    """

    assignments: dict[str, str] = field(default_factory=dict)
    strata: dict[str, dict[str, int]] = field(default_factory=dict)
    units: int = 0
    labels_from: dict[str, int] = field(default_factory=dict)
    written: bool = False
    harmful: dict[str, bool | None] = field(default_factory=dict)
    label_problems: list[str] = field(default_factory=list)
    rows_left_out: int = 0

    def table(self) -> list[str]:
        """A small text table of the strata."""
        lines = [f"{'stratum':28s} {'train':>7s} {'test':>7s} {'test %':>7s}"]
        for name, c in sorted(self.strata.items()):
            total = c[TRAIN] + c[TEST]
            share = 100.0 * c[TEST] / total if total else 0.0
            lines.append(f"{name:28s} {c[TRAIN]:7d} {c[TEST]:7d} {share:6.1f}%")
        return lines


def _labels_csv(
    path: str | os.PathLike[str], store: Store, options: LabelOptions | None, result: SplitResult
) -> tuple[dict[str, bool], dict[str, bool]]:
    from vhd.labels.files import read_labels

    labels = read_labels(path, options=options, store=store)
    result.rows_left_out = len(labels.errors)
    result.label_problems = [str(e) for e in sorted([*labels.errors, *labels.notes], key=lambda e: e.line)]
    by_id = {row.id.lower(): row.harmful for row in labels.rows if row.id}
    by_path = {os.path.realpath(row.path): row.harmful for row in labels.rows if row.path is not None}
    return by_id, by_path


def _stratum(harmful: bool | None, source: str | None) -> str:
    label = "unlabelled" if harmful is None else ("harmful" if harmful else "unharmful")
    return f"{label}/{source or 'unknown'}"


def _units(store: Store, ids: list[str]) -> dict[str, list[str]]:
    """Group sample ids into units: duplicate clusters, and every other sample alone."""
    from vhd.store.curation import duplicate_marks

    present = set(ids)
    unit_of: dict[str, str] = {}
    for mark in duplicate_marks(store):
        if mark.sample_id in present:
            unit_of[mark.sample_id] = "cluster:" + mark.cluster
    units: dict[str, list[str]] = {}
    for sid in ids:
        units.setdefault(unit_of.get(sid, sid), []).append(sid)
    return units


def split_store(
    store: StoreLike,
    *,
    test: float = 0.2,
    seed: int = 0,
    labels: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    label_options: LabelOptions | None = None,
) -> SplitResult:
    """Assign every sample (not removed) of a store to ``train`` or ``test``.

    Args:
        store: The store (an open `Store` or its path); each sample's ``split`` is overwritten in one
            transaction.
        test: Fraction of each stratum that goes to test (between 0 and 1).
        seed: Seed of the assignment.
        labels: A labels CSV (or VHD11K annotation file) taking precedence over annotations.
        dry_run: Compute and return the assignment without writing it.
        label_options: How the labels file's rows are read (``--media``, ``--path-prefix``,
            ``--allow-outside-paths``, ``--duplicates``); rows naming the store's samples may
            lead anywhere.

    Returns:
        The assignment and per-stratum counts.

    Raises:
        ConfigError: A test fraction outside (0, 1), an unreadable labels file, or a store
            without samples.
    """
    if not isinstance(store, Store):
        with using_store(store) as db:
            return split_store(db, test=test, seed=seed, labels=labels, dry_run=dry_run, label_options=label_options)
    from vhd.store.curation import active_samples, latest_decisions, set_splits

    if not 0.0 < test < 1.0:
        raise ConfigError(f"the test fraction must be between 0 and 1 (exclusive), got {test}")
    samples = active_samples(store)
    if not samples:
        raise ConfigError(f"store {store.path} holds no samples: add some with `vhd ingest PATH --store ...`")
    result = SplitResult()
    by_id, by_path = _labels_csv(labels, store, label_options, result) if labels is not None else ({}, {})
    decisions = latest_decisions(store)
    origin: Counter[str] = Counter()
    stratum_of: dict[str, str] = {}
    for row in samples:
        sid = str(row["id"])
        real = os.path.realpath(str(row["path"]))
        harmful: bool | None
        if sid in by_id or real in by_path:
            harmful, how = by_id.get(sid, by_path.get(real)), "labels-csv"
        elif sid in decisions:
            harmful, how = decisions[sid], "annotation"
        elif row["label"] is not None:
            harmful, how = bool(row["label"]), "manifest"
        else:
            harmful, how = None, "none"
        origin[how] += 1
        result.harmful[sid] = harmful
        stratum_of[sid] = _stratum(harmful, row["source"])
    result.labels_from = dict(origin)

    units = _units(store, [str(r["id"]) for r in samples])
    result.units = len(units)
    rng = random.Random(seed)
    keys = sorted(units)
    rng.shuffle(keys)
    rank = {k: i for i, k in enumerate(keys)}
    by_stratum: dict[str, list[str]] = {}
    for key, members in units.items():
        votes = Counter(stratum_of[m] for m in members)
        by_stratum.setdefault(max(sorted(votes), key=lambda s: votes[s]), []).append(key)
    for name, keys_in in sorted(by_stratum.items()):
        size = sum(len(units[k]) for k in keys_in)
        target = round(test * size)
        in_test = 0
        for key in sorted(keys_in, key=lambda k: (-len(units[k]), rank[k])):
            n = len(units[key])
            side = TEST if abs(in_test + n - target) < abs(in_test - target) else TRAIN
            in_test += n if side == TEST else 0
            for sid in units[key]:
                result.assignments[sid] = side
        counts = result.strata.setdefault(name, {TRAIN: 0, TEST: 0})
        counts[TEST] += in_test
        counts[TRAIN] += size - in_test
    if not dry_run:
        set_splits(store, result.assignments)
        result.written = True
    return result


def write_split_csv(store: Store, result: SplitResult, path: str | os.PathLike[str]) -> Path:
    """Write ``id,path,split,harmful`` for every assigned sample, atomically.

    ``harmful`` is the label the split used (``yes``/``no``; empty when unlabelled), so the file
    reads back with ``vhd label`` as a labelled set.
    """
    import csv

    from vhd.fileio import atomic_write, escape_cell
    from vhd.store.curation import active_samples

    rows = [(str(r["id"]), str(r["path"])) for r in active_samples(store)]

    def write(fh: IO[str]) -> None:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["id", "path", "split", "harmful"])
        for sid, p in rows:
            if sid in result.assignments:
                label = result.harmful.get(sid)
                harmful = "" if label is None else ("yes" if label else "no")
                writer.writerow([escape_cell(c) for c in (sid, p, result.assignments[sid], harmful)])

    return atomic_write(path, write)
