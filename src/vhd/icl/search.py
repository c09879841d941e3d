"""The in-context example search of the paper (§3.2.2, appendix C), made repeatable.

Round 0 annotates the human-labelled validation samples with no examples. Each later round takes
the best example set so far, adds ``per_round`` of its misclassified samples as new examples
(alternating false negatives and false positives, most confident mistakes first), annotates
again, and keeps the new set when the metric improves. Unlike the paper, a set is scored only on
the validation samples that are not among its examples, and the candidate is compared with the
best set on exactly those samples; a ``holdout`` share is never looked at until the end.

Every annotation goes through `vhd.annotate` into a store, so an interrupted search resumes
without repeating model calls: the search's choices are deterministic given the seed and the
stored answers, so running it again walks the same path. The ranking metrics are registered by
name in `vhd.icl.metrics.ICL_METRICS`.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Unpack, cast

from vhd.annotate.options import RunOptions, split_legacy
from vhd.bench.metrics import fmt
from vhd.config import AnnotateConfig, ModelOverrides, apply_overrides
from vhd.errors import ConfigError
from vhd.icl.files import expected_answer, resolve_validation, write_examples, write_json, write_report
from vhd.icl.metrics import ICL_METRICS
from vhd.icl.result import Round, SearchResult, score
from vhd.labels.rules import LabelOptions
from vhd.labels.sets import LabelledItem
from vhd.progress import ProgressFn, staged
from vhd.records import Verdict
from vhd.store.sqlite import StoreLike
from vhd.store.sqlite import store_path as file_of_store


class _Stop(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def split_holdout(
    items: Sequence[LabelledItem], share: float, seed: int
) -> tuple[list[LabelledItem], list[LabelledItem]]:
    """Split off a held-out share, stratified by label, deterministically for a seed.

    Returns:
        ``(search, holdout)``, each ordered by sample id.
    """
    if not 0 <= share < 1:
        raise ConfigError(f"--holdout {share} must be at least 0 and below 1, e.g. 0.2")
    rng = random.Random(seed)
    search: list[LabelledItem] = []
    held: list[LabelledItem] = []
    for label in (True, False):
        group = sorted((i for i in items if i.harmful is label), key=lambda i: i.id)
        rng.shuffle(group)
        k = round(share * len(group))
        held += group[:k]
        search += group[k:]
    return sorted(search, key=lambda i: i.id), sorted(held, key=lambda i: i.id)


def pick_mistakes(
    items: Sequence[LabelledItem], preds: dict[str, Verdict], exclude: set[str], k: int, seed: int, round_no: int
) -> list[LabelledItem]:
    """Choose up to ``k`` misclassified samples: false negatives and false positives in turn.

    Most confident mistakes come first: for a missed harmful sample the lowest score, for a
    false alarm the highest; without scores (or on ties) a seeded shuffle decides.
    """
    rng = random.Random(f"{seed}:{round_no}")
    order = {i.id: rng.random() for i in sorted(items, key=lambda i: i.id)}

    def confidence(item: LabelledItem) -> float:
        v = preds.get(item.id)
        s = v.score if v is not None and v.score is not None else 0.5
        return 1 - s if item.harmful else s

    fn: list[LabelledItem] = []
    fp: list[LabelledItem] = []
    for item in items:
        if item.id in exclude:
            continue
        said = preds[item.id].harmful if item.id in preds else None
        if said is None or said != item.harmful:
            (fn if item.harmful else fp).append(item)
    fn.sort(key=lambda i: (-confidence(i), order[i.id]))
    fp.sort(key=lambda i: (-confidence(i), order[i.id]))
    picked: list[LabelledItem] = []
    queues = [fn, fp]
    turn = 0
    while len(picked) < k and (fn or fp):
        queue = queues[turn % 2] or queues[(turn + 1) % 2]
        picked.append(queue.pop(0))
        turn += 1
    return picked


class _Annotator:
    """Runs `vhd.annotate` for one example set, within the budget; returns verdicts by id."""

    def __init__(
        self,
        config: AnnotateConfig,
        store: Path,
        max_calls: int | None,
        max_cost: float | None,
        progress: bool | ProgressFn,
        on_event: Callable[[str], None],
    ) -> None:
        self.config, self.store = config, store
        self.max_calls, self.max_cost = max_calls, max_cost
        self.progress, self.on_event = progress, on_event
        self.calls, self.cost = 0, 0.0
        self.runs = 0

    def __call__(self, items: Sequence[LabelledItem], icl: Path | None) -> tuple[str, dict[str, Verdict]]:
        from vhd.annotate.api import annotate
        from vhd.annotate.options import RunOptions
        from vhd.store.sqlite import Store

        paths = [str(i.path) for i in items]
        kwargs: dict[str, Any] = {"store": self.store, "config": self.config, "icl": icl}
        if self.max_calls is not None:
            planned = annotate(paths, options=RunOptions(dry_run=True), **kwargs).estimate or {}
            need = int(planned.get("calls", 0))
            if need and self.calls + need > self.max_calls:
                raise _Stop("budget", f"budget: the next round needs {need} calls, {self.max_calls - self.calls} left")
        left = None if self.max_cost is None else max(self.max_cost - self.cost, 0.0)
        if left is not None and left <= 0:
            raise _Stop("budget", f"budget: ${self.cost:.4f} of ${self.max_cost:.4f} spent")
        self.runs += 1
        progress = staged(self.progress, f"run {self.runs}")
        summary = annotate(
            paths, options=RunOptions(max_cost=left), progress=progress, on_event=self.on_event, **kwargs
        )
        self.calls += summary.usage.calls
        self.cost += summary.usage.cost
        if summary.store_error:
            raise _Stop("errors", summary.store_error)
        if summary.budget_reached or summary.remaining or summary.interrupted or summary.leased_unfinished:
            raise _Stop("budget", f"stopped after ${self.cost:.4f} and {self.calls} calls; run again to resume")
        if summary.errors:
            raise _Stop("errors", f"{summary.errors} sample(s) failed (see the store); run again to retry them")
        with Store(self.store, create=True) as db:
            found = db.annotations_for([item.id for item in items], summary.config_hash)
        return summary.config_hash, {sid: ann.verdict for sid, ann in found.items()}


def search_icl(
    validation: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str],
    config: AnnotateConfig | str | os.PathLike[str] | None = None,
    store: StoreLike | None = None,
    options: RunOptions | None = None,
    progress: bool | ProgressFn = False,
    on_event: Callable[[str], None] | None = None,
    max_rounds: int = 5,
    per_round: int = 3,
    metric: str = "f1",
    patience: int | None = 2,
    holdout: float = 0.2,
    seed: int = 0,
    max_calls: int | None = None,
    label_options: LabelOptions | None = None,
    **overrides: Unpack[ModelOverrides],
) -> SearchResult:
    """Search for the judge's in-context examples on a human-labelled validation set.

    Args:
        validation: A labels file (CSV, or a VHD11K file) or the name of a labelled set in the store.
        out: Folder for rounds, the best example set (``best/examples.csv``) and the report.
        config: An `AnnotateConfig` or a config file (its own ``icl`` is ignored).
        store: The store annotations go to (default ``<out>/icl.db``).
        options: How the annotations run (`vhd.annotate.options.RunOptions`): ``max_cost`` stops
            the search cleanly once that many dollars are spent (every role's model needs a
            ``[prices]`` entry, else nothing runs).
        max_rounds: Rounds after round 0.
        per_round: Examples added a round (2 to 4).
        metric: ``f1``, ``balanced_accuracy``, ``tpr``, ``tnr`` or a plugin's (`ICL_METRICS`).
        patience: Stop after this many rounds without improvement (None: never).
        holdout: Share of the samples (per label) kept for the final estimate only.
        seed: Seed of the holdout split and of tie-breaking.
        max_calls: Stop cleanly before a round that would exceed this many model calls.
        progress: True shows annotation progress bars on stderr (on a terminal); a
            `vhd.progress.ProgressFn` is called instead, each annotation run under its own stage.
        on_event: Called with one-line progress messages (and the labels file's rows left out).
        label_options: How a labels file's rows are read (``--media``, ``--path-prefix``,
            ``--allow-outside-paths``, ``--duplicates``).
        **overrides: Model settings over the configuration (`vhd.config.ModelOverrides`:
            ``model``, ``judge``, ``debaters``, ``concurrency``, ...); not ``icl``, which the search chooses.

    Returns:
        Every round, the best set and the holdout estimate; also written under ``out``.

    Raises:
        ConfigError: An ``icl`` override (the search chooses the examples), a bad metric or
            setting, or too few labels of one kind.
    """
    store = None if store is None else file_of_store(store)
    ICL_METRICS.load(metric)  # an unknown metric fails before any annotation, listing the valid ones
    if not 2 <= per_round <= 4:
        raise ConfigError(f"--per-round {per_round} must be 2, 3 or 4 (the paper adds 2 to 4 a round)")
    if max_rounds < 0 or (patience is not None and patience < 1):
        raise ConfigError("--max-rounds must be 0 or more and --patience 1 or more")
    say = on_event or (lambda _m: None)
    out_dir = Path(out)
    store_path = Path(store) if store is not None else out_dir / "icl.db"
    opts, rest = split_legacy(options, dict(overrides), "search_icl")
    if rest.get("icl") is not None:
        raise ConfigError("search_icl chooses the judge's in-context examples itself: drop icl=")
    cfg = apply_overrides(config, cast("ModelOverrides", rest)).model_copy(update={"icl": None})
    max_cost = opts.max_cost
    cfg.check_max_cost(max_cost)
    items = resolve_validation(validation, store_path, label_options, say)
    search, held = split_holdout(items, holdout, seed)
    if not any(i.harmful for i in search) or all(i.harmful for i in search):
        raise ConfigError("the validation samples need both harmful and unharmful labels outside the holdout")
    run = _Annotator(cfg, store_path, max_calls, max_cost, progress, say)
    result = SearchResult(out=out_dir, metric=metric)
    try:
        _search(result, run, search, out_dir, max_rounds, per_round, metric, patience, seed, say)
        best = result.rounds[result.best_round]
        result.best_examples = write_examples(out_dir / "best", best.examples)
        if held:
            say(f"holdout: {len(held)} samples, without and with the best examples")
            result.holdout["without"] = score(held, run(held, None)[1])
            icl = result.best_examples if best.examples else None
            result.holdout["with"] = score(held, run(held, icl)[1])
    except _Stop as stop:
        result.stopped, result.message = stop.reason, str(stop)
        say(result.message)
        if result.rounds and result.best_examples is None:  # keep the best set found so far
            result.best_examples = write_examples(out_dir / "best", result.rounds[result.best_round].examples)
    result.calls, result.cost = run.calls, run.cost
    write_report(result)
    return result


def _search(
    result: SearchResult,
    run: _Annotator,
    search: list[LabelledItem],
    out_dir: Path,
    max_rounds: int,
    per_round: int,
    metric: str,
    patience: int | None,
    seed: int,
    say: Callable[[str], None],
) -> None:
    config_hash, preds = run(search, None)
    first = Round(0, [], [], config_hash, score(search, preds), accepted=True)
    result.rounds.append(first)
    write_json(out_dir / "rounds" / "round_00.json", first.to_dict())
    say(f"round 0 (no examples): {metric} {fmt(first.scored.value(metric))} on {first.scored.n}")
    try:
        _rounds(result, run, search, out_dir, max_rounds, per_round, metric, patience, seed, say, preds)
    finally:
        ids = {e["sample_id"] for e in result.rounds[result.best_round].examples}
        result.baseline = score([i for i in search if i.id not in ids], preds)


def _rounds(
    result: SearchResult,
    run: _Annotator,
    search: list[LabelledItem],
    out_dir: Path,
    max_rounds: int,
    per_round: int,
    metric: str,
    patience: int | None,
    seed: int,
    say: Callable[[str], None],
    best_preds: dict[str, Verdict],
) -> None:
    best = result.rounds[0]
    rejected: set[str] = set()
    stale = 0
    for r in range(1, max_rounds + 1):
        in_best = {e["sample_id"] for e in best.examples}
        picked = pick_mistakes(search, best_preds, in_best | rejected, per_round, seed, r)
        if not picked:
            result.stopped = "no_mistakes"
            say(f"round {r}: no misclassified sample left to add; stopping")
            return
        examples = best.examples + [
            {"sample_id": i.id, "path": str(i.path), "answer": expected_answer(i)} for i in picked
        ]
        folder = write_examples(out_dir / "rounds" / f"round_{r:02d}", examples)
        ids = {e["sample_id"] for e in examples}
        rest = [i for i in search if i.id not in ids]
        config_hash, preds = run(rest, folder)
        cand = Round(r, examples, [i.id for i in picked], config_hash, score(rest, preds))
        cand.best_before = score(rest, best_preds)
        cand.accepted = cand.scored.rank(metric) > cand.best_before.rank(metric) + 1e-12
        result.rounds.append(cand)
        write_json(out_dir / "rounds" / f"round_{r:02d}.json", cand.to_dict())
        verdict = "kept" if cand.accepted else "not better"
        say(
            f"round {r} (+{len(picked)}, {len(examples)} examples): {metric} {fmt(cand.scored.value(metric))} "
            f"vs best {fmt(cand.best_before.value(metric))} on {cand.scored.n}: {verdict}"
        )
        if cand.accepted:
            best, best_preds, stale = cand, {**best_preds, **preds}, 0
            result.best_round = r
        else:
            rejected |= {i.id for i in picked}
            stale += 1
            if patience is not None and stale >= patience:
                result.stopped = "patience"
                return
    result.stopped = "max_rounds"
