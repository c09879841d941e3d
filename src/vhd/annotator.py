"""`vhd.annotate`: annotate images and videos by debate, resumably, into a store.

The library call behind ``vhd annotate``. Every finished sample is committed to the store at
once; running the same call again makes no model call for samples that already have a final
verdict under the same configuration, and retries those that errored.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.backends.base import Backend
from vhd.config import AnnotateConfig, load_config
from vhd.records import Role, Status, Usage

if TYPE_CHECKING:
    from vhd.debate.icl import ICLExample
    from vhd.debate.prompts import Prompts

SECRET_HINTS = ("key", "token", "secret", "password", "authorization")


@dataclass
class RunSummary:
    """What an annotation run did.

    Attributes:
        run_id: The store's run id (None for a dry run).
        store: Path of the store.
        found: Readable samples found in the inputs (after de-duplication by content).
        already_done: Samples that already had a final verdict and were not asked again.
        annotated: Samples that got a final verdict in this run.
        harmful: Of those, harmful (refusals included).
        unharmful: Of those, unharmful.
        refused: Of those, decided by a refusal.
        unparsed: Of those, whose judge reply could not be read.
        errors: Samples whose model calls failed (retried on the next run).
        skipped: Input files that could not be used, with reasons in the store.
        duplicates: Inputs whose content was already among the samples.
        excluded: Samples left out because the store marks them removed, quarantined, or a
            duplicate of a kept sample (reasons in ``skip_reasons``).
        remaining: Samples not attempted (interrupted or stopped at the budget).
        usage: Calls, tokens and cost of this run.
        elapsed_s: Wall time.
        interrupted: Stopped by Ctrl-C.
        budget_reached: Stopped by ``max_cost``.
        dry_run: Nothing was sent; see ``estimate``.
        estimate: For a dry run, the expected calls, tokens and cost.
        skip_reasons: ``(path, reason)`` for each skipped input (first 1000).
    """

    run_id: str | None
    store: str
    found: int = 0
    already_done: int = 0
    annotated: int = 0
    harmful: int = 0
    unharmful: int = 0
    refused: int = 0
    unparsed: int = 0
    errors: int = 0
    skipped: int = 0
    duplicates: int = 0
    excluded: int = 0
    remaining: int = 0
    usage: Usage = field(default_factory=Usage)
    elapsed_s: float = 0.0
    interrupted: bool = False
    budget_reached: bool = False
    dry_run: bool = False
    estimate: dict[str, Any] | None = None
    skip_reasons: list[tuple[str, str]] = field(default_factory=list)

    def exit_code(self, strict: bool = False) -> int:
        """0 when every readable sample has a final verdict, 1 when work remains, 130 after Ctrl-C."""
        if self.interrupted:
            return 130
        if self.errors or self.remaining or (strict and self.skipped):
            return 1
        return 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (stored with the run)."""
        d = asdict(self)
        d["skip_reasons"] = d["skip_reasons"][:50]
        return d


def redact(value: Any) -> Any:
    """Drop values whose key looks like a secret (keys, tokens, passwords) from nested data."""
    if isinstance(value, dict):
        return {
            k: (
                "<redacted>"
                if any(h in str(k).lower() for h in SECRET_HINTS) and not str(k).endswith("_env")
                else redact(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def build_backends(config: AnnotateConfig) -> dict[Role, Backend]:
    """Create one backend per distinct spec; roles with the same spec share an instance."""
    from vhd.backends.registry import create_backend

    by_spec: dict[str, Backend] = {}
    roles: dict[Role, Backend] = {}
    for role in Role:
        spec = config.role_model(role.value)
        if spec not in by_spec:
            by_spec[spec] = create_backend(spec, config.backends)
        roles[role] = by_spec[spec]
    return roles


def config_identity(
    config: AnnotateConfig, backends: dict[Role, Backend], prompts: Prompts, examples: Sequence[ICLExample]
) -> dict[str, Any]:
    """Everything that changes a debate's messages or decoding, as plain data."""
    from vhd.debate.icl import examples_identity

    roles = {}
    for role in Role:
        temperature, max_tokens = config.role_settings(role.value)
        roles[role.value] = {"backend": backends[role].identity(), "temperature": temperature, "max_tokens": max_tokens}
    return {
        "roles": roles,
        "debate": config.debate.model_dump(),
        "media": config.media.model_dump(),
        "prompts": prompts.templates,
        "icl": examples_identity(examples),
    }


def digest(data: Any) -> str:
    """sha256 of canonical JSON."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def annotate(
    inputs: Sequence[str | Path],
    *,
    model: str | None = None,
    affirmative: str | None = None,
    negative: str | None = None,
    debaters: str | None = None,
    judge: str | None = None,
    store: str | Path = "vhd.db",
    config: AnnotateConfig | str | Path | None = None,
    concurrency: int | None = None,
    icl: str | Path | None = None,
    rounds: int | None = None,
    retry_unparsed: bool = False,
    frame_folders: bool = False,
    include_duplicates: bool = False,
    dry_run: bool = False,
    max_cost: float | None = None,
    progress: bool = False,
    command: str = "",
    on_event: Callable[[str], None] | None = None,
) -> RunSummary:
    """Annotate images, videos, frame folders and manifests by model debate.

    Args:
        inputs: Files, folders (recursive) and manifests (CSV/JSONL with a ``path`` column).
        model: ``BACKEND:MODEL`` for every role (e.g. ``openai:gpt-4o``).
        affirmative: Model spec for the affirmative debater only.
        negative: Model spec for the negative debater only.
        debaters: Model spec for both debaters.
        judge: Model spec for the judge.
        store: SQLite store path (created if missing; reused to resume).
        config: An `AnnotateConfig`, or a TOML/YAML config file path.
        concurrency: Samples in flight at once (default 16).
        icl: In-context examples file or folder for the judge.
        rounds: Debate rounds (default 2).
        retry_unparsed: Ask again for samples whose judge reply could not be read.
        frame_folders: Treat folders of numbered frames (``<stem>_0000.png`` ...) as videos.
        include_duplicates: Annotate samples that ``vhd dedup --apply`` marked as duplicates of a
            kept sample (removed and quarantined samples are never annotated).
        dry_run: Count samples and estimate calls, tokens and cost; send nothing.
        max_cost: Stop cleanly once this many dollars are spent (needs prices in the config).
        progress: Show a live progress bar on stderr.
        command: The command line, recorded with the run.
        on_event: Called with one-line messages (interruption notices and the like).

    Returns:
        The run's summary; ``summary.exit_code()`` gives the CLI's exit status.

    Raises:
        vhd.errors.ConfigError: Bad configuration or inputs (nothing was run).
        vhd.errors.BackendUnavailableError: A backend cannot work at all (nothing was run).
    """
    from vhd.runner import run

    cfg = config if isinstance(config, AnnotateConfig) else load_config(config)
    debate = cfg.debate.model_copy(update={"rounds": rounds}) if rounds is not None else cfg.debate
    cfg = cfg.with_overrides(
        model=model,
        affirmative=affirmative,
        negative=negative,
        debaters=debaters,
        judge=judge,
        concurrency=concurrency,
        icl=str(icl) if icl is not None else None,
        debate=debate.model_dump(),
    )
    start = time.perf_counter()
    summary = asyncio.run(
        run(
            inputs,
            cfg,
            store=Path(store),
            retry_unparsed=retry_unparsed,
            frame_folders=frame_folders,
            include_duplicates=include_duplicates,
            dry_run=dry_run,
            max_cost=max_cost,
            progress=progress,
            command=command,
            on_event=on_event or (lambda _msg: None),
        )
    )
    summary.elapsed_s = time.perf_counter() - start
    return summary


def count_status(summary: RunSummary, status: Status, harmful: bool | None) -> None:
    """Add one finished sample to a summary."""
    if status is Status.ERROR:
        summary.errors += 1
        return
    summary.annotated += 1
    if status is Status.UNPARSED:
        summary.unparsed += 1
        return
    if status is Status.REFUSED:
        summary.refused += 1
    if harmful is True:
        summary.harmful += 1
    elif harmful is False:
        summary.unharmful += 1
