"""The labelled samples S* is trained and validated on: where they come from, balance, validation split.

Sources (`load_items`): a labels CSV or a VHD11K release file (`vhd.bench.data.load_bench_set`),
the name of a labelled set in ``--store``, or the store's own verdicts (``--from-annotations``:
each sample's latest annotation, refusals as the annotator's rule decided them, unparsed and
failed ones left out; `vhd.bench.store_source`). ``split`` keeps the samples of one split.

Balance (`balance`): strata are harmful/unharmful x real/synthetic, over the strata present (a
set without sources has two). ``undersample`` keeps the smallest stratum's count of each, chosen
with a seed; ``weight`` keeps all and weighs each sample by 1 / its stratum's share; ``none``
keeps all. A small or source-less set is never refused.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from vhd.errors import ConfigError
from vhd.records import LabelledSample

Balance = Literal["undersample", "weight", "none"]


def load_items(
    source: str | os.PathLike[str] | None,
    *,
    store: str | os.PathLike[str] | None = None,
    from_annotations: bool = False,
    split: str | None = None,
    media: str | os.PathLike[str] | None = None,
    on_problem: Callable[[str], None] | None = None,
) -> list[LabelledSample]:
    """The labelled samples of a labels file, a labelled set or the store's annotations.

    Args:
        source: A labels CSV / VHD11K file, or a labelled set's name in ``store`` (None with
            ``from_annotations``).
        store: The vhd store (needed for a set name and ``from_annotations``).
        from_annotations: Use the store's verdicts as labels.
        split: Keep only samples of this split.
        media: Folder relative paths of a labels file are under.
        on_problem: Called with one line per row left out.

    Raises:
        ConfigError: Nothing usable, an unknown set, or a missing store.
    """
    from vhd.bench.data import load_bench_set
    from vhd.bench.store_source import load_bench_set_from_store

    report = on_problem or (lambda _m: None)
    if from_annotations:
        if store is None:
            raise ConfigError("--from-annotations reads a store's verdicts: pass --store FILE")
        bench = load_bench_set_from_store(store)
        items = list(bench.items)
        for p in bench.problems:
            report(f"{store}: {p}")
    elif source is None:
        raise ConfigError("give the training data: --train LABELS_OR_SET, or --from-annotations --store FILE")
    elif Path(source).is_file():
        bench = load_bench_set(source, media=media, store=store)
        items = list(bench.items)
        for p in bench.problems:
            report(f"{source} {p}")
    else:
        items = _labelled_set(str(source), store)
    if split is not None:
        items = [i for i in items if i.split == split]
        if not items:
            raise ConfigError(
                f"no sample of split {split!r} in {source or store}: check --split (vhd split writes them)"
            )
    return items


def _labelled_set(name: str, store: str | os.PathLike[str] | None) -> list[LabelledSample]:
    from vhd.store.sqlite import open_store

    if Path(name).suffix or os.sep in name:
        raise ConfigError(f"{name} not found: give a labels CSV or a labelled set name (with --store)")
    if store is None:
        raise ConfigError(f"{name!r} is not a file; a labelled set name needs --store FILE")
    with open_store(store) as db:
        items = db.labelled_set(name)
        for item in items:
            sample = db.get_sample(item.id)
            if sample is not None:
                item.source, item.split = sample.source, sample.split
    return items


def stratum(item: LabelledSample) -> tuple[bool, str]:
    """The balance stratum of a sample: (harmful, source or "")."""
    return (item.harmful, item.source.value if item.source is not None else "")


def balance(items: Sequence[LabelledSample], mode: Balance, seed: int) -> tuple[list[LabelledSample], list[float]]:
    """Balance a training set over its strata.

    Returns:
        The samples kept (in their original order) and one weight per sample (mean 1).
    """
    groups: dict[tuple[bool, str], list[int]] = defaultdict(list)
    for k, item in enumerate(items):
        groups[stratum(item)].append(k)
    if mode == "undersample" and len(groups) > 1:
        smallest = min(len(v) for v in groups.values())
        rng = random.Random(seed)
        keep = sorted(k for v in groups.values() for k in rng.sample(v, smallest))
        return [items[k] for k in keep], [1.0] * len(keep)
    if mode == "weight" and groups:
        share = {key: len(v) / len(items) for key, v in groups.items()}
        raw = [1.0 / (len(groups) * share[stratum(i)]) for i in items]
        return list(items), raw
    return list(items), [1.0] * len(items)


def split_validation(
    items: Sequence[LabelledSample], fraction: float, seed: int
) -> tuple[list[LabelledSample], list[LabelledSample]]:
    """A seeded validation split, stratified like `balance` (each stratum gives ``fraction`` of itself).

    Returns:
        (training samples, validation samples), each in the original order.

    Raises:
        ConfigError: ``fraction`` outside (0, 1).
    """
    if not 0 < fraction < 1:
        raise ConfigError(f"--val-fraction must be between 0 and 1, got {fraction}")
    groups: dict[tuple[bool, str], list[int]] = defaultdict(list)
    for k, item in enumerate(items):
        groups[stratum(item)].append(k)
    rng = random.Random(seed)
    val: set[int] = set()
    for key in sorted(groups):
        members = groups[key]
        take = min(len(members) - 1, max(1, round(fraction * len(members)))) if len(members) > 1 else 0
        val.update(rng.sample(members, take))
    return [i for k, i in enumerate(items) if k not in val], [i for k, i in enumerate(items) if k in val]


def data_hash(items: Sequence[LabelledSample]) -> str:
    """A sha256 over the samples' ids and labels (order-free): which data a checkpoint saw."""
    lines = sorted(f"{i.id}:{int(i.harmful)}" for i in items)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def modality(items: Sequence[LabelledSample]) -> str:
    """``video`` when every sample is a video, ``image`` when none is.

    Raises:
        ConfigError: Images and videos mixed (train one checkpoint per modality, as the paper does).
    """
    kinds = {i.kind.value for i in items}
    if len(kinds) > 1:
        raise ConfigError("the training data mixes images and videos: train one checkpoint per modality (--kind)")
    return kinds.pop() if kinds else "image"
