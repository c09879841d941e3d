"""``vhd tune`` as one library call: read the data, hold out validation, balance, train.

Example:
    >>> from vhd.tune.api import tune                                  # doctest: +SKIP
    >>> from vhd.tune.train import TuneConfig                          # doctest: +SKIP
    >>> run = tune(TuneConfig(model="Salesforce/instructblip-vicuna-7b"), "ckpt/", train="labels.csv")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from vhd.errors import ConfigError
from vhd.progress import ProgressFn, no_progress, renamed_on_progress
from vhd.tune.data import Balance, balance, load_items, split_validation
from vhd.tune.train import TuneConfig, TuneResult, train


@dataclass
class TuneRun:
    """A finished ``tune`` call.

    Attributes:
        result: What training did.
        train_n: Training samples after balancing.
        val_n: Validation samples.
    """

    result: TuneResult
    train_n: int
    val_n: int


@renamed_on_progress
def tune(
    config: TuneConfig,
    out: str | os.PathLike[str],
    *,
    train_source: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    from_annotations: bool = False,
    split: str | None = None,
    kind: str | None = None,
    media: str | os.PathLike[str] | None = None,
    val_source: str | os.PathLike[str] | None = None,
    val_fraction: float | None = None,
    balance_mode: Balance = "undersample",
    on_problem: Callable[[str], None] | None = None,
    progress: ProgressFn = no_progress,
) -> TuneRun:
    """Train S* on a labels file, a labelled set or a store's annotations, and write ``out``.

    Args:
        config: Training settings (`TuneConfig`).
        out: Checkpoint folder (resumed when it holds the same run).
        train_source: Labels CSV, VHD11K release file, or labelled set name (with ``store``).
        store: The vhd store.
        from_annotations: Train on the store's verdicts.
        split: Keep one split.
        kind: Keep ``image`` or ``video`` samples only.
        media: Folder relative paths of a labels file are under.
        val_source: Validation data (model selection, early stopping).
        val_fraction: Hold out this seeded, stratified share of the training data instead.
        balance_mode: ``undersample``, ``weight`` or ``none``.
        on_problem: Called with one line per row left out.
        progress: Progress callback.

    Raises:
        ConfigError: Bad data or settings (one line with the fix).
    """
    if val_source is not None and val_fraction is not None:
        raise ConfigError("give --val or --val-fraction, not both")
    items = load_items(
        train_source, store=store, from_annotations=from_annotations, split=split, media=media, on_problem=on_problem
    )
    if kind is not None:
        items = [i for i in items if i.kind.value == kind]
    val = load_items(val_source, store=store, media=media, on_problem=on_problem) if val_source is not None else []
    if kind is not None:
        val = [i for i in val if i.kind.value == kind]
    if val_fraction is not None:
        items, val = split_validation(items, val_fraction, config.seed)
    kept, weights = balance(items, balance_mode, config.seed)
    config.data_rules = {"balance": balance_mode, "val_fraction": val_fraction, "split": split, "kind": kind}
    result = train(config, kept, out, weights=weights, val=val, progress=progress)
    return TuneRun(result, len(kept), len(val))
