"""Named subsets of a benchmark (``vhd bench --subset NAME=labels.csv``): their false-positive rate on their own.

A policy allows some edgy content on purpose: medical and educational imagery, news, art. A
detector that flags it is wrong for that policy, and the complaint most often heard about
guardrails is exactly this. A subset is a labels file of such samples (the "benign but edgy"
set); ``vhd bench`` judges its samples with the same detectors (and the same prediction cache)
and reports, per subset and detector, the share of its unharmful samples flagged harmful, with
a bootstrap interval. A sample the detector failed on counts as flagged (wrong), as in every
number of `vhd.bench.metrics`.

A subset's samples count in the main numbers only when the main labels hold them too (same
content); relative paths in a subset file are relative to its own folder, and may lead where
the main labels' rules allow (``--allow-outside-paths``, ``--path-prefix``). Its harmful rows (a
subset of allowed content should have none) are left out of its rate and counted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.bench.metrics import BOOTSTRAP, Value, counted_wrong, mean_value
from vhd.errors import ConfigError

if TYPE_CHECKING:
    from vhd.bench.data import BenchItem, BenchSet
    from vhd.bench.runner import BenchRun
    from vhd.labels.rules import LabelOptions
    from vhd.taxonomy.taxonomy import Taxonomy

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass
class Subset:
    """A named subset: its labelled samples.

    Attributes:
        name: Its name in reports.
        bench: Its labelled samples and the rows left out (`vhd.bench.data.BenchSet`).
    """

    name: str
    bench: BenchSet


def parse_subset(spec: str) -> tuple[str, Path]:
    """``NAME=FILE`` to ``(name, path)``.

    Raises:
        ConfigError: No ``=``, an empty file, or a name that is not letters, digits, ``_.-``.
    """
    name, eq, path = spec.partition("=")
    name = name.strip()
    if not eq or not path.strip() or not _NAME.fullmatch(name):
        raise ConfigError(
            f"--subset {spec!r} must be NAME=FILE, NAME of letters, digits, '_', '.', '-' (e.g. medical=medical.csv)"
        )
    return name, Path(path.strip())


def load_subsets(
    specs: Sequence[str],
    *,
    taxonomy: Taxonomy | None = None,
    options: LabelOptions | None = None,
    store: str | os.PathLike[str] | None = None,
) -> list[Subset]:
    """Read each ``NAME=FILE`` subset (labels CSV or VHD11K file), its paths relative to its own folder.

    Args:
        specs: ``NAME=FILE`` strings, distinct names.
        taxonomy: The taxonomy of the files' categories.
        options: The main labels' options (path remaps, outside paths, duplicates); ``media`` is
            not applied (each file's own folder is).
        store: A vhd store the rows may name.

    Raises:
        ConfigError: A bad spec, a name given twice, or a file without a usable row.
    """
    from vhd.bench.data import load_bench_set
    from vhd.labels.rules import LabelOptions

    opts = replace(options or LabelOptions(), media=None)
    out: list[Subset] = []
    for spec in specs:
        name, path = parse_subset(spec)
        if any(s.name == name for s in out):
            raise ConfigError(f"--subset {name!r} given twice: give each subset its own name")
        try:
            bench = load_bench_set(path, taxonomy=taxonomy, options=opts, store=store)
        except ConfigError as exc:
            raise ConfigError(f"--subset {name}: {exc}") from None
        out.append(Subset(name, bench))
    return out


def with_subsets(bench: BenchSet, subsets: Sequence[Subset]) -> BenchSet:
    """The set a run judges: the main items, then each subset item the main set lacks (by content id)."""
    seen = {i.id for i in bench.items}
    extra: list[BenchItem] = []
    for subset in subsets:
        for item in subset.bench.items:
            if item.id not in seen:
                seen.add(item.id)
                extra.append(item)
    return replace(bench, items=[*bench.items, *extra], problems=list(bench.problems))


@dataclass
class SubsetResult:
    """One subset's false-positive rate per detector.

    Attributes:
        name: The subset's name.
        labels: Its labels file.
        samples: Its usable samples.
        unharmful: Of them, the unharmful ones (the rate's denominator).
        harmful: Harmful samples left out of the rate.
        problems: Its rows left out or kept with a caveat, as ``row N: ...`` lines.
        fpr: Detector label -> share of the unharmful samples flagged harmful (a failure counts
            as flagged), with its interval and ``n``.
        failed: Detector label -> unharmful samples it gave no decision for.
    """

    name: str
    labels: str
    samples: int
    unharmful: int
    harmful: int
    problems: list[str] = field(default_factory=list)
    fpr: dict[str, Value] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "name": self.name,
            "labels": self.labels,
            "samples": self.samples,
            "unharmful": self.unharmful,
            "harmful_left_out": self.harmful,
            "problems": self.problems,
            "detectors": {
                label: {"fpr": v.to_dict(), "failed": self.failed.get(label, 0)} for label, v in self.fpr.items()
            },
        }


def evaluate_subsets(
    bench_run: BenchRun, subsets: Sequence[Subset], *, resamples: int = BOOTSTRAP, seed: int = 0
) -> list[SubsetResult]:
    """Each subset's false-positive rate per detector, from the run's predictions.

    Args:
        bench_run: A run whose predictions cover the subsets' samples (`with_subsets`).
        subsets: The subsets.
        resamples: Bootstrap resamples per interval.
        seed: Bootstrap seed.
    """
    results: list[SubsetResult] = []
    for subset in subsets:
        items = subset.bench.items
        negatives = [i for i in items if not i.harmful]
        result = SubsetResult(
            subset.name,
            str(subset.bench.source),
            len(items),
            len(negatives),
            len(items) - len(negatives),
            [str(p) for p in subset.bench.problems],
        )
        for run in bench_run.detectors:
            decisions: list[bool | None] = []
            for item in negatives:
                p = run.predictions.get(item.id)
                decisions.append(None if p is None or p.harmful is None else bool(p.harmful))
            flagged = counted_wrong([False] * len(negatives), decisions)
            result.fpr[run.label] = mean_value([float(f) for f in flagged], resamples, seed)
            result.failed[run.label] = sum(1 for d in decisions if d is None)
        results.append(result)
    return results
