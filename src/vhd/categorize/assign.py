"""`categorize`: give every harmful annotation in a store zero or more harm categories, resumably.

The library call behind ``vhd categorize``. Results are stored per annotation, method and
taxonomy version (see `vhd.store.categories`); running the same call again does no work for
annotations that already have a result (``unparsed`` ones too, unless ``retry_unparsed``), and
retries those that errored. At the end the verdicts' categories are set from this method's
results, so `vhd show` and the exports carry them. Methods are functions registered by name in
`CATEGORIZE_METHODS`; third-party packages add more through the ``vhd.categorize_methods``
entry-point group.

Memory does not grow with the store: the counts come from SQL, the annotations to do are read
a page at a time as the method iterates `Todo` (which checks a page's ids against the results
already stored), and applying the results to the verdicts goes a page at a time too.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.aio import run_sync
from vhd.categorize.todo import BATCH, Todo
from vhd.errors import ConfigError
from vhd.execution import Executor, ExecutorOptions
from vhd.records import Role, Status
from vhd.registry import Registry
from vhd.store import categories as cstore
from vhd.store.sqlite import Store, open_store
from vhd.taxonomy.taxonomy import Taxonomy, load_taxonomy

if TYPE_CHECKING:
    from vhd.policy import Policy

_BATCH = BATCH


@dataclass
class CategorizeJob:
    """What a categorisation method gets: the annotations to categorise and the user's options.

    A method saves one `vhd.store.categories.Categorization` per annotation (``method`` set to
    ``job.method``), passes each to `record`, and returns the model it used.

    Attributes:
        method: The method's registered name (stored with every result).
        store: The store.
        todo: The harmful annotations to categorise now: iterate it (read from the store a
            page at a time) and take ``len(todo)``; it is not a list (no indexing).
        taxonomy: The taxonomy.
        model: The ``--model`` given, if any.
        config: The config file given, if any.
        concurrency: Model requests in flight at once.
        calibrate: A labels CSV to calibrate on, if given.
        threshold: A default threshold, if given.
        with_media: Show the model the sample itself.
        record: Call with every result (counts it in the summary).
        emit: Call with one-line progress messages.
        calibration: Set by a method that calibrated (reported in the summary).
        executor: Where a method that supports it runs its per-annotation work (None: here).
    """

    method: str
    store: Store
    todo: Todo
    taxonomy: Taxonomy
    model: str | None
    config: str | os.PathLike[str] | None
    concurrency: int
    calibrate: str | os.PathLike[str] | None
    threshold: float | None
    with_media: bool
    record: Callable[[cstore.Categorization], None]
    emit: Callable[[str], None]
    calibration: dict[str, Any] | None = None
    executor: Executor | None = None


CategorizeMethod = Callable[[CategorizeJob], str]
"""A categorisation method: categorises ``job.todo`` and returns the model it used."""

CATEGORIZE_METHODS: Registry[CategorizeMethod] = Registry(
    "categorisation method", "vhd.categorize_methods", plural="categorisation methods"
)
"""Every categorisation method: built-ins below, plugins from the ``vhd.categorize_methods`` entry-point group."""

CATEGORIZE_METHODS.add(
    "embed",
    "vhd.categorize.assign:run_embed",
    extra="embed",
    needs={"sentence_transformers": "sentence-transformers"},
    summary="sentence embeddings, offline",
)
CATEGORIZE_METHODS.add("llm", "vhd.categorize.assign:run_llm", summary="ask any model backend")

METHODS = CATEGORIZE_METHODS
"""Categorisation methods (the registry is also the collection of their names)."""


@dataclass
class CategorizeSummary:
    """What a categorisation run did.

    Attributes:
        method: ``embed`` or ``llm``.
        model: The model used.
        taxonomy: ``name@version``.
        store: The store's path.
        harmful: Harmful annotations considered.
        already_done: Of those, already categorised under this method and taxonomy version.
        categorized: Categorised now with status ok.
        uncategorized: Of those, with no category at all (the model said none applies).
        unparsed: Answers that could not be read (stored; asked again with ``retry_unparsed``).
        errors: Failed calls (retried on the next run).
        counts: Category name to how many annotations got it in this run.
        applied: Verdicts whose categories were set from this method's results.
        prompt_tokens: Prompt tokens spent (``llm``).
        completion_tokens: Completion tokens spent (``llm``).
        calibration: Thresholds and F1 per category when calibrated (``embed``).
        warnings: Things the user should know (one line each).
        elapsed_s: Wall time.
    """

    method: str
    model: str
    taxonomy: str
    store: str
    harmful: int = 0
    already_done: int = 0
    categorized: int = 0
    uncategorized: int = 0
    unparsed: int = 0
    errors: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    applied: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calibration: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    def exit_code(self) -> int:
        """0 when every harmful annotation has a final result, 1 when some errored (run again)."""
        return 1 if self.errors else 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)

    def lines(self) -> list[str]:
        """A short human-readable report."""
        out = [
            f"{self.method} ({self.model}), taxonomy {self.taxonomy}: {self.harmful} harmful annotation(s), "
            f"{self.already_done} already done, {self.categorized} categorised now "
            f"({self.uncategorized} with no category), {self.unparsed} unparsed, {self.errors} error(s) "
            f"in {self.elapsed_s:.1f} s",
        ]
        if self.counts:
            out.append("; ".join(f"{name}: {n}" for name, n in sorted(self.counts.items(), key=lambda kv: -kv[1])))
        if self.prompt_tokens or self.completion_tokens:
            out.append(f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens")
        out.extend(f"warning: {w}" for w in self.warnings)
        if self.errors:
            out.append("annotations with errors are retried when you run the same command again")
        return out


def use_store(store: Store | str | os.PathLike[str]) -> tuple[Store, bool]:
    """The store, and whether this call opened it (and so the caller must close it).

    Raises:
        ConfigError: A path where no store file is.
    """
    if isinstance(store, Store):
        return store, False
    return open_store(store), True


def _taxonomy(
    taxonomy: Taxonomy | str | os.PathLike[str] | None,
    policy: Policy | str | os.PathLike[str] | None,
    config: str | os.PathLike[str] | None,
) -> Taxonomy:
    """The categories to assign: the taxonomy, the policy's categories, the config's policy, or VHD11K's."""
    from vhd.policy import load_policy

    if taxonomy is not None and policy is not None:
        raise ConfigError("give a taxonomy or a policy, not both: a policy's categories are its taxonomy")
    if policy is None and taxonomy is None and config is not None:
        from vhd.config import load_config

        cfg = load_config(os.fspath(config))
        policy = cfg.resolve_path(cfg.policy) if cfg.policy else None
    if policy is not None:
        try:
            return load_policy(policy).to_taxonomy()
        except ValueError as exc:  # more categories than letter codes
            raise ConfigError(f"policy {policy}: {exc}") from None
    return load_taxonomy(taxonomy)


def categorize(
    store: Store | str | os.PathLike[str],
    *,
    method: str = "embed",
    model: str | None = None,
    taxonomy: Taxonomy | str | os.PathLike[str] | None = None,
    config: str | os.PathLike[str] | None = None,
    policy: Policy | str | os.PathLike[str] | None = None,
    concurrency: int = 16,
    calibrate: str | os.PathLike[str] | None = None,
    threshold: float | None = None,
    config_hash: str | None = None,
    retry_unparsed: bool = False,
    redo: bool = False,
    limit: int | None = None,
    with_media: bool = False,
    on_event: Callable[[str], None] | None = None,
    executor: str | Executor = "local",
    executor_options: ExecutorOptions | None = None,
) -> CategorizeSummary:
    """Assign harm categories to the harmful annotations of a store.

    Args:
        store: A `Store` or the path of an existing store.
        method: ``embed`` (sentence embeddings, offline), ``llm`` (any model backend) or a
            plugin's method (`CATEGORIZE_METHODS`).
        model: ``embed``: a sentence-transformers model name or folder (default
            all-MiniLM-L6-v2); ``llm``: a ``BACKEND:MODEL`` spec (default: the config file's
            ``model``, then ``$VHD_MODEL``).
        taxonomy: A taxonomy file or object (default: VHD11K's ten categories).
        config: TOML/YAML config file (its ``[backends.*]`` tables and ``model`` are used, and its
            ``policy`` when neither ``taxonomy`` nor ``policy`` is given).
        policy: A policy file or object (`vhd.policy`): its categories are the taxonomy (named and
            versioned like the policy). Not with ``taxonomy``.
        concurrency: ``llm`` requests in flight at once.
        calibrate: ``embed``: a labels CSV (with ``reason`` and ``categories`` columns) to
            calibrate per-category thresholds on.
        threshold: ``embed``: default threshold for every category (before calibration).
        config_hash: Only annotations under this configuration (default: each sample's latest).
        retry_unparsed: Ask again where an earlier answer was unreadable.
        redo: Categorise again even where a result exists (it is replaced).
        limit: Categorise at most this many annotations now.
        with_media: ``llm``: show the model the sample itself (the image or the video's frames,
            prepared as the config's ``[media]`` says) besides the findings.
        on_event: Called with one-line progress messages.
        executor: ``llm`` only: ``ray`` asks from Ray actors, each with its own backend
            (results are saved here); ``local`` (the default) asks from this process.
        executor_options: Workers, Ray address, CPUs per worker.

    Returns:
        What was done.

    Raises:
        ConfigError: Unknown method, missing model, bad taxonomy or labels file.
        MissingDependencyError: ``embed`` without ``vhd[embed]`` installed (before any work).
    """
    run = CATEGORIZE_METHODS.load(method)
    if with_media and method != "llm":
        raise ConfigError("--with-media needs --method llm (with a vision-language model)")
    from vhd.execution import executor as find_executor

    runner = find_executor(executor, executor_options)
    if not runner.in_process and method != "llm":
        raise ConfigError(f"--executor {runner.name} works with --method llm; {method} runs here")
    started = time.perf_counter()
    tax = _taxonomy(taxonomy, policy, config)
    db, owned = use_store(store)
    emit = on_event or (lambda _m: None)
    try:
        done = None if redo else (method, tax.name, tax.version)
        todo = Todo(db, config_hash=config_hash, done=done, retry_unparsed=retry_unparsed, limit=limit)
        summary = CategorizeSummary(method, "", tax.key, str(db.path), harmful=todo.harmful)
        summary.already_done = todo.already_done
        digests = cstore.stored_digests(db, method, tax.name, tax.version) - {tax.digest}
        if digests:
            summary.warnings.append(
                f"taxonomy {tax.key} differs from the one earlier results were made with but kept its version: "
                "bump `version` in the file to categorise again under the new content"
            )
        counts: Counter[str] = Counter()

        def record(cat: cstore.Categorization) -> None:
            summary.prompt_tokens += cat.prompt_tokens
            summary.completion_tokens += cat.completion_tokens
            if cat.status == "ok":
                summary.categorized += 1
                summary.uncategorized += not cat.assignments
                counts.update(cat.names)
            elif cat.status == "unparsed":
                summary.unparsed += 1
            else:
                summary.errors += 1

        job = CategorizeJob(
            method, db, todo, tax, model, config, concurrency, calibrate, threshold, with_media, record, emit
        )
        job.executor = None if runner.in_process else runner
        summary.model = run(job)
        summary.calibration = job.calibration
        summary.counts = dict(counts)
        summary.applied = cstore.apply_to_verdicts(db, method, tax.name, tax.version, tax.codes)
    finally:
        if owned:
            db.close()
    summary.elapsed_s = time.perf_counter() - started
    return summary


def embed_text(item: cstore.HarmfulAnnotation) -> Any:
    """What the ``embed`` method reads of an annotation: the reason and the affirmative arguments."""
    from vhd.categorize.embed import EmbedText

    ann = item.annotation
    refused = ann.verdict.status is Status.REFUSED or ann.verdict.refused
    reason = "" if refused else ann.verdict.reason.strip()
    args = " ".join(a.strip() for a in ann.arguments(Role.AFFIRMATIVE) if a.strip() and not _declined(a))
    return EmbedText(reason=reason, arguments=args)


def _declined(text: str) -> bool:
    from vhd.debate.parse import is_refusal

    return is_refusal(text)


def run_embed(job: CategorizeJob) -> str:
    """The ``embed`` method: sentence embeddings against each category's prototypes (offline)."""
    from vhd.categorize.calibration import read_calibration
    from vhd.categorize.embed import DEFAULT_THRESHOLD, EmbedCategorizer
    from vhd.categorize.embedding import load_embedder

    db, todo, tax, model, record, emit = job.store, job.todo, job.taxonomy, job.model, job.record, job.emit
    calibrate, threshold = job.calibrate, job.threshold
    if not todo and calibrate is None:
        return model or "all-MiniLM-L6-v2"
    embedder = load_embedder(model)
    scorer = EmbedCategorizer(tax, embedder, threshold=DEFAULT_THRESHOLD if threshold is None else threshold)
    if calibrate is not None:
        reasons, labels, skipped = read_calibration(calibrate, tax, store=db)
        cal = scorer.calibrate(reasons, labels)
        job.calibration = cal.to_dict()
        emit(f"calibrated on {len(reasons)} labelled reason(s) from {calibrate} ({skipped} row(s) without one)")
    params = scorer.params()
    done = 0
    for chunk in todo.batches(_BATCH):
        decided = scorer.categorize([embed_text(it) for it in chunk])
        cats = []
        for item, chosen in zip(chunk, decided, strict=True):
            cat = cstore.Categorization(
                annotation_id=item.annotation_id,
                method=job.method,
                taxonomy=tax.name,
                taxonomy_version=tax.version,
                taxonomy_digest=tax.digest,
                model=embedder.name,
                status="ok",
                assignments=[cstore.Assignment(code, tax.get(code).name, round(s, 4)) for code, s in chosen],
                params=params,
                created_at=time.time(),
            )
            cats.append(cat)
            record(cat)
        cstore.save_categorizations(db, cats)
        done += len(chunk)
        emit(f"categorised {done}/{len(todo)}")
    return embedder.name


def run_llm(job: CategorizeJob) -> str:
    """The ``llm`` method: ask a model backend which categories each annotation belongs to."""
    from vhd.backends.registry import create_backend
    from vhd.categorize.llm import categorize_with_llm
    from vhd.config import MODEL_ENV, load_config
    from vhd.media.load import media_settings

    db, todo, tax, model, config, record = job.store, job.todo, job.taxonomy, job.model, job.config, job.record
    concurrency, with_media, emit = job.concurrency, job.with_media, job.emit
    cfg = load_config(None if config is None else Path(config))
    spec = model or cfg.model or os.environ.get(MODEL_ENV)
    if not spec:
        raise ConfigError(f"the llm method needs a model: pass --model BACKEND:MODEL (or set ${MODEL_ENV})")
    backend = create_backend(spec, cfg.backends)
    if not todo:
        return backend.spec

    def save(cat: cstore.Categorization) -> None:
        cstore.save_categorization(db, cat)
        record(cat)

    async def main() -> None:
        media = media_settings(cfg.media) if with_media else None
        if job.executor is not None:  # each worker asks with its own backend; results are saved here
            from vhd.categorize.work import LlmCategorizeWork
            from vhd.execution import map_async

            work = LlmCategorizeWork(spec, cfg.backends, tax, media)
            failed = await map_async(job.executor, work, todo, save, concurrency=concurrency)
            if failed:
                emit(f"{len(failed)} annotation(s) not categorised ({failed[0][1]}); run the same command again")
            return
        try:
            await backend.check()
            await categorize_with_llm(todo, backend, tax, save=save, concurrency=concurrency, media=media)
        finally:
            await backend.aclose()

    emit(f"asking {backend.spec} about {len(todo)} annotation(s), {concurrency} at a time")
    run_sync(main())
    return backend.spec
