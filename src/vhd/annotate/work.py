"""Annotation as executor work: one debate per item, on whichever worker an executor picks.

`vhd.annotate.loop` plans (claims leases) and commits on the driver either way; with an
executor other than ``local`` it sends each claimed sample to a `vhd.execution.Pool` running
`DebateWork` instead of debating it in its own loop. The work carries the configuration as the
driver resolved it (every role's model spelled out, prompt files read, in-context examples
encoded), so workers need neither the config file nor ``$VHD_MODEL``; API keys stay in the
environment variables the backends name (`DebateWork.env_vars`).

A video judged by segments (``[video] segments``) is not sent whole: the driver decodes it and
judges it (`vhd.debate.segmented.judge_video`), and only its segments' screens and debates go to
the pool, one `SegmentStep` item each (`PoolCalls`), so one video's segments run on several
workers and each is stored on the driver as it comes back.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from vhd.boundary import ItemFailure, guarded
from vhd.config import AnnotateConfig
from vhd.errors import WorkerLostError
from vhd.execution import Executor, Pool, Work, named_env
from vhd.records import Kind, MediaItem, Role, Sample, Usage

if TYPE_CHECKING:
    from vhd.debate.engine import Debate, DebateResult
    from vhd.debate.icl import ICLExample
    from vhd.debate.prompts import Prompts
    from vhd.media.encoded import EncodedImage, EncodedVideo
    from vhd.media.load import LoadedSample, MediaSettings


@dataclass
class SegmentStep:
    """One model step of a segmented video's judgement, sent to a worker as its own item.

    The driver decodes the video, cuts its segments and encodes their frames (and clips), so the
    worker needs no file: it runs the screen or the full debate on what the step carries.

    Attributes:
        step: ``screen`` (the one-call screen) or ``debate`` (the full debate).
        images: The segment's encoded frames (or the whole-video protocol's, ``span`` None).
        clip: The segment as one clip, with native video input.
        span: The segment's start and end in seconds (None: the whole video, after a fallback).
    """

    step: Literal["screen", "debate"]
    images: list[EncodedImage]
    clip: EncodedVideo | None = None
    span: tuple[float, float] | None = None


@dataclass
class DebateItem:
    """One claimed sample for a worker: by path, already loaded and encoded, or one segment step.

    Attributes:
        sample_id: The id the driver claimed.
        item: The media to load on the worker (shared filesystem).
        loaded: The sample and its encoded images, loaded on the driver.
        segment: A screen or debate of one segment of a video the driver segments (``[video] segments``).
    """

    sample_id: str
    item: MediaItem | None = None
    loaded: LoadedSample | None = None
    segment: SegmentStep | None = None


@dataclass
class DebateOutcome:
    """What a worker sends back for one item.

    Attributes:
        sample: The sample record (None when the media could not be loaded, and for a segment step).
        result: The debate (None when the media could not be loaded).
        started: When the debate started (epoch seconds).
        media_error: Why the media could not be loaded, if it could not.
        lost: Why the sample was not debated: the workers running it kept dying (run again).
    """

    sample: Sample | None
    result: DebateResult | None
    started: float = 0.0
    media_error: str | None = None
    lost: str | None = None


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
        self.screen: Debate | None = None

    def env_vars(self) -> list[str]:
        """The variables the backends read (API keys by name, endpoint defaults)."""
        return self.env

    async def setup(self) -> None:
        """Build and check this worker's backends (an ``hf`` model loads here, on the worker's GPU)."""
        from vhd.backends.base import check_video_input
        from vhd.backends.registry import build_backends
        from vhd.debate.engine import Debate
        from vhd.debate.segmented import screen_debate

        backends = build_backends(self.config)
        for backend in {id(b): b for b in backends.values()}.values():
            await backend.check()
            check_video_input(backend)
        self.debate = Debate(backends, self.config, self.prompts, self.examples, retry_budget=self.retry_budget)
        self.screen = screen_debate(self.debate)

    async def run(self, item: DebateItem) -> DebateOutcome:
        """Load (unless shipped) and debate one sample, or run one segment step; a media error is its reason."""
        from vhd.media.load import load_sample

        assert self.debate is not None and self.screen is not None, "setup() first"
        if item.segment is not None:  # one step of a video the driver segments
            step, started = item.segment, time.time()
            debate = self.screen if step.step == "screen" else self.debate
            return DebateOutcome(None, await debate.run(Kind.VIDEO, step.images, step.clip), started)
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


class PoolCalls:
    """`vhd.debate.segmented.SegmentCalls` on an executor's pool: each screen and debate one work item.

    The driver judges the video (`vhd.debate.segmented.judge_video`: the stream, the cascade,
    the call cap, the verdict) and only the model calls travel, so the segments of one video are
    screened on several workers at once. Each step's usage is reported to ``on_usage`` as it comes
    back (the run's ledger and budget), as a local debate reports each call.

    Args:
        pool: The pool of `DebateWork`.
        sample_id: The video's sample id (carried by each item, for the record).
        calls_per_debate: The most calls of a full debate (`vhd.debate.engine.Debate.most_calls`).
        on_usage: Called with each step's usage on the driver.
        calls_per_screen: The most calls of a screen (2 when a cut-off reply is asked again).
    """

    def __init__(
        self,
        pool: Pool[DebateItem, DebateOutcome],
        sample_id: str,
        calls_per_debate: int,
        on_usage: Callable[[Usage], None] | None = None,
        calls_per_screen: int = 1,
    ) -> None:
        self.pool = pool
        self.sample_id = sample_id
        self._calls_per_debate = calls_per_debate
        self._calls_per_screen = calls_per_screen
        self.on_usage = on_usage

    @property
    def calls_per_debate(self) -> int:
        """The most calls of a full debate."""
        return self._calls_per_debate

    @property
    def calls_per_screen(self) -> int:
        """The most calls of a screen."""
        return self._calls_per_screen

    async def screen(
        self, images: Sequence[EncodedImage], clip: EncodedVideo | None, span: tuple[float, float]
    ) -> DebateResult:
        """The screen call, on some worker."""
        return await self._step(SegmentStep("screen", list(images), clip, span))

    async def debate(
        self, images: Sequence[EncodedImage], clip: EncodedVideo | None, span: tuple[float, float] | None
    ) -> DebateResult:
        """The full debate, on some worker."""
        return await self._step(SegmentStep("debate", list(images), clip, span))

    async def _step(self, step: SegmentStep) -> DebateResult:
        """Run one step on the pool.

        Raises:
            WorkerLostError: The workers running it kept dying (the segment's outcome, not the run's).
        """
        out = await self.pool.run(DebateItem(self.sample_id, segment=step))
        assert out.result is not None, "a segment step always comes back with a result"
        if self.on_usage is not None:
            self.on_usage(out.result.usage)
        return out.result
