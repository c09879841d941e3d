"""Annotation as executor work: one debate per item, on whichever worker an executor picks.

`vhd.annotate.loop` plans (claims leases) and commits on the driver either way; with an
executor other than ``local`` it sends each claimed sample to a `vhd.execution.Pool` running
`DebateWork` instead of debating it in its own loop. The work carries the configuration as the
driver resolved it (every role's model spelled out, prompt files read, in-context examples
encoded), so workers need neither the config file nor ``$VHD_MODEL``; API keys stay in the
environment variables the backends name (`DebateWork.env_vars`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from vhd.boundary import ItemFailure, guarded
from vhd.config import AnnotateConfig
from vhd.errors import MediaError, WorkerLostError
from vhd.execution import Executor, Pool, Work, named_env
from vhd.records import Kind, MediaItem, Role, Sample

if TYPE_CHECKING:
    from vhd.debate.engine import Debate, DebateResult
    from vhd.debate.icl import ICLExample
    from vhd.debate.prompts import Prompts
    from vhd.media.load import LoadedSample, MediaSettings


@dataclass
class DebateItem:
    """One claimed sample for a worker: by path, or (``ship_media``) already loaded and encoded.

    Attributes:
        sample_id: The id the driver claimed.
        item: The media to load on the worker (shared filesystem).
        loaded: The sample and its encoded images, loaded on the driver.
    """

    sample_id: str
    item: MediaItem | None = None
    loaded: LoadedSample | None = None


@dataclass
class DebateOutcome:
    """What a worker sends back for one item.

    Attributes:
        sample: The sample record (None when the media could not be loaded).
        result: The debate (None when the media could not be loaded).
        started: When the debate started (epoch seconds).
        media_error: Why the media could not be loaded, if it could not.
        lost: Why the sample was not debated: the workers running it kept dying (run again).
        decided_by: For a video judged by segments (``[video] segments``): what decided it.
        capped: Segments the call cap left at their screen verdict.
        fallback: Why the video could not be segmented, when it could not.
    """

    sample: Sample | None
    result: DebateResult | None
    started: float = 0.0
    media_error: str | None = None
    lost: str | None = None
    decided_by: str | None = None
    capped: int = 0
    fallback: str | None = None


class DebateWork(Work[DebateItem, DebateOutcome]):
    """Debates samples with the driver's resolved configuration; set up once per worker.

    Args:
        config: The run's configuration, resolved on the driver.
        prompts: The templates (files already read).
        examples: The judge's in-context examples (already encoded).
        settings: How media are loaded and encoded.
        env: Names of the environment variables the backends read (keys, endpoints).
        retry_budget: `vhd.debate.engine.Debate`'s ``retry_budget``.
    """

    def __init__(
        self,
        config: AnnotateConfig,
        prompts: Prompts,
        examples: Sequence[ICLExample],
        settings: MediaSettings,
        env: Sequence[str] = (),
        retry_budget: int = 1,
    ) -> None:
        roles = {role.value: config.role_model(role.value) for role in Role}
        self.config = config.with_overrides(**roles)  # no $VHD_MODEL lookup on the workers
        self.prompts = prompts
        self.examples = list(examples)
        self.settings = settings
        self.env = list(env)
        self.retry_budget = retry_budget
        self.debate: Debate | None = None

    def env_vars(self) -> list[str]:
        """The variables the backends read (API keys by name, endpoint defaults)."""
        return self.env

    async def setup(self) -> None:
        """Build and check this worker's backends (an ``hf`` model loads here, on the worker's GPU)."""
        from vhd.backends.base import check_video_input
        from vhd.backends.registry import build_backends
        from vhd.debate.engine import Debate

        backends = build_backends(self.config)
        for backend in {id(b): b for b in backends.values()}.values():
            await backend.check()
            check_video_input(backend)
        self.debate = Debate(backends, self.config, self.prompts, self.examples, retry_budget=self.retry_budget)

    async def run(self, item: DebateItem) -> DebateOutcome:
        """Load (unless shipped) and debate one sample; a media error comes back as its reason.

        A video file judged by segments is decoded once, by the segment pass (see `segmented`).
        """
        from vhd.media.load import describe_sample, load_sample

        assert self.debate is not None, "setup() first"
        media = item.item
        segmented = self.config.video.segments and media is not None and media.kind is Kind.VIDEO
        if segmented and item.loaded is None and media is not None and Path(media.path).is_file():
            sample = await asyncio.to_thread(guarded, describe_sample, media)
            if isinstance(sample, ItemFailure):
                return DebateOutcome(None, None, media_error=sample.reason)
            return await self.segmented(media, sample, time.time())
        loaded = item.loaded
        if loaded is None:
            assert item.item is not None
            read = await asyncio.to_thread(guarded, load_sample, item.item, self.settings)
            if isinstance(read, ItemFailure):
                return DebateOutcome(None, None, media_error=read.reason)
            loaded = read
        started = time.time()
        result = await self.debate.run(loaded.sample.kind, loaded.images, loaded.clip)
        return DebateOutcome(loaded.sample, result, started)

    async def segmented(self, item: MediaItem, sample: Sample, started: float) -> DebateOutcome:
        """A video judged segment by segment on this worker (`vhd.annotate.segmented`), as one item.

        Its one decode is the segment pass; the whole-video protocol's frames are read only when
        the video cannot be segmented.
        """
        from vhd.annotate.segmented import WholeVideo
        from vhd.debate.engine import DebateResult
        from vhd.debate.segmented import judge_video

        assert self.debate is not None
        whole_video = WholeVideo(item, self.settings)
        try:
            judged = await judge_video(
                item.path, self.config.video, self.settings, debate=self.debate, whole_video=whole_video
            )
        except MediaError as exc:
            return DebateOutcome(None, None, media_error=str(exc))
        result = DebateResult(judged.verdict, judged.turns, judged.usage, judged.error, judged.retryable)
        return DebateOutcome(
            whole_video.sample(sample),
            result,
            started,
            decided_by=judged.decided_by,
            capped=len(judged.capped),
            fallback=judged.fallback,
        )

    async def aclose(self) -> None:
        """Close the backends."""
        if self.debate is not None:
            for backend in {id(b): b for b in self.debate.backends.values()}.values():
                with suppress(Exception):
                    await backend.aclose()


@asynccontextmanager
async def remote_pool(
    executor: Executor | None,
    config: AnnotateConfig,
    prompts: Prompts,
    examples: Sequence[ICLExample],
    settings: MediaSettings,
    *,
    retry_budget: int = 1,
) -> AsyncIterator[Pool[DebateItem, DebateOutcome] | None]:
    """A pool of `DebateWork` on ``executor`` (None for in-process annotation: yields None).

    ``concurrency`` is shared among the workers: each runs ``ceil(concurrency / workers)``
    samples at once unless the executor's options say otherwise.
    """
    if executor is None or executor.in_process:
        yield None
        return
    if executor.options.in_flight is None:
        share = math.ceil(config.concurrency / max(1, executor.options.workers))
        executor.options = replace(executor.options, in_flight=share)
    work = DebateWork(config, prompts, examples, settings, named_env(config.backends), retry_budget)
    async with executor.pool(work) as pool:
        yield pool


async def debate_on(
    pool: Pool[DebateItem, DebateOutcome], item: MediaItem, sample_id: str, settings: MediaSettings, *, ship: bool
) -> DebateOutcome:
    """Debate one claimed sample on the pool: by path, or loaded here and shipped as bytes.

    Never raises for the sample's sake: unreadable media and a sample whose workers kept dying
    come back as an outcome without a result (``media_error``, ``lost``).
    """
    from vhd.media.load import load_sample

    try:
        if not ship:
            return await pool.run(DebateItem(sample_id, item=item))
        loaded = await asyncio.to_thread(guarded, load_sample, item, settings)
        if isinstance(loaded, ItemFailure):
            return DebateOutcome(None, None, media_error=loaded.reason)
        return await pool.run(DebateItem(sample_id, loaded=loaded))
    except WorkerLostError as exc:
        return DebateOutcome(None, None, lost=str(exc))
