"""How an annotation run goes, apart from what it decides: `RunOptions`.

The model settings (`vhd.config.AnnotateConfig`, and per call `vhd.config.ConfigOverrides`)
decide the verdicts and make the configuration hash. `RunOptions` are everything else a run is
told: retries, re-hashing, discovery rules, a dry run, a cost cap, batching, where the work runs.
Changing one never makes a finished verdict count as missing (the cascade, which does decide
verdicts, enters the hash through its own identity).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vhd.lazy import REMOVAL_RELEASE

if TYPE_CHECKING:
    from vhd.annotate.cascade import Cascade
    from vhd.execution import Executor, ExecutorOptions


@dataclass(frozen=True)
class RunOptions:
    """Run settings of `vhd.annotate` (and of the workflows that annotate: compare, icl, align).

    Attributes:
        retry_unparsed: Ask again for samples whose judge reply could not be read or that ended
            ``truncated`` (a call cut off by the token limit is then asked once more with 4x its cap).
        rehash: Read and hash every input file again instead of trusting the store's stat index.
        frame_folders: Treat folders of numbered frames (``<stem>_0000.png`` ...) as videos.
        include_duplicates: Annotate samples that ``vhd dedup --apply`` marked as duplicates.
        allow_outside_paths: Accept manifest rows whose paths lead outside the manifest's folder.
        dry_run: Count samples and estimate calls, tokens and cost; send nothing.
        max_cost: Stop cleanly once this many dollars are spent (every role needs a ``[prices]`` entry).
        cascade: Detector stages that decide the clear samples before the debate
            (`vhd.annotate.cascade`); the configuration hash includes them.
        batch_api: Send the debate's calls through the endpoint's batch API, stage by stage.
        batch_poll_s: Seconds between status checks of a batch in progress.
        batch_quiet_s: Seconds without a new request after which pending requests go out as a batch.
        stage_wise: Debate in cohorts of ``concurrency`` samples, stage by stage.
        executor: Where samples are debated: ``local``, ``ray``, another registered name, or an
            `vhd.execution.Executor`.
        executor_options: Workers, Ray address, ``ship_media``, CPUs/GPUs per worker.
        command: The command line, recorded with the run.
    """

    retry_unparsed: bool = False
    rehash: bool = False
    frame_folders: bool = False
    include_duplicates: bool = False
    allow_outside_paths: bool = False
    dry_run: bool = False
    max_cost: float | None = None
    cascade: Cascade | None = None
    batch_api: bool = False
    batch_poll_s: float = 30.0
    batch_quiet_s: float = 0.5
    stage_wise: bool = False
    executor: str | Executor = "local"
    executor_options: ExecutorOptions | None = None
    command: str = ""

    def replace(self, **changes: Any) -> RunOptions:
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)


RUN_OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(RunOptions))
"""The keyword names `RunOptions` has: 0.1 passed them to ``vhd.annotate`` one by one."""


def split_legacy(
    options: RunOptions | None, keywords: dict[str, Any], function: str
) -> tuple[RunOptions, dict[str, Any]]:
    """``(options, the rest)``: run settings passed one by one in 0.1 style folded into ``options``.

    Each such keyword warns (`DeprecationWarning`, at the caller's caller) and is kept until
    `vhd.lazy.REMOVAL_RELEASE`; the rest (the configuration overrides) are returned as they are.

    Raises:
        TypeError: A keyword both in ``options`` and one by one cannot be told apart: refused.
    """
    legacy = {k: keywords.pop(k) for k in list(keywords) if k in RUN_OPTION_NAMES}
    if not legacy:
        return options or RunOptions(), keywords
    if options is not None:
        raise TypeError(f"{function}() takes run settings in options=RunOptions(...) or one by one, not both")
    warnings.warn(
        f"{function}({', '.join(f'{k}=...' for k in sorted(legacy))}): pass "
        f"options=RunOptions({', '.join(f'{k}=...' for k in sorted(legacy))}) instead; "
        f"the old keywords go in vhd {REMOVAL_RELEASE}",
        DeprecationWarning,
        stacklevel=3,
    )
    return RunOptions(**legacy), keywords
