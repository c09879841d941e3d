"""`discover`: draft a taxonomy from the free-text harm reasons of a store.

Two ways. ``cluster`` (default) embeds the distinct reasons, clusters them without a preset
count (`vhd.categorize.cluster`), shows each cluster's most typical reasons, and asks a model to
name and define each cluster (without a model, the most typical reason names it).
``llm-only`` is the paper's way: one prompt over a sample of the reasons asks a model for the
categories. Either way the result is a draft taxonomy file a person edits and then passes with
``--taxonomy``: `render_draft` writes it as YAML with comments (cluster sizes, left-out reasons).
Methods are functions registered by name in `DISCOVERY_METHODS`; third-party packages add more
through the ``vhd.discovery_methods`` entry-point group.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.aio import run_sync
from vhd.categorize.cluster import CLUSTERERS, DEFAULT_DISTANCE, Cluster
from vhd.categorize.naming import fallback_names, name_with_model, propose_with_model
from vhd.errors import ConfigError
from vhd.registry import Registry
from vhd.store import categories as cstore
from vhd.store.sqlite import Store
from vhd.taxonomy.taxonomy import Category, Taxonomy, parse_taxonomy

MAX_CATEGORIES = 25
"""Most categories a draft gets (one letter each, one letter left for the unharmful class)."""


@dataclass
class DiscoverResult:
    """A drafted taxonomy and how it was found.

    Attributes:
        taxonomy: The draft (valid for ``--taxonomy``).
        clusters: The clusters behind each category (``cluster`` method), in category order.
        left_out: Reasons that joined no category (rare, or unlike any group).
        reasons: Distinct reasons read.
        annotations: Harmful annotations those reasons came from.
        out: The file written, if any.
    """

    taxonomy: Taxonomy
    clusters: list[Cluster] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    reasons: int = 0
    annotations: int = 0
    out: Path | None = None


@dataclass
class DiscoveryJob:
    """What a discovery method gets: the reasons and the user's options.

    Attributes:
        reasons: Distinct reasons and how often each was given.
        backend: The model backend of ``--model`` (unopened), if any.
        embed_model: Sentence-transformers model for embedding, if given.
        clusterer: Clustering algorithm (`vhd.categorize.cluster.CLUSTERERS`).
        distance_threshold: Agglomerative merge threshold.
        min_cluster_size: Clusters given fewer times than this are left out.
        max_categories: At most this many categories.
        sample: How many distinct reasons (the most frequent) a prompt may show.
        typical: Typical reasons kept per cluster.
        emit: Call with one-line progress messages.
    """

    reasons: Counter[str]
    backend: Any
    embed_model: str | None
    clusterer: str
    distance_threshold: float
    min_cluster_size: int
    max_categories: int
    sample: int
    typical: int
    emit: Callable[[str], None]


@dataclass
class Discovered:
    """What a discovery method found.

    Attributes:
        categories: ``(name, definition, examples)`` per category, at most ``max_categories``.
        clusters: The clusters behind each category, in the same order (clustering methods).
        left_out: Reasons that joined no category.
    """

    categories: list[tuple[str, str, list[str]]]
    clusters: list[Cluster] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


DiscoveryMethod = Callable[[DiscoveryJob], Discovered]
"""A discovery method: drafts categories from ``job.reasons``."""

DISCOVERY_METHODS: Registry[DiscoveryMethod] = Registry("discovery method", "vhd.discovery_methods")
"""Every discovery method: built-ins below, plugins from the ``vhd.discovery_methods`` entry-point group."""

DISCOVERY_METHODS.add(
    "cluster",
    "vhd.categorize.discovery:discover_by_clustering",
    extra="embed",
    needs={"sentence_transformers": "sentence-transformers"},
    summary="embed and cluster the reasons; a model (if given) names each cluster",
)
DISCOVERY_METHODS.add(
    "llm-only",
    "vhd.categorize.discovery:discover_with_llm",
    summary="one prompt over the most frequent reasons asks a model for the categories",
)

DISCOVER_METHODS = DISCOVERY_METHODS
"""Ways `discover` drafts a taxonomy (the registry is also the collection of their names)."""


def collect_reasons(store: Store, *, config_hash: str | None = None) -> Counter[str]:
    """Count the judges' harm reasons (refusals left out), merging case and a final period."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for item in cstore.harmful_annotations(store, config_hash=config_hash):
        v = item.annotation.verdict
        if v.refused:
            continue
        text = " ".join(v.reason.split()).strip().rstrip(".").strip()
        if text:
            key = text.lower()
            first.setdefault(key, text)
            counts[first[key]] += 1
    return counts


def discover(
    store: Store | str | os.PathLike[str] | None,
    *,
    method: str = "cluster",
    model: str | None = None,
    embed_model: str | None = None,
    out: str | os.PathLike[str] | None = None,
    config: str | os.PathLike[str] | None = None,
    clusterer: str = "agglomerative",
    distance_threshold: float = DEFAULT_DISTANCE,
    min_cluster_size: int = 2,
    max_categories: int = MAX_CATEGORIES,
    sample: int = 300,
    typical: int = 8,
    name: str = "draft",
    version: str = "0.1",
    config_hash: str | None = None,
    reasons: Counter[str] | None = None,
    on_event: Callable[[str], None] | None = None,
) -> DiscoverResult:
    """Draft a taxonomy from a store's harm reasons.

    Args:
        store: A `Store` or the path of one (may be None when ``reasons`` is given).
        method: ``cluster``, ``llm-only`` or a plugin's method (`DISCOVERY_METHODS`).
        model: ``BACKEND:MODEL`` that names clusters (``cluster``; optional) or proposes the
            categories (``llm-only``; required).
        embed_model: Sentence-transformers model for ``cluster`` (default all-MiniLM-L6-v2).
        out: Write the draft here (YAML).
        config: Config file whose ``[backends.*]`` tables configure the model.
        clusterer: ``agglomerative`` or ``hdbscan``.
        distance_threshold: Agglomerative merge threshold (centred cosine distance).
        min_cluster_size: Clusters given fewer times than this are left out.
        max_categories: At most this many categories (the largest clusters).
        sample: ``llm-only``: how many distinct reasons (the most frequent) the prompt shows.
        typical: Typical reasons kept per cluster (they become the category's examples).
        name: The draft taxonomy's name.
        version: Its version.
        config_hash: Only annotations under this configuration.
        reasons: Reason counts to use instead of reading the store.
        on_event: Called with one-line progress messages.

    Returns:
        The draft and how it was made.

    Raises:
        ConfigError: Unknown method, no reasons, or ``llm-only`` without a model.
        MissingDependencyError: ``cluster`` without ``vhd[embed]`` installed (before any work).
    """
    run = DISCOVERY_METHODS.load(method)
    if not 1 <= max_categories <= MAX_CATEGORIES:
        raise ConfigError(f"max categories must be between 1 and {MAX_CATEGORIES} (one letter each)")
    emit = on_event or (lambda _m: None)
    if reasons is None:
        from vhd.categorize.assign import use_store

        if store is None:
            raise ConfigError("discover needs a store or reason counts")
        db, owned = use_store(store)
        try:
            reasons = collect_reasons(db, config_hash=config_hash)
        finally:
            if owned:
                db.close()
    if not reasons:
        raise ConfigError("no harmful reasons to discover categories from: annotate first (`vhd annotate`)")
    backend = _backend(model, config) if model else None
    result = DiscoverResult(taxonomy=_placeholder(), reasons=len(reasons), annotations=sum(reasons.values()))
    found = run(
        DiscoveryJob(
            reasons,
            backend,
            embed_model,
            clusterer,
            distance_threshold,
            min_cluster_size,
            max_categories,
            sample,
            typical,
            emit,
        )
    )
    cats = found.categories[:max_categories]
    result.clusters, result.left_out = found.clusters, found.left_out
    result.taxonomy = build_draft(cats, name=name, version=version, source=str(out) if out else name)
    if out is not None:
        from vhd.fileio import atomic_write

        result.out = atomic_write(out, render_draft(result, method=method, model=backend.spec if backend else None))
    return result


def discover_with_llm(job: DiscoveryJob) -> Discovered:
    """The ``llm-only`` method (the paper's): one prompt over the most frequent reasons.

    Raises:
        ConfigError: No model was given.
    """
    backend = job.backend
    if backend is None:
        raise ConfigError("--method llm-only needs --model BACKEND:MODEL to propose the categories")
    shown = [r for r, _ in job.reasons.most_common(job.sample)]
    job.emit(f"asking {backend.spec} for categories over {len(shown)} of {len(job.reasons)} distinct reason(s)")
    proposed = run_sync(_with(backend, propose_with_model(backend, shown)))
    return Discovered(proposed[: job.max_categories])


def discover_by_clustering(job: DiscoveryJob) -> Discovered:
    """The ``cluster`` method: embed the reasons, cluster them, and name each cluster."""
    from vhd.categorize.cluster import REASON_TEMPLATE, cluster_reasons
    from vhd.categorize.embedding import load_embedder

    CLUSTERERS.check(job.clusterer)  # an unknown clusterer or a missing library fails before embedding
    reasons, backend, emit = job.reasons, job.backend, job.emit
    texts = list(reasons)
    emit(f"embedding {len(texts)} distinct reason(s)")
    vectors = load_embedder(job.embed_model).encode([REASON_TEMPLATE.format(t) for t in texts])
    clusters, noise = cluster_reasons(
        texts,
        [reasons[t] for t in texts],
        vectors,
        clusterer=job.clusterer,
        distance_threshold=job.distance_threshold,
        min_size=job.min_cluster_size,
        typical=job.typical,
    )
    for extra in clusters[job.max_categories :]:
        noise.extend(extra.reasons)
    clusters = clusters[: job.max_categories]
    emit(f"{len(clusters)} cluster(s), {len(noise)} reason(s) left out")
    if backend is not None:
        emit(f"asking {backend.spec} to name {len(clusters)} cluster(s)")
        run_sync(_with(backend, name_with_model(backend, clusters)))
    fallback_names(clusters)
    return Discovered([(c.name, c.definition, c.typical) for c in clusters], clusters, noise)


def build_draft(
    categories: list[tuple[str, str, list[str]]], *, name: str, version: str, source: str = "draft"
) -> Taxonomy:
    """Make a valid taxonomy from ``(name, definition, examples)`` triples, coding them A, B, C...

    Repeated names get a number; empty definitions get one built from the examples.

    Raises:
        ConfigError: No categories.
    """
    if not categories:
        raise ConfigError("no categories were found: lower --min-cluster-size or raise --distance-threshold")
    seen: Counter[str] = Counter()
    entries: list[dict[str, Any]] = []
    for i, (cat_name, definition, examples) in enumerate(categories):
        base = " ".join(cat_name.split()) or f"Category {i + 1}"
        if len(base) < 2:
            base = f"Category {base}"
        seen[base.lower()] += 1
        unique = base if seen[base.lower()] == 1 else f"{base} ({seen[base.lower()]})"
        clean_examples = [e for e in dict.fromkeys(" ".join(x.split()) for x in examples) if e]
        entries.append(
            {
                "code": chr(ord("A") + i),
                "name": unique,
                "definition": " ".join(definition.split()) or "Harm reasons such as: " + "; ".join(clean_examples[:5]),
                "examples": clean_examples,
            }
        )
    return parse_taxonomy({"name": name, "version": version, "categories": entries}, source)


def _indent(text: str, prefix: str) -> str:
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(keepends=True))


def render_draft(result: DiscoverResult, *, method: str, model: str | None, max_left_out: int = 40) -> str:
    """The draft as YAML that `vhd.taxonomy.load_taxonomy` reads back.

    Comments say how it was made, how many annotations each cluster holds, and which reasons
    joined no category, so a reviewer can merge, split, rename and redefine before using it.
    """
    import yaml

    tax = result.taxonomy
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Draft taxonomy written by `vhd categorize --discover --method {method}` on {when}",
        f"# from {result.reasons} distinct harm reason(s) of {result.annotations} harmful annotation(s)"
        + (f"; named by {model}" if model else "; names are the most typical reasons (pass --model to name them)"),
        "# Review it: rename, merge or split categories, rewrite definitions, then bump `version` and",
        "# use it with `vhd categorize --taxonomy THIS_FILE`.",
    ]
    head = {"name": tax.name, "version": tax.version, "description": tax.description or "Draft from discovered reasons"}
    lines.append(yaml.safe_dump(head, sort_keys=False, allow_unicode=True, width=100).rstrip())
    lines.append("categories:")
    for i, cat in enumerate(tax.categories):
        if i < len(result.clusters):
            c = result.clusters[i]
            lines.append(f"  # {c.size} annotation(s), {len(c.reasons)} distinct reason(s)")
        entry = {"code": cat.code, "name": cat.name, "definition": cat.definition, "examples": list(cat.examples)}
        dumped = yaml.safe_dump([entry], sort_keys=False, allow_unicode=True, width=100)
        lines.append(_indent(dumped, "  ").rstrip())
    if result.left_out:
        lines.append(f"# {len(result.left_out)} reason(s) joined no category (rare, or unlike every group):")
        lines.extend(f"#   - {r}" for r in result.left_out[:max_left_out])
        if len(result.left_out) > max_left_out:
            lines.append(f"#   ... and {len(result.left_out) - max_left_out} more")
    return "\n".join(lines) + "\n"


def _placeholder() -> Taxonomy:
    return Taxonomy("draft", "0", (Category("A", "Placeholder", "-"),))


def _backend(spec: str, config: str | os.PathLike[str] | None) -> Any:
    from vhd.backends.registry import create_backend
    from vhd.config import load_config

    return create_backend(spec, load_config(None if config is None else Path(config)).backends)


async def _with(backend: Any, work: Any) -> Any:
    try:
        await backend.check()
        return await work
    finally:
        await backend.aclose()
