"""``vhd compare``: what the debate buys for what it costs.

On the same human-labelled samples, several ways of asking VLMs are run and scored side by side:
one call with the short prompt, one with the long prompt, one with the debate's in-context
examples before the long prompt, self-consistency (k calls at a higher temperature, majority
vote) for each k, the debate for each number of rounds, and a mixed-model debate. Each
configuration records every sample's decision, score and tokens; the report puts accuracy, F1
and Cohen's kappa (with 95% bootstrap intervals) beside tokens and cost per sample, and pairs
each debate with the self-consistency run whose token budget is closest. ``repeats`` runs every
configuration several times: verdicts sampled at temperature 0.5 are draws, so run-to-run
agreement (mean pairwise kappa) is part of the answer. The metrics pool every repeat; the
bootstrap's unit is the sample (a sample's repeats are resampled together), so more repeats of
the same answers never narrow an interval. An answer that could not be read, or a call that
failed, counts as wrong, as in ``vhd bench``; coverage (answered / asked) says how many.

The debate goes through `vhd.annotate` and its store (each repeat a distinct ``debate.seed``, so a
distinct configuration hash); single calls are cached under ``out``. Running the same call again
makes no model call for what is already answered.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from vhd.aio import run_sync
from vhd.bench.metrics import BOOTSTRAP
from vhd.compare.report import write_outputs
from vhd.compare.result import CompareResult, ConfigResult
from vhd.compare.single import AnswerCache, SampleOutcome, SingleRunner, SingleSpec, question
from vhd.config import AnnotateConfig, ModelOverrides, apply_overrides
from vhd.errors import ConfigError, StoreWriteError
from vhd.labels.rules import LabelOptions
from vhd.labels.sets import LabelledItem, load_labelled_media
from vhd.progress import ProgressFn, staged
from vhd.store.sqlite import StoreLike
from vhd.store.sqlite import store_path as file_of_store

if TYPE_CHECKING:
    from vhd.compare.cascade_run import CascadeReplay

METRIC_KEYS = ("accuracy", "f1", "kappa", "tpr", "tnr")


def score_config(result: ConfigResult, truth: Sequence[bool], *, resamples: int = BOOTSTRAP) -> ConfigResult:
    """Fill a configuration's metrics, budgets and run-to-run agreement from its outcomes.

    The metrics pool every repeat and count an unreadable or failed answer as wrong (the rule of
    `vhd.bench.metrics`, which ``vhd bench`` uses too); each bootstrap resample draws samples
    with replacement, each with all its repeats.
    """
    from vhd.bench.metrics import binary_result, counted_wrong
    from vhd.bench.metrics.agreement import cohen_kappa, kappa_runs

    runs = [[o.harmful for o in run] for run in result.runs]
    computed = binary_result(truth, runs, resamples=resamples)
    v = computed.values
    result.metrics = {
        "accuracy": v["accuracy"],
        "f1": v["f1"],
        "kappa": kappa_runs(truth, [counted_wrong(truth, r) for r in runs], resamples=resamples),
        "tpr": v["harmful_acc"],
        "tnr": v["unharmful_acc"],
        "coverage": v["coverage"],
    }
    result.answered, result.asked = computed.n_answered, computed.total
    result.accuracy_runs = [
        sum(d == t for d, t in zip(counted_wrong(truth, run), truth, strict=True)) / len(truth) if truth else None
        for run in runs
    ]
    every = [o for run in result.runs for o in run]
    n = max(len(every), 1)
    result.tokens_per_sample = sum(o.tokens for o in every) / n
    result.calls_per_sample = sum(o.calls for o in every) / n
    result.cost_per_sample = sum(o.cost for o in every) / n
    result.unparsed = sum(o.harmful is None and o.error is None for o in every)
    result.errors = sum(o.error is not None for o in every)
    kappas: list[float] = []
    agreements: list[float] = []
    for a, b in itertools.combinations(result.runs, 2):
        pairs = [(x.harmful, y.harmful) for x, y in zip(a, b, strict=True)]
        if pairs:
            agreements.append(sum(x == y for x, y in pairs) / len(pairs))
        both = [(x, y) for x, y in pairs if x is not None and y is not None]
        k = cohen_kappa([x for x, _ in both], [y for _, y in both])
        if k is not None:
            kappas.append(k)
    result.run_kappa = sum(kappas) / len(kappas) if kappas else None
    result.run_agreement = sum(agreements) / len(agreements) if agreements else None
    return result


def models_of(conf: ConfigResult) -> list[str]:
    """The model specs a configuration called (the ones whose prices its cost needs)."""
    if conf.family == "debate":
        return [str(conf.params[role]) for role in ("affirmative", "negative", "judge")]
    if conf.family == "cascade":  # the stages report no tokens: the debate's models make its cost
        return [str(conf.params[role]) for role in ("affirmative", "negative", "judge")]
    return [str(conf.params["model"])]


def match_budgets(configs: Sequence[ConfigResult]) -> list[dict[str, Any]]:
    """Pair each debate with the self-consistency configuration closest to it in tokens per sample."""
    sc = [c for c in configs if c.family == "self-consistency"]
    pairs = []
    for d in (c for c in configs if c.family == "debate"):
        if not sc:
            break
        best = min(sc, key=lambda c: abs(c.tokens_per_sample - d.tokens_per_sample))
        pairs.append(
            {
                "debate": d.name,
                "debate_tokens": d.tokens_per_sample,
                "debate_accuracy": d.metrics["accuracy"].value,
                "sc": best.name,
                "sc_tokens": best.tokens_per_sample,
                "sc_accuracy": best.metrics["accuracy"].value,
            }
        )
    return pairs


def parse_int_list(text: str | Sequence[int], flag: str) -> list[int]:
    """``"1,3,5"`` (or a list) as distinct positive integers in order; `ConfigError` otherwise."""
    raw = text.split(",") if isinstance(text, str) else list(text)
    try:
        values = [int(str(v).strip()) for v in raw if str(v).strip()]
    except ValueError:
        raise ConfigError(f"{flag} {text!r} must be comma-separated whole numbers, e.g. 1,3,5") from None
    if not values or any(v < 1 for v in values):
        raise ConfigError(f"{flag} {text!r} must list whole numbers of 1 or more, e.g. 1,3,5")
    return list(dict.fromkeys(values))


def resolve_items(
    labels: str | os.PathLike[str],
    store: Path,
    options: LabelOptions | None = None,
    on_event: Callable[[str], None] | None = None,
) -> list[LabelledItem]:
    """The labelled samples (`vhd.labels.sets.labels_or_set`), each sample once."""
    from vhd.labels.sets import labels_or_set

    items = labels_or_set(labels, store, options, on_event)
    unique = list({i.id: i for i in items}.values())
    if not unique:
        raise ConfigError(f"no labelled samples in {labels}: give a labels CSV with path and harmful columns")
    return unique


MIXED_ROLES = ("affirmative", "negative", "debaters", "judge")
"""Role overrides that make the mixed-model debate of `compare` and `vhd.compare.injection.injection`."""


def base_config(config: AnnotateConfig | str | os.PathLike[str] | None, overrides: ModelOverrides) -> AnnotateConfig:
    """The configuration every row starts from: ``model`` and ``concurrency`` applied, the role models not."""
    return apply_overrides(config, {"model": overrides.get("model"), "concurrency": overrides.get("concurrency")})


def debate_plans(
    cfg: AnnotateConfig, rounds: Sequence[int], overrides: ModelOverrides
) -> list[tuple[str, int, AnnotateConfig]]:
    """``(name, rounds, configuration)``: a debate per round count, and a mixed-model one each when a role is named."""
    plans = [(f"debate-r{r}", r, cfg) for r in rounds]
    mixed_roles = {role: model for role in MIXED_ROLES if (model := overrides.get(role))}
    if mixed_roles:
        mixed = cfg.with_overrides(**mixed_roles)
        plans += [(f"debate-mixed-r{r}", r, mixed) for r in rounds]
    return plans


def compare(
    labels: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str] = "compare",
    store: StoreLike | None = None,
    config: AnnotateConfig | str | os.PathLike[str] | None = None,
    progress: bool | ProgressFn = False,
    on_event: Callable[[str], None] | None = None,
    repeats: int = 1,
    k: str | Sequence[int] = (1, 3, 5),
    rounds: str | Sequence[int] = (1, 2),
    sc_temperature: float = 0.7,
    resamples: int = BOOTSTRAP,
    label_options: LabelOptions | None = None,
    cascade: CascadeReplay | None = None,
    **overrides: Unpack[ModelOverrides],
) -> CompareResult:
    """Compare single calls, self-consistency and the debate on the same human-labelled samples.

    Args:
        labels: A labels CSV (or VHD11K file), or the name of a labelled set in the store.
        out: Folder for ``compare.md``, ``compare.csv``, ``compare.json``, ``compare.png`` and the
            single-call answer cache.
        repeats: Runs of each configuration.
        k: Self-consistency sample counts (``"1,3,5"`` or a list).
        rounds: Debate round counts (``"1,2"`` or a list).
        sc_temperature: Sampling temperature of self-consistency.
        store: The debate's store (default ``<out>/compare.db``).
        config: An `AnnotateConfig` or a config file (prices, backends, temperatures).
        resamples: Bootstrap resamples per interval.
        progress: True shows the debate's progress bars on stderr (on a terminal); a
            `vhd.progress.ProgressFn` is called instead, each debate run under its own stage.
        on_event: Called with one-line progress messages (and the labels file's rows left out).
        label_options: How a labels file's rows are read (``--media``, ``--path-prefix``,
            ``--allow-outside-paths``, ``--duplicates``).
        cascade: Detector stages replayed on the first debate configuration's verdicts: adds a
            ``cascade`` row (`vhd.compare.cascade_run.CascadeReplay`).
        **overrides: The models (`vhd.config.ModelOverrides`): ``model`` for single calls and
            every debate role, ``concurrency``; ``judge``, ``debaters``, ``affirmative`` and
            ``negative`` make the mixed-model debate (an extra row); ``icl``, in-context examples
            (file or folder) for the debate's judge and the ``single-long-icl`` configuration.

    Returns:
        Every configuration with its scores; also written under ``out``.

    Raises:
        ConfigError: Bad flags, labels or configuration (nothing was run).
    """
    store = None if store is None else file_of_store(store)
    if repeats < 1:
        raise ConfigError(f"--repeats {repeats} must be 1 or more")
    if not 0 <= sc_temperature <= 2:
        raise ConfigError(f"--sc-temperature {sc_temperature} must be between 0 and 2")
    ks, rounds_list = parse_int_list(k, "--k"), parse_int_list(rounds, "--rounds")
    if any(r > 10 for r in rounds_list):
        raise ConfigError(f"--rounds {rounds} must be 10 or fewer")
    say = on_event or (lambda _m: None)
    out_dir = Path(out)
    store_path = Path(store) if store is not None else out_dir / "compare.db"
    icl = overrides.get("icl")
    cfg = base_config(config, overrides).model_copy(update={"icl": None})
    icl_path = Path(icl) if icl is not None else (cfg.resolve_path(cfg.icl) if cfg.icl else None)
    items = resolve_items(labels, store_path, label_options, say)
    truth = [i.harmful for i in items]
    result = CompareResult(out=out_dir, items=items)
    result.configs += _run_single(cfg, items, icl_path, repeats, ks, sc_temperature, out_dir, say, result.notes)
    plans = debate_plans(cfg, rounds_list, overrides)
    for name, r, plan_cfg in plans:
        result.configs.append(_run_debate(name, r, plan_cfg, items, icl_path, repeats, store_path, progress, say))
    if cascade is not None:
        from vhd.compare.cascade_run import run_cascade

        base = next(c for c in result.configs if c.name == f"debate-r{rounds_list[0]}")
        conf = run_cascade(
            f"cascade-r{rounds_list[0]}",
            base,
            items,
            cfg,
            out_dir,
            specs=cascade.stages,
            thresholds=cascade.thresholds,
            calibration=cascade.calibration,
            sets=cascade.sets,
            tolerance=cascade.tolerance,
            say=say,
        )
        conf.params.update({role: base.params[role] for role in ("affirmative", "negative", "judge")})
        result.configs.append(conf)
    for conf in result.configs:
        score_config(conf, truth, resamples=resamples)
        if not all(spec in cfg.prices for spec in models_of(conf)):
            conf.cost_per_sample = None  # a model without a price: unknown, not $0
    result.matched = match_budgets(result.configs)
    write_outputs(result)
    return result


def _run_single(
    cfg: AnnotateConfig,
    items: Sequence[LabelledItem],
    icl: Path | None,
    repeats: int,
    ks: Sequence[int],
    sc_temperature: float,
    out: Path,
    say: Callable[[str], None],
    notes: list[str],
) -> list[ConfigResult]:
    from vhd.backends.registry import create_backend
    from vhd.debate.icl import load_examples
    from vhd.media.load import media_settings
    from vhd.records import Kind

    settings = media_settings(cfg.media)
    examples = load_examples(icl, settings) if icl is not None else []
    loaded = load_labelled_media(items, settings)
    temperature = cfg.role_settings("judge")[0]
    specs = [SingleSpec("single-short", "short", 1, temperature), SingleSpec("single-long", "long", 1, temperature)]
    if examples:
        specs.append(SingleSpec("single-long-icl", "long", 1, temperature, icl=True))
    else:
        notes.append("single-long-icl left out: no in-context examples (--icl)")
    specs += [SingleSpec(f"sc-k{k}", "long", k, sc_temperature) for k in ks]
    spec_model = cfg.role_model("judge")
    backend = create_backend(spec_model, cfg.backends)
    identity = {
        "backend": backend.identity(),
        "prompts": {p: [question(p, kind, 5) for kind in Kind] for p in ("short", "long")},
    }
    cache = AnswerCache(out / "single_answers.db")

    async def go() -> list[list[list[SampleOutcome]]]:
        await backend.check()
        runner = SingleRunner(backend, cfg, examples, cache, identity)
        try:
            return [await runner.run(s, loaded, repeats, say) for s in specs]
        finally:
            await backend.aclose()

    try:
        all_runs = run_sync(go())
    finally:
        cache.close()
    results = []
    for spec, runs in zip(specs, all_runs, strict=True):
        family = "self-consistency" if spec.name.startswith("sc-") else "single"
        params = {"model": spec_model, "prompt": spec.prompt, "k": spec.k, "temperature": spec.temperature}
        params["icl"] = len(examples) if spec.icl else 0
        results.append(ConfigResult(spec.name, family, params, runs))
    return results


def _run_debate(
    name: str,
    rounds: int,
    cfg: AnnotateConfig,
    items: Sequence[LabelledItem],
    icl: Path | None,
    repeats: int,
    store: Path,
    progress: bool | ProgressFn,
    say: Callable[[str], None],
) -> ConfigResult:
    from vhd.annotate.api import annotate
    from vhd.store.sqlite import Store

    base_seed = cfg.debate.seed
    runs: list[list[SampleOutcome]] = []
    hashes = []
    for rep in range(repeats):
        seed = base_seed if rep == 0 else (base_seed or 0) + rep
        c = cfg.model_copy(update={"debate": cfg.debate.model_copy(update={"rounds": rounds, "seed": seed})})
        stage = name if repeats == 1 else f"{name} repeat {rep + 1}"
        paths = [str(i.path) for i in items]
        summary = annotate(paths, store=store, config=c, icl=icl, progress=staged(progress, stage), on_event=say)
        if summary.store_error:
            raise StoreWriteError(summary.store_error)
        say(f"{name} repeat {rep + 1}: {summary.annotated} annotated, {summary.already_done} already done")
        hashes.append(summary.config_hash)
        with Store(store, create=True) as db:
            found = db.annotations_for([item.id for item in items], summary.config_hash)
        run = []
        for item in items:
            ann = found.get(item.id)
            if ann is None:
                run.append(SampleOutcome(None, None, 0, 0, 0, error="not annotated; run again"))
                continue
            u, v = ann.usage, ann.verdict
            error = (ann.error or "model call failed") if v.status.value == "error" else None
            run.append(SampleOutcome(v.harmful, v.score, u.prompt_tokens, u.completion_tokens, u.calls, u.cost, error))
        runs.append(run)
    params = {
        "rounds": rounds,
        "affirmative": cfg.role_model("affirmative"),
        "negative": cfg.role_model("negative"),
        "judge": cfg.role_model("judge"),
        "temperature": cfg.debate.temperature,
        "icl": str(icl) if icl else None,
        "config_hashes": hashes,
    }
    return ConfigResult(name, "debate", params, runs)
