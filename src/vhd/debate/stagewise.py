"""Stage-wise debates: every sample's first turn, then every sample's second turn, ..., then the judges.

In per-sample order each debate runs its calls one after the other (A1, N1, A2, N2, judge) and
many debates overlap at random points, so an engine sees a mix of roles, prompts and decoding
settings at any moment. Stage-wise, N debates advance in lockstep: stage 1 is the N affirmative
first-round calls, stage 2 the N negative first-round calls, and so on, and stage ``2R + 1`` the N
judge calls. The calls of a stage share a role, a system prompt (the judge's: its in-context
prefix too) and decoding settings, so a batching engine (the ``hf`` backend's request batching,
vLLM's prefix cache, a provider's batch API) gets one large homogeneous batch.

The verdicts are the same as in per-sample order: both drive the same `vhd.debate.engine.Debate`
state machine (`Debate.start`, `Debate.next_call`, `Debate.accept`); only the order of calls
across samples changes. A failed call ends its own debate with status error (as in per-sample
order) and the other debates go on.

Three ways to use it:

- `run_stagewise(debate, samples)`: sends each stage's calls concurrently through the role's
  backend and returns one `DebateResult` per sample.
- `StageWise`: the same, driven by the caller, for a backend with its own batch interface (a
  provider's batch API submits a file of requests and gets the answers hours later)::

      stages = StageWise(debate, samples)
      while not stages.done:
          requests = stages.requests()           # [StageRequest(index, call)] of this stage
          replies = my_batch_api(requests)       # {index: Output or BackendError}
          stages.accept(replies)
      results = stages.results()

  A request left without a reply counts as a retryable error for its sample.
- `Cohorts`: what ``vhd annotate --stage-wise`` uses. Concurrent callers of `Cohorts.run` (one
  per sample, as the annotation loop's workers are) are gathered into cohorts of up to ``size``
  samples, each run with `run_stagewise`; each caller gets its own sample's result when its cohort's
  judges have answered. A sample is committed to the store when its judge answers, as in
  per-sample order; a run stopped mid-cohort redoes that cohort's samples from their first turn.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vhd.backends.base import Output, ask
from vhd.debate.engine import Call, Debate, DebateResult, DebateState
from vhd.errors import BackendError
from vhd.media.encoded import EncodedImage, EncodedVideo
from vhd.records import Kind

Sample = tuple[Kind, Sequence[EncodedImage]] | tuple[Kind, Sequence[EncodedImage], EncodedVideo | None]
"""A sample to debate: its kind, its image (or frames) and, for native video input, its clip."""


@dataclass(frozen=True)
class StageRequest:
    """One call of the current stage.

    Attributes:
        index: The sample's position in the list given to `StageWise`.
        call: The role, round, messages, decoding settings and backend of the call.
    """

    index: int
    call: Call


class StageWise:
    """N debates driven stage by stage; see the module docstring.

    Args:
        debate: The debate settings (roles, prompts, in-context examples, backends).
        samples: The samples, as ``(kind, images)``.
    """

    def __init__(self, debate: Debate, samples: Sequence[Sample]) -> None:
        self.debate = debate
        self.states: list[DebateState] = [debate.start(*sample) for sample in samples]
        self.stage = 0
        self._pending: list[StageRequest] | None = None

    @property
    def stages(self) -> int:
        """Stages of a full debate: two per round, then the judge."""
        return self.debate.calls_per_debate

    @property
    def done(self) -> bool:
        """Whether every debate is over."""
        return all(state.result is not None for state in self.states)

    def requests(self) -> list[StageRequest]:
        """The calls of the current stage, one per sample still debating (the same list until `accept`)."""
        if self._pending is None:
            pending = []
            for i, state in enumerate(self.states):
                call = self.debate.next_call(state)
                if call is not None:
                    pending.append(StageRequest(i, call))
            self._pending = pending
        return list(self._pending)

    def accept(self, replies: Mapping[int, Output | BackendError]) -> None:
        """Take the current stage's answers (by sample index) and move to the next stage."""
        for request in self.requests():
            reply = replies.get(request.index)
            if reply is None:
                reply = BackendError("no reply for this sample's call in its stage", retryable=True)
            self.debate.accept(self.states[request.index], request.call, reply)
        self._pending = None
        self.stage += 1

    def results(self) -> list[DebateResult]:
        """One result per sample, in input order.

        Raises:
            RuntimeError: Some debates are not over yet.
        """
        if not self.done:
            raise RuntimeError(f"stage-wise debates are at stage {self.stage + 1} of {self.stages}: not finished")
        return [state.result for state in self.states if state.result is not None]


async def _ask(call: Call) -> Output | BackendError:
    return await ask(call.backend, call.messages, call.config)


async def run_stagewise(debate: Debate, samples: Sequence[Sample]) -> list[DebateResult]:
    """Debate samples stage by stage, each stage's calls sent at once; results in input order."""
    stages = StageWise(debate, samples)
    while not stages.done:
        requests = stages.requests()
        replies = await asyncio.gather(*(_ask(r.call) for r in requests))
        stages.accept({r.index: reply for r, reply in zip(requests, replies, strict=True)})
    return stages.results()


class Cohorts:
    """Gathers concurrent single-sample debates into stage-wise cohorts (``vhd annotate --stage-wise``).

    Args:
        debate: The debate settings.
        size: Most samples in a cohort (the annotation loop uses its concurrency).
        wait_s: How long the first sample of a cohort waits for company before the cohort starts.
    """

    def __init__(self, debate: Debate, size: int, wait_s: float = 0.05) -> None:
        self.debate = debate
        self.size = max(1, size)
        self.wait_s = wait_s
        self.cohorts = 0
        """Cohorts started so far."""
        self._waiting: list[tuple[Sample, asyncio.Future[DebateResult]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, kind: Kind, images: Sequence[EncodedImage], clip: EncodedVideo | None = None) -> DebateResult:
        """Debate one sample as part of the next cohort; returns when its judge has answered."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[DebateResult] = loop.create_future()
        self._waiting.append(((kind, images, clip), future))
        if len(self._waiting) >= self.size:
            self._launch()
        elif self._timer is None:
            self._timer = loop.call_later(self.wait_s, self._launch)
        return await future

    def _launch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._waiting = self._waiting, []
        if not batch:
            return
        self.cohorts += 1
        task = asyncio.get_running_loop().create_task(self._drive(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drive(self, batch: list[tuple[Sample, asyncio.Future[DebateResult]]]) -> None:
        futures = [future for _, future in batch]
        runner = asyncio.ensure_future(  # noqa: RUF006 - awaited below
            run_stagewise(self.debate, [sample for sample, _ in batch])
        )

        def abandon(_: asyncio.Future[DebateResult]) -> None:  # every caller gave up: stop calling models
            if all(f.cancelled() for f in futures):
                runner.cancel()

        for future in futures:
            future.add_done_callback(abandon)
        try:
            results = await runner
        except BaseException as exc:
            for future in futures:
                if not future.done():
                    if isinstance(exc, asyncio.CancelledError):
                        future.cancel()
                    else:
                        future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for future, result in zip(futures, results, strict=True):
            if not future.done():
                future.set_result(result)

    async def aclose(self) -> None:
        """Cancel cohorts still running (their callers are gone)."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
