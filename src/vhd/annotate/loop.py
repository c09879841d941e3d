"""The asynchronous annotation loop behind `vhd.annotate`.

Discovery streams (`vhd.media.discover.iter_discover`) into a `vhd.annotate.feeder.Feeder`,
which hashes the inputs through the store's stat index, counts out what is already final or held
by another live run, and leases the rest to this run a claim batch at a time onto a queue.
``concurrency`` workers (this module) load and encode (in threads), debate (here, on an
executor's workers, stage-wise in cohorts, or after a cascade's stages), and commit each sample to
the store, which releases its lease. Every answered model call goes to the run's ledger at once
(`vhd.annotate.ledger`), written to the store in the background and used for the budget. Ctrl-C
once stops taking new samples and lets those in flight finish; twice abandons them. Nothing
finished is ever lost; a store that cannot be written (full disk) stops the run with one line.

Memory stays flat however many inputs there are: the queue is bounded by the claim batch, the
paths and sample ids already met live in on-disk sets (`vhd.store.statindex.ScratchSet`), skipped
files go to the store (the summary keeps counts and the first `SKIP_REASONS_KEPT` reasons), and
the store's write-ahead log is checkpointed every `CHECKPOINT_EVERY` samples.

What the run works from (inputs, configuration, backends, examples, hash) is settled first in a
`vhd.annotate.plan.Plan`, which the dry-run estimate shares; the workers are built from it whole.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AsyncExitStack, nullcontext, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from vhd.annotate.feeder import CLAIM_BATCH, SKIP_REASONS_KEPT, Feeder, RunState
from vhd.annotate.options import RunOptions
from vhd.annotate.plan import RETRY_BUDGET, Plan, make_plan
from vhd.annotate.summary import RunSummary, budget_fix, count_status
from vhd.backends.base import check_video_input
from vhd.backends.endpoints import merge_stats
from vhd.boundary import ItemFailure, guarded
from vhd.config import AnnotateConfig
from vhd.errors import MediaError, StoreWriteError, WorkerLostError
from vhd.fileio import display_path
from vhd.media.discover import PlainFile, Skipped
from vhd.progress import ProgressFn, Tally, bar
from vhd.records import Annotation, Kind, MediaItem, Role, Sample, Status, Usage
from vhd.redaction import redact

if TYPE_CHECKING:
    from vhd.annotate.cascade import Cascade
    from vhd.annotate.ledger import Ledger
    from vhd.annotate.work import DebateItem, DebateOutcome
    from vhd.backends.base import Backend
    from vhd.backends.openai_batch import BatchRunner
    from vhd.debate.engine import Debate, DebateResult
    from vhd.debate.stagewise import Cohorts
    from vhd.execution import Executor, Pool
    from vhd.media.load import LoadedSample

NON_RETRYABLE_LIMIT = 8
"""Consecutive samples failing with non-retryable errors after which the run stops."""

TRUNCATED_LIMIT = 8
"""Consecutive samples ending ``truncated`` (cut off by the token limit) after which the run stops."""

CHECKPOINT_EVERY = 5000
"""Samples saved between two checkpoints of the store's write-ahead log."""


async def run(
    inputs: list[str | Path],
    config: AnnotateConfig,
    *,
    store: Path,
    options: RunOptions,
    executor: Executor | None,
    progress: bool | ProgressFn,
    on_event: Callable[[str], None],
) -> RunSummary:
    """Run (or estimate) one annotation job; see `vhd.annotate.api.annotate` (and `vhd.annotate.work`)."""
    from vhd.store.statindex import ScratchSet

    plan = make_plan(inputs, config, store=store, options=options, executor=executor)
    summary = RunSummary(
        run_id=None,
        store=str(store),
        config_hash=plan.config_hash,
        dry_run=options.dry_run,
        stage_wise=options.stage_wise or options.batch_api,
    )
    if options.dry_run:
        return await _estimate(plan, summary)

    from vhd.annotate.ledger import Ledger
    from vhd.annotate.work import remote_pool
    from vhd.store.curation import excluded_samples
    from vhd.store.sqlite import Store

    cascade = options.cascade
    unique = plan.unique_backends
    workers = AsyncExitStack()  # an executor's workers check their own backends as they start
    pool = await workers.enter_async_context(
        remote_pool(executor, config, plan.prompts, plan.examples, plan.settings, retry_budget=plan.retry_budget)
    )
    for backend in unique if pool is None else ():
        await backend.check()
        check_video_input(backend)  # a model that takes no video, known once it is loaded
    try:
        if cascade is not None:
            await cascade.check()
        db = Store(store, create=True)
    except BaseException:
        await workers.aclose()  # stop the workers (and a Ray this run started)
        raise
    paths_seen, ids_seen = ScratchSet(), ScratchSet()
    try:
        try:
            recorded = redact(config.model_dump())
            if cascade is not None:  # the stages, for `vhd runs` and the review app's "decided by"
                recorded = {**recorded, "cascade": cascade.record()}
            policy = plan.policy
            db.save_policy(policy.content_hash, policy.name, policy.version, policy.to_yaml())
            run_id = db.start_run(
                recorded,
                plan.config_hash,
                {role.value: b.spec for role, b in plan.backends.items()},
                plan.prompts.digest(),
                command=options.command,
                policy_hash=policy.content_hash,
            )
        except StoreWriteError as exc:
            summary.store_error = store_message(exc, summary)
            return summary
        summary.run_id = run_id
        runners: list[BatchRunner] = []
        streamed = plan.discover(
            paths_seen.add,
            record_new=paths_seen.put_new,
            plain_files=True,  # a `MediaItem` is made only for a file that still needs work
        )
        job: _Job | None = None
        try:
            excluded = excluded_samples(db, duplicates=not options.include_duplicates)
            with Ledger(db, run_id, lease_seconds=config.lease_seconds) as ledger:
                debating = plan.backends
                if options.batch_api:  # every call through the endpoint's batch API (`vhd.annotate.batch`)
                    from vhd.annotate.batch import batch_backends

                    debating, runners = batch_backends(
                        plan.backends,
                        db,
                        plan.config_hash,
                        poll_s=options.batch_poll_s,
                        quiet_s=options.batch_quiet_s,
                        on_event=on_event,
                    )
                job = _Job(
                    plan,
                    RunState(db, summary, run_id, on_event, excluded, ids_seen, paths_seen),
                    ledger=ledger,
                    pool=pool,
                    debating=debating,
                )
                drawn = nullcontext(progress) if callable(progress) else bar("annotating", progress, unit="samples")
                with drawn as report:
                    await job.run(streamed, config.concurrency, report)
            summary.endpoints = merge_stats([b.endpoint_stats() for b in unique])
            summary.local = {b.spec: stats for b in unique if (stats := b.local_stats())}
            if ledger.error is not None:  # the last write of the counters failed
                job.fail_store(ledger.error)
            job.finish()
            if job.store_error is not None:
                summary.store_error = store_message(job.store_error, summary)
            db.finish_run(run_id, summary.to_dict())
        except StoreWriteError as exc:
            if job is None:
                summary.store_error = store_message(exc, summary)
            else:
                job.store_error = job.store_error or exc
        finally:
            for runner in runners:
                await runner.aclose()
                summary.batches += runner.batches_created
            with suppress(StoreWriteError):
                db.release_leases(run_id)
        if job is not None and job.store_error is not None:
            summary.store_error = store_message(job.store_error, summary)
    finally:
        paths_seen.close()
        ids_seen.close()
        with suppress(StoreWriteError):
            db.checkpoint(truncate=True)
        db.close()
        await workers.aclose()
        for backend in unique:
            with suppress(Exception):
                await backend.aclose()
        if cascade is not None:
            with suppress(Exception):
                await cascade.aclose()
    return summary


async def _estimate(plan: Plan, summary: RunSummary) -> RunSummary:
    """The dry run: discovery streamed into `vhd.annotate.estimate.estimate`; nothing is sent."""
    from vhd.annotate.estimate import estimate
    from vhd.store.statindex import ScratchSet

    paths_seen = ScratchSet()

    def streamed_items() -> Iterator[MediaItem]:
        """Discovery, streamed into the estimate; skipped inputs are counted, a few kept."""
        for found in plan.discover(paths_seen.add):
            if isinstance(found, Skipped):
                if len(summary.skip_reasons) < SKIP_REASONS_KEPT:
                    summary.skip_reasons.append((display_path(found.path), found.reason))
                summary.skipped += 1
                summary.rows_left_out += found.row_left_out
            elif isinstance(found, MediaItem):
                yield found

    try:
        summary.estimate = await estimate(
            streamed_items(), plan.config, plan.prompts, plan.examples, plan.store, plan.config_hash,
            retry_budget=plan.retry_budget, cascade=plan.options.cascade,
        )  # fmt: skip
    finally:
        paths_seen.close()
    summary.found = summary.estimate["samples"]
    summary.already_done = summary.estimate["already_done"]
    return summary


def store_message(exc: StoreWriteError, summary: RunSummary) -> str:
    """The one line a run stopped by a store that cannot be written ends with."""
    fix = "free some disk space" if exc.full else "fix that"
    earlier = f" ({summary.already_done} done by earlier runs)" if summary.already_done else ""
    return (
        f"{exc}: {summary.annotated} sample(s) annotated in this run are saved{earlier}; "
        f"{fix}, then run the same command again to resume"
    )


class _Job(Feeder):
    """One run's workers on top of its `vhd.annotate.feeder.Feeder`: debate, commit, count, budget."""

    def __init__(
        self,
        plan: Plan,
        state: RunState,
        *,
        ledger: Ledger,
        pool: Pool[DebateItem, DebateOutcome] | None,
        debating: dict[Role, Backend],
    ) -> None:
        super().__init__(plan, state)
        self.max_cost = plan.options.max_cost
        self.cascade: Cascade | None = plan.options.cascade
        self.ledger = ledger
        self.pool = pool
        self.ship_media = plan.executor is not None and plan.executor.options.ship_media
        self.debate: Debate | Cohorts = plan.debate(debating, self.on_call)
        self.video = plan.config.video
        self.concurrency = plan.config.concurrency
        self.saved = 0
        self.fatal_streak = 0
        self.truncated_streak = 0
        self.budget_fix = budget_fix(plan.config, RETRY_BUDGET, retried=plan.options.retry_unparsed)
        self.video_seconds = Tally(lambda *a, **k: self.on_progress(*a, **k), "video segments (seconds)")

    def on_call(self, usage: Usage) -> None:
        """Every answered model call: counted at once, in the summary and the store's ledger."""
        self.summary.usage.add(usage)
        self.ledger.add(usage)
        if self.ledger.error is not None:
            self.fail_store(self.ledger.error)
        if self.max_cost is not None and self.summary.usage.cost >= self.max_cost and not self.stopping:
            self.summary.budget_reached = True
            self.stop(
                f"budget reached: ${self.summary.usage.cost:.4f} of ${self.max_cost:.4f}; finishing samples in flight"
            )

    async def run(
        self, found: Iterable[MediaItem | PlainFile | Skipped], concurrency: int, progress: ProgressFn
    ) -> None:
        """Annotate what discovery yields, ``concurrency`` samples at a time, reporting to ``progress``."""
        self.on_progress = progress
        items = iter(found)
        n_workers = max(1, concurrency)
        batch = max(8, min(CLAIM_BATCH, 2 * concurrency))
        queue: asyncio.Queue[tuple[MediaItem, str] | None] = asyncio.Queue()
        feeder = asyncio.create_task(self.feed(items, queue, batch, n_workers))
        workers = [asyncio.create_task(self.worker(queue, batch)) for _ in range(n_workers)]
        loop = asyncio.get_running_loop()
        interrupts = 0

        def on_sigint() -> None:
            nonlocal interrupts
            interrupts += 1
            self.summary.interrupted = True
            if interrupts == 1:
                self.stop("interrupted: finishing the samples in flight (Ctrl-C again to abandon them)")
            else:
                self.on_event("abandoning the samples in flight")
                for task in (feeder, *workers):
                    task.cancel()

        installed = False
        with suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
            installed = True
        try:
            outcomes = await asyncio.gather(feeder, *workers, return_exceptions=True)
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)
        queued = 0
        while not queue.empty():
            queued += queue.get_nowait() is not None
        # inputs not reached (stopped early) are counted, not hashed
        self.summary.remaining += sum(1 for f in items if not isinstance(f, Skipped)) + queued + self.in_flight
        failures = [o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, asyncio.CancelledError)]
        if failures:  # a bug, not a sample's error: finished samples are stored; surface it
            raise failures[0]
        if self.summary.interrupted:
            self.on_event("run the same command again to resume; finished samples are kept")

    async def worker(self, queue: asyncio.Queue[tuple[MediaItem, str] | None], batch: int) -> None:
        while True:
            entry = await queue.get()
            if queue.qsize() < batch:
                self.room.set()
            if entry is None:
                return
            if self.stopping:
                self.summary.remaining += 1
                continue
            self.in_flight += 1
            await self.process(*entry)  # abandoned (second Ctrl-C): stays counted in flight
            self.in_flight -= 1

    async def process(self, item: MediaItem, sid: str) -> None:
        """Load, debate and save one claimed sample.

        With an executor's pool, a sample is sent to a worker whole (loaded there, or shipped),
        unless this process must see it first: a video judged by segments (decoded here, each
        segment's screen and debate sent as its own item) or a sample the cascade's stages screen
        here before any debate.
        """
        from vhd.annotate.work import debate_on
        from vhd.media.load import describe_sample, load_sample

        try:
            segmented = self.video.segments and item.kind is Kind.VIDEO and Path(item.path).is_file()
            if self.pool is not None and not segmented and self.cascade is None:  # all on a worker
                out = await debate_on(self.pool, item, sid, self.settings, ship=self.ship_media)
                if out.sample is None or out.result is None:  # unreadable, or its workers kept dying
                    self.lost_or_skipped(item.path, sid, out.lost, out.media_error)
                    return
                self.summary.found += 1
                self.on_call(out.result.usage)
                self.commit(out.sample, out.result, out.started)
                return
            if self.video.segments and item.kind is Kind.VIDEO and Path(item.path).is_file():
                # the segment pass is the one decode: the five whole-video frames only if it fails
                sample = await asyncio.to_thread(guarded, describe_sample, item)
                if isinstance(sample, ItemFailure):
                    self.skip(item.path, sample.reason)
                    self.db.release_leases(self.run_id, [sid])
                    return
                await self.annotate_segments(item, sample, sid)
                return
            loaded = await asyncio.to_thread(guarded, load_sample, item, self.settings)
            if isinstance(loaded, ItemFailure):  # unreadable, damaged, or a missing extra (named)
                self.skip(item.path, loaded.reason)
                self.db.release_leases(self.run_id, [sid])
                return
            self.summary.found += 1
            await self.annotate_one(loaded, sid)
        except StoreWriteError as exc:
            self.summary.remaining += 1  # debated, perhaps, but not saved
            self.fail_store(exc)

    def lost_or_skipped(self, path: str | Path, sid: str, lost: str | None, media_error: str | None) -> None:
        """A sample an executor's workers did not debate: left for the next run (lost) or skipped (unreadable)."""
        self.summary.remaining += lost is not None
        if lost:
            self.on_event(lost)
        else:
            self.skip(path, media_error or "unreadable")
        self.db.release_leases(self.run_id, [sid])

    async def annotate_one(self, loaded: LoadedSample, sid: str) -> None:
        sample = loaded.sample
        started = time.time()
        decided_by = None
        stage_usage = Usage()
        if self.cascade is not None:
            from vhd.annotate.cascade import DEBATE, stage_annotation

            outcome = await self.cascade.run(sample.kind, loaded.images)
            stage_usage.calls = outcome.calls
            self.on_call(stage_usage)
            self.summary.stage_calls += outcome.calls
            if outcome.decision is not None:
                ann = stage_annotation(outcome, sample.id, self.run_id, self.config_hash, started)
                self.save_decided(ann, sample)
                return
            decided_by = DEBATE
        if self.pool is not None:  # screened here by the cascade, debated on a worker
            from vhd.annotate.work import DebateItem

            try:
                out = await self.pool.run(DebateItem(sid, loaded=loaded))
            except WorkerLostError as exc:
                self.lost_or_skipped(loaded.sample.path, sid, str(exc), None)
                return
            assert out.result is not None
            result = out.result
            self.on_call(result.usage)
        else:
            result = await self.debate.run(sample.kind, loaded.images, loaded.clip)
        result.usage.add(stage_usage)
        self.commit(sample, result, started, decided_by)

    async def annotate_segments(self, item: MediaItem, sample: Sample, sid: str) -> None:
        """Judge a video segment by segment (`vhd.annotate.segmented`), each segment stored as it is decided.

        The video is decoded once, here, by the segment pass; the whole-video protocol's frames are
        read only when it cannot be segmented. With an executor's pool each segment's screen and
        debate go to the workers as their own items (`vhd.annotate.work.PoolCalls`),
        ``concurrency`` segments of the video at once; what comes back is stored here as it comes.
        A file that turns out unreadable or damaged is skipped with its reason (segments decided
        before the damage stay stored), and the run goes on.
        """
        from vhd.annotate.segmented import WholeVideo, judge_in_store, screen_debate
        from vhd.annotate.work import PoolCalls
        from vhd.debate.engine import Debate, DebateResult

        assert isinstance(self.debate, Debate), "segments are refused with stage-wise debates"
        calls, parallel = None, 1
        if self.pool is not None:
            most = screen_debate(self.debate).most_calls
            calls = PoolCalls(self.pool, sid, self.debate.most_calls, self.on_call, calls_per_screen=most)
            parallel = self.concurrency
        whole_video = WholeVideo(item, self.settings)
        path, started, stored = Path(item.path), time.time(), (self.db, self.run_id, self.config_hash)
        try:
            judged = await judge_in_store(
                *stored, sample, path, self.video, self.settings, self.debate, self.cascade, whole_video,
                calls=calls, parallel=parallel, progress=self.video_seconds.part(sid),
            )  # fmt: skip
        except MediaError as exc:  # unreadable or damaged: this video's outcome, never the run's
            self.skip(item.path, ItemFailure.of(exc).reason)
            self.db.release_leases(self.run_id, [sid])
            return
        self.summary.found += 1
        sample = whole_video.sample(sample)  # with the frames a fallback read
        if judged.stage_calls:  # the debate's calls went to the ledger as they came; the stages' go now
            self.on_call(Usage(calls=judged.stage_calls))
            self.summary.stage_calls += judged.stage_calls
        self.count_segments(len(judged.verdict.segments), len(judged.capped), judged.fallback, path, judged.skipped)
        result = DebateResult(judged.verdict, judged.turns, judged.usage, judged.error, judged.retryable)
        self.commit(sample, result, started, judged.decided_by)

    def count_segments(
        self, n: int, capped: int, fallback: str | None, path: object, skipped: str | None = None
    ) -> None:
        """Count a segmented video's segments in the summary; say when it fell back, or was not judged to its end."""
        self.summary.segments += n
        self.summary.segments_capped += capped
        if fallback is not None:
            self.on_event(f"{path}: judged by the whole-video protocol ({fallback})")
        if skipped is not None:
            self.summary.videos_cut_short += 1
            self.on_event(f"{path}: {skipped}")

    def commit(self, sample: Sample, result: DebateResult, started: float, decided_by: str | None = None) -> None:
        """Save one debated sample (which releases its lease) and count it."""
        ann = Annotation(
            sample_id=sample.id,
            run_id=self.run_id,
            config_hash=self.config_hash,
            verdict=result.verdict,
            turns=result.turns,
            usage=result.usage,
            error=result.error,
            started_at=started,
            finished_at=time.time(),
            decided_by=decided_by,
        )
        self.save_decided(ann, sample)
        if result.verdict.status is Status.ERROR and not result.retryable:
            self.fatal_streak += 1
            if self.fatal_streak >= NON_RETRYABLE_LIMIT:
                self.stop(f"stopping: {self.fatal_streak} samples in a row failed with: {result.error}")
        else:
            self.fatal_streak = 0
        if result.verdict.status is Status.TRUNCATED:
            self.summary.budget_fix = self.budget_fix  # the advice only once a reply was cut off
            self.truncated_streak += 1
            if self.truncated_streak >= TRUNCATED_LIMIT:
                self.stop(f"stopping: {self.truncated_streak} samples in a row were truncated; {self.budget_fix}")
        else:
            self.truncated_streak = 0

    def save_decided(self, ann: Annotation, sample: Sample) -> None:
        """Store a finished annotation and count it (by the stage that decided, in a cascade)."""
        self.db.save_annotation(ann, sample)
        self.saved += 1
        if self.saved % CHECKPOINT_EVERY == 0:  # readers may hold the log back; keep it from growing
            self.db.checkpoint()
        count_status(self.summary, ann.verdict.status, ann.verdict.harmful)
        if ann.decided_by is not None and ann.verdict.status is not Status.ERROR:
            self.summary.decided_by[ann.decided_by] = self.summary.decided_by.get(ann.decided_by, 0) + 1
        self.report()
