"""`vhd.annotate`: annotate images and videos by debate, resumably, into a store.

The library call behind ``vhd annotate``. Every finished sample is committed to the store at
once; running the same call again makes no model call for samples that already have a final
verdict under the same configuration, and retries those that errored.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vhd.annotate.summary import RunSummary
from vhd.config import AnnotateConfig, load_config
from vhd.errors import ConfigError
from vhd.progress import ProgressFn
from vhd.store.sqlite import StoreLike, store_path

if TYPE_CHECKING:
    from vhd.annotate.cascade import Cascade
    from vhd.execution import Executor, ExecutorOptions


def annotate_config(
    config: AnnotateConfig | str | Path | None,
    *,
    model: str | None = None,
    affirmative: str | None = None,
    negative: str | None = None,
    debaters: str | None = None,
    judge: str | None = None,
    concurrency: int | None = None,
    icl: str | Path | None = None,
    rounds: int | None = None,
) -> AnnotateConfig:
    """The configuration `annotate` runs with: the file (or object) with the flags applied.

    Raises:
        vhd.errors.ConfigError: Unreadable config file or a bad value.
    """
    cfg = config if isinstance(config, AnnotateConfig) else load_config(config)
    debate = cfg.debate.model_copy(update={"rounds": rounds}) if rounds is not None else cfg.debate
    return cfg.with_overrides(
        model=model,
        affirmative=affirmative,
        negative=negative,
        debaters=debaters,
        judge=judge,
        concurrency=concurrency,
        icl=str(icl) if icl is not None else None,
        debate=debate.model_dump(),
    )


def annotate(
    inputs: Sequence[str | Path],
    *,
    model: str | None = None,
    affirmative: str | None = None,
    negative: str | None = None,
    debaters: str | None = None,
    judge: str | None = None,
    store: StoreLike = "vhd.db",
    config: AnnotateConfig | str | Path | None = None,
    concurrency: int | None = None,
    icl: str | Path | None = None,
    rounds: int | None = None,
    retry_unparsed: bool = False,
    rehash: bool = False,
    frame_folders: bool = False,
    include_duplicates: bool = False,
    allow_outside_paths: bool = False,
    dry_run: bool = False,
    max_cost: float | None = None,
    progress: bool | ProgressFn = False,
    command: str = "",
    on_event: Callable[[str], None] | None = None,
    cascade: Cascade | None = None,
    batch_api: bool = False,
    batch_poll_s: float = 30.0,
    batch_quiet_s: float = 0.5,
    stage_wise: bool = False,
    executor: str | Executor = "local",
    executor_options: ExecutorOptions | None = None,
) -> RunSummary:
    """Annotate images, videos, frame folders and manifests by model debate.

    Args:
        inputs: Files, folders (recursive) and manifests (CSV/JSONL with a ``path`` column).
        model: ``BACKEND:MODEL`` for every role (e.g. ``openai:gpt-4o``).
        affirmative: Model spec for the affirmative debater only.
        negative: Model spec for the negative debater only.
        debaters: Model spec for both debaters.
        judge: Model spec for the judge.
        store: The store: its SQLite file (created if missing; reused to resume), or an open
            `vhd.store.Store` (the run opens its file again for its own connection).
        config: An `AnnotateConfig`, or a TOML/YAML config file path.
        concurrency: Samples in flight at once (default 16).
        icl: In-context examples file or folder for the judge.
        rounds: Debate rounds (default 2).
        retry_unparsed: Ask again for samples whose judge reply could not be read or that ended
            ``truncated`` (a call cut off by the token limit is then asked once more with 4x its cap).
        rehash: Read and hash every input file again instead of trusting the store's stat index
            (by default a file whose size, times and inode are unchanged since it was last hashed
            is not read again).
        frame_folders: Treat folders of numbered frames (``<stem>_0000.png`` ...) as videos.
        include_duplicates: Annotate samples that ``vhd dedup --apply`` marked as duplicates of a
            kept sample (removed and quarantined samples are never annotated).
        allow_outside_paths: Accept manifest rows whose paths lead outside the manifest's folder
            (rows naming a sample the store holds are always accepted).
        dry_run: Count samples and estimate calls, tokens and cost; send nothing.
        max_cost: Stop cleanly once this many dollars are spent; every role's model needs a
            ``[prices]`` entry in the config, else nothing runs.
        progress: True shows a live progress bar on stderr (on a terminal); a `vhd.progress.ProgressFn`
            receives the counts instead.
        command: The command line, recorded with the run.
        on_event: Called with one-line messages (interruption notices and the like).
        cascade: Detector stages that decide the clear samples before the debate
            (`vhd.annotate.cascade`); the configuration hash includes them. A dry run estimates
            as if every sample reached the debate.
        batch_api: Send the debate's calls through the endpoint's batch API (`vhd.annotate.batch`):
            stage by stage, resumable across days (batch ids in the store); every role must use
            the ``openai`` backend.
        batch_poll_s: Seconds between status checks of a batch in progress.
        batch_quiet_s: Seconds without a new request after which pending requests go out as a batch.
        stage_wise: Debate in cohorts of ``concurrency`` samples, stage by stage (every first
            turn, then every second turn, ..., then every judge: `vhd.debate.stagewise`), so a
            batching backend sees large batches of one role. Same verdicts as per-sample order;
            a sample is committed when its judge answers.
        executor: Where samples are debated: ``local`` (this process), ``ray`` (Ray actors,
            ``pip install 'vhd[ray]'``), another name registered in `vhd.execution.EXECUTORS`,
            or an `vhd.execution.Executor`. Planning, leases and store writes stay here.
        executor_options: Workers, Ray address, ``ship_media``, CPUs/GPUs per worker.

    Works inside a running event loop too (a notebook cell): the run then goes on its own loop in
    a worker thread (`vhd.aio.run_sync`); async code can ``await`` `aannotate` instead.

    Returns:
        The run's summary; ``summary.exit_code()`` gives the CLI's exit status.

    Raises:
        vhd.errors.ConfigError: Bad configuration or inputs, or ``max_cost`` without prices
            (nothing was run).
        vhd.errors.BackendUnavailableError: A backend cannot work at all (nothing was run).
    """
    from vhd.aio import run_sync

    return run_sync(
        aannotate(
            inputs,
            model=model,
            affirmative=affirmative,
            negative=negative,
            debaters=debaters,
            judge=judge,
            store=store,
            config=config,
            concurrency=concurrency,
            icl=icl,
            rounds=rounds,
            retry_unparsed=retry_unparsed,
            rehash=rehash,
            frame_folders=frame_folders,
            include_duplicates=include_duplicates,
            allow_outside_paths=allow_outside_paths,
            dry_run=dry_run,
            max_cost=max_cost,
            progress=progress,
            command=command,
            on_event=on_event,
            cascade=cascade,
            batch_api=batch_api,
            batch_poll_s=batch_poll_s,
            batch_quiet_s=batch_quiet_s,
            stage_wise=stage_wise,
            executor=executor,
            executor_options=executor_options,
        )
    )


async def aannotate(
    inputs: Sequence[str | Path],
    *,
    model: str | None = None,
    affirmative: str | None = None,
    negative: str | None = None,
    debaters: str | None = None,
    judge: str | None = None,
    store: StoreLike = "vhd.db",
    config: AnnotateConfig | str | Path | None = None,
    concurrency: int | None = None,
    icl: str | Path | None = None,
    rounds: int | None = None,
    retry_unparsed: bool = False,
    rehash: bool = False,
    frame_folders: bool = False,
    include_duplicates: bool = False,
    allow_outside_paths: bool = False,
    dry_run: bool = False,
    max_cost: float | None = None,
    progress: bool | ProgressFn = False,
    command: str = "",
    on_event: Callable[[str], None] | None = None,
    cascade: Cascade | None = None,
    batch_api: bool = False,
    batch_poll_s: float = 30.0,
    batch_quiet_s: float = 0.5,
    stage_wise: bool = False,
    executor: str | Executor = "local",
    executor_options: ExecutorOptions | None = None,
) -> RunSummary:
    """Annotate by model debate, awaited: `annotate` for code already inside an event loop.

    ``await vhd.aannotate([...], model=..., store=...)`` from a notebook cell or an async
    service runs the debate on the caller's loop. The arguments, result and errors are those of
    `annotate`.
    """
    from vhd.annotate.loop import run
    from vhd.execution import executor as find_executor

    cfg = annotate_config(
        config,
        model=model,
        affirmative=affirmative,
        negative=negative,
        debaters=debaters,
        judge=judge,
        concurrency=concurrency,
        icl=icl,
        rounds=rounds,
    )
    cfg.check_max_cost(max_cost)
    runner = find_executor(executor, executor_options)
    if stage_wise and not runner.in_process:
        raise ConfigError("--stage-wise runs the debate in this process; leave out --executor, or drop --stage-wise")
    if (batch_api or cascade is not None) and not runner.in_process:
        flag = "--batch-api" if batch_api else "--cascade"
        raise ConfigError(f"{flag} runs in this process; leave out --executor, or drop {flag}")
    start = time.perf_counter()
    summary = await run(
        inputs,
        cfg,
        store=store_path(store),
        retry_unparsed=retry_unparsed,
        rehash=rehash,
        frame_folders=frame_folders,
        include_duplicates=include_duplicates,
        allow_outside_paths=allow_outside_paths,
        dry_run=dry_run,
        max_cost=max_cost,
        progress=progress,
        command=command,
        on_event=on_event or (lambda _msg: None),
        cascade=cascade,
        batch_api=batch_api,
        batch_poll_s=batch_poll_s,
        batch_quiet_s=batch_quiet_s,
        stage_wise=stage_wise,
        executor=None if runner.in_process else runner,
    )
    summary.elapsed_s = time.perf_counter() - start
    return summary


annotate_async = aannotate
"""`aannotate` under the name the other async entry points follow (``annotate`` / ``annotate_async``)."""
