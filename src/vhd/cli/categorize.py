"""``vhd categorize``: harm categories for harmful annotations, or ``--discover`` a draft taxonomy."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from vhd.cli.executor_flags import add_executor_flags, executor_options
from vhd.cli.habits import examples
from vhd.errors import ConfigError
from vhd.fileio import printable
from vhd.registry import Registry, RegistryNames


def _categorize_methods() -> Registry[Any]:
    from vhd.categorize.assign import CATEGORIZE_METHODS

    return CATEGORIZE_METHODS


def _discovery_methods() -> Registry[Any]:
    from vhd.categorize.discovery import DISCOVERY_METHODS

    return DISCOVERY_METHODS


def _clusterers() -> Registry[Any]:
    from vhd.categorize.cluster import CLUSTERERS

    return CLUSTERERS


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="assign harm categories to harmful annotations (or --discover a taxonomy)",
        description=(
            "Give every harmful annotation in a store zero or more harm categories from its reason and the "
            "debaters' arguments, by sentence embeddings (embed, offline) or by asking a model (llm). Running "
            "it again only does what is missing. With --discover, draft a taxonomy from the reasons instead."
        ),
        epilog=examples(
            "vhd categorize --store run.db",
            "vhd categorize --store run.db --method llm --model openai:gpt-4o",
            "vhd categorize --discover --store run.db --model openai:gpt-4o --out draft.yaml",
            note=(
                "Default taxonomy: VHD11K's ten categories A-J. The verdicts (and so `vhd show` and every export) "
                "carry the categories of the last method run."
            ),
        ),
    )
    p.add_argument("--store", default="vhd.db", help="SQLite store (default: vhd.db)")
    method = p.add_argument("--method", help="categorize: %(methods)s; --discover: %(discovery_methods)s")
    # The lists are read when help is shown (argparse fills %(name)s from the action's attributes).
    vars(method).update(
        methods=RegistryNames(_categorize_methods, default="embed"),
        discovery_methods=RegistryNames(_discovery_methods, default="cluster"),
    )
    p.add_argument(
        "--model",
        metavar="SPEC",
        help="llm and --discover: BACKEND:MODEL; embed: a sentence-transformers model name or folder",
    )
    p.add_argument("--taxonomy", metavar="FILE", help="taxonomy file (YAML/TOML); default VHD11K's")
    p.add_argument(
        "--policy",
        metavar="FILE",
        help="a policy file (vhd annotate --policy): assign its categories (default: the --config file's policy)",
    )
    p.add_argument("--config", metavar="FILE", help="TOML or YAML config file ([backends.*], model)")
    p.add_argument("--config-hash", help="only annotations under this configuration (default: each sample's latest)")
    p.add_argument("--concurrency", type=int, default=16, metavar="N", help="llm: requests in flight (default 16)")
    p.add_argument("--calibrate", metavar="LABELS", help="embed: labels CSV with reason and categories columns")
    p.add_argument("--threshold", type=float, metavar="T", help="embed: threshold of every category (default 0.45)")
    p.add_argument("--retry-unparsed", action="store_true", help="ask again where an answer could not be read")
    p.add_argument("--redo", action="store_true", help="categorize again even where a result exists")
    p.add_argument("--limit", type=int, metavar="N", help="categorize at most N annotations now")
    p.add_argument("--with-media", action="store_true", help="llm: also show the model the image or video frames")
    d = p.add_argument_group("--discover")
    d.add_argument("--discover", action="store_true", help="draft a taxonomy from the store's harm reasons")
    d.add_argument(
        "--out", metavar="FILE", default="taxonomy_draft.yaml", help="draft file (default taxonomy_draft.yaml)"
    )
    d.add_argument("--embed-model", metavar="NAME", help="sentence-transformers model for clustering")
    clusterer = d.add_argument("--clusterer", default="agglomerative", help="default agglomerative")
    clusterer.choices = RegistryNames(_clusterers)  # set after add_argument: read only when used
    d.add_argument("--distance-threshold", type=float, metavar="D", help="agglomerative merge distance (default 0.95)")
    d.add_argument(
        "--min-cluster-size", type=int, default=2, metavar="N", help="smaller clusters are left out (default 2)"
    )
    d.add_argument("--max-categories", type=int, default=25, metavar="N", help="largest clusters kept (default 25)")
    d.add_argument("--sample", type=int, default=300, metavar="N", help="llm-only: reasons in the prompt (default 300)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_executor_flags(p, ship_media=False)
    p.set_defaults(handler=run)


def _event(message: str) -> None:
    print(f"vhd: {printable(message)}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    if args.discover:
        return _discover(args)
    from vhd.categorize.assign import categorize

    if args.method is not None and args.method not in _categorize_methods():
        raise ConfigError(
            f"--method {args.method} is for --discover; categorize takes {RegistryNames(_categorize_methods)}"
        )
    summary = categorize(
        args.store,
        method=args.method or "embed",
        model=args.model,
        taxonomy=args.taxonomy,
        config=args.config,
        policy=args.policy,
        concurrency=args.concurrency,
        calibrate=args.calibrate,
        threshold=args.threshold,
        config_hash=args.config_hash,
        retry_unparsed=args.retry_unparsed,
        redo=args.redo,
        limit=args.limit,
        with_media=args.with_media,
        on_event=None if args.json else _event,
        executor=args.executor,
        executor_options=executor_options(args),
    )
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
    else:
        print("\n".join(summary.lines()))
    return summary.exit_code()


def _discover(args: argparse.Namespace) -> int:
    from vhd.categorize.cluster import DEFAULT_DISTANCE
    from vhd.categorize.discovery import discover

    if args.method is not None and args.method not in _discovery_methods():
        raise ConfigError(
            f"--method {args.method} is for categorizing; --discover takes {RegistryNames(_discovery_methods)}"
        )
    result = discover(
        args.store,
        method=args.method or "cluster",
        model=args.model,
        embed_model=args.embed_model,
        out=args.out,
        config=args.config,
        clusterer=args.clusterer,
        distance_threshold=DEFAULT_DISTANCE if args.distance_threshold is None else args.distance_threshold,
        min_cluster_size=args.min_cluster_size,
        max_categories=args.max_categories,
        sample=args.sample,
        config_hash=args.config_hash,
        on_event=None if args.json else _event,
    )
    if args.json:
        data = {
            "out": str(result.out),
            "reasons": result.reasons,
            "annotations": result.annotations,
            "left_out": len(result.left_out),
            "taxonomy": result.taxonomy.to_dict(),
            "clusters": [{"size": c.size, "distinct": len(c.reasons), "typical": c.typical} for c in result.clusters],
        }
        print(json.dumps(data, indent=2))
        return 0
    print(
        f"{len(result.taxonomy)} categories from {result.reasons} distinct reason(s) "
        f"of {result.annotations} annotation(s):"
    )
    for i, cat in enumerate(result.taxonomy):
        size = f" ({result.clusters[i].size})" if i < len(result.clusters) else ""
        print(printable(f"  {cat.code}. {cat.name}{size}: " + "; ".join(cat.examples[:4])))
    if result.left_out:
        print(f"{len(result.left_out)} reason(s) joined no category (listed at the end of the file)")
    print(f"draft written to {result.out}: edit it, then `vhd categorize --taxonomy {result.out}`")
    return 0
