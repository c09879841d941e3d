"""`vhd.annotate`: annotate images and videos by debate, resumably, into a store.

The library call behind ``vhd annotate``. Every finished sample is committed to the store at
once; running the same call again makes no model call for samples that already have a final
verdict under the same configuration, and retries those that errored.

One shape for every judging entry point: the model settings are the configuration
(`vhd.config.AnnotateConfig`, a file or an object) with per-call keyword overrides
(`vhd.config.ConfigOverrides`); how the run goes is `RunOptions`; ``progress`` and ``on_event``
report. ``vhd.compare.compare``, ``vhd.icl.search_icl``, ``vhd.align.align_ratings`` and
``vhd.compare.injection`` take the same.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Unpack, cast

from vhd.annotate.options import RunOptions, split_legacy
from vhd.annotate.summary import RunSummary
from vhd.config import AnnotateConfig, ConfigOverrides, apply_overrides
from vhd.errors import ConfigError
from vhd.progress import ProgressFn
from vhd.store.sqlite import StoreLike, store_path


def annotate_config(
    config: AnnotateConfig | str | os.PathLike[str] | None, **overrides: Unpack[ConfigOverrides]
) -> AnnotateConfig:
    """The configuration `annotate` runs with: the file (or object) with the overrides applied.

    Raises:
        vhd.errors.ConfigError: Unreadable config file or a bad value.
    """
    return apply_overrides(config, overrides)


Inputs = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""What `annotate` takes as inputs: one path or a list of them."""


def input_list(inputs: Inputs) -> list[str | Path]:
    """``inputs`` as a list of paths: one path (a ``str`` is one path, never its characters) or many."""
    if isinstance(inputs, str | os.PathLike):
        return [Path(inputs)]
    return [p if isinstance(p, str) else Path(p) for p in inputs]


def annotate(
    inputs: Inputs,
    *,
    store: StoreLike = "vhd.db",
    config: AnnotateConfig | str | os.PathLike[str] | None = None,
    options: RunOptions | None = None,
    progress: bool | ProgressFn = False,
    on_event: Callable[[str], None] | None = None,
    **overrides: Unpack[ConfigOverrides],
) -> RunSummary:
    """Annotate images, videos, frame folders and manifests by model debate.

    Args:
        inputs: A file, folder (recursive) or manifest (CSV/JSONL with a ``path`` column), or a
            list of them.
        store: The store: its SQLite file (created if missing; reused to resume), or an open
            `vhd.store.Store` (the run opens its file again for its own connection).
        config: An `AnnotateConfig`, or a TOML/YAML config file path.
        options: How the run goes (`RunOptions`: retries, re-hashing, a dry run, a cost cap, a
            cascade, the batch API, the executor, ...); none of it but the cascade changes the
            configuration hash.
        progress: True shows a live progress bar on stderr (on a terminal); a `vhd.progress.ProgressFn`
            receives the counts instead.
        on_event: Called with one-line messages (interruption notices and the like).
        **overrides: Model settings over the configuration (`vhd.config.ConfigOverrides`):
            ``model`` (``BACKEND:MODEL`` for every role), ``affirmative``, ``negative``,
            ``debaters``, ``judge``, ``icl``, ``concurrency`` (default 16), ``rounds`` (default 2),
            ``segments``, ``max_calls_per_video``, ``video_input`` (``frames`` or ``native``),
            ``policy`` (a policy file, `vhd.policy`; default: the VHD11K paper's definition).

    Works inside a running event loop too (a notebook cell): the run then goes on its own loop in
    a worker thread (`vhd.aio.run_sync`); async code can ``await`` `annotate_async` instead. The
    run settings of 0.1, passed one by one (``dry_run=True``), still work until 0.3, with a
    `DeprecationWarning`.

    Returns:
        The run's summary (its ``config_hash`` reads the verdicts back:
        ``store.verdicts(summary.config_hash)``); ``summary.exit_code()`` gives the CLI's exit status.

    Raises:
        vhd.errors.ConfigError: Bad configuration or inputs, or ``max_cost`` without prices
            (nothing was run).
        vhd.errors.BackendUnavailableError: A backend cannot work at all (nothing was run).
    """
    from vhd.aio import run_sync

    opts, rest = split_legacy(options, dict(overrides), "annotate")
    return run_sync(
        _annotate(
            inputs, store=store, config=config, options=opts, progress=progress, on_event=on_event, overrides=rest
        )
    )


async def annotate_async(
    inputs: Inputs,
    *,
    store: StoreLike = "vhd.db",
    config: AnnotateConfig | str | os.PathLike[str] | None = None,
    options: RunOptions | None = None,
    progress: bool | ProgressFn = False,
    on_event: Callable[[str], None] | None = None,
    **overrides: Unpack[ConfigOverrides],
) -> RunSummary:
    """Annotate by model debate, awaited: `annotate` for code already inside an event loop.

    ``await vhd.annotate_async([...], model=..., store=...)`` from a notebook cell or an async
    service runs the debate on the caller's loop. The arguments, result and errors are those of
    `annotate`; ``vhd.aannotate`` is the same function under its 0.1 name.
    """
    opts, rest = split_legacy(options, dict(overrides), "annotate_async")
    return await _annotate(
        inputs, store=store, config=config, options=opts, progress=progress, on_event=on_event, overrides=rest
    )


aannotate = annotate_async
"""`annotate_async` under its 0.1 name."""


async def _annotate(
    inputs: Inputs,
    *,
    store: StoreLike,
    config: AnnotateConfig | str | os.PathLike[str] | None,
    options: RunOptions,
    progress: bool | ProgressFn,
    on_event: Callable[[str], None] | None,
    overrides: dict[str, Any],
) -> RunSummary:
    from vhd.annotate.loop import run
    from vhd.execution import executor as find_executor

    cfg = apply_overrides(config, cast("ConfigOverrides", overrides))
    cfg.check_max_cost(options.max_cost)
    runner = find_executor(options.executor, options.executor_options)
    if options.stage_wise and not runner.in_process:
        raise ConfigError("--stage-wise runs the debate in this process; leave out --executor, or drop --stage-wise")
    if options.batch_api and not runner.in_process:
        raise ConfigError("--batch-api runs in this process; leave out --executor, or drop --batch-api")
    start = time.perf_counter()
    summary = await run(
        input_list(inputs),
        cfg,
        store=store_path(store),
        options=options,
        executor=None if runner.in_process else runner,
        progress=progress,
        on_event=on_event or (lambda _msg: None),
    )
    summary.elapsed_s = time.perf_counter() - start
    return summary
