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

The module is long (about 450 lines) because the worker, its stop rules and the commit share
one run state; split, the parts would import each other.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AsyncExitStack, nullcontext, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from vhd.annotate.feeder import CLAIM_BATCH, SKIP_REASONS_KEPT, Feeder
from vhd.annotate.summary import RunSummary, budget_fix, count_status
from vhd.backends.endpoints import merge_stats
from vhd.backends.registry import build_backends
from vhd.boundary import ItemFailure, guarded
from vhd.config import AnnotateConfig
from vhd.errors import StoreWriteError
from vhd.fileio import display_path
from vhd.media.discover import PlainFile, Skipped
from vhd.progress import ProgressFn, bar
from vhd.records import Annotation, MediaItem, Sample, Status, Usage
from vhd.redaction import redact

if TYPE_CHECKING:
    from vhd.annotate.cascade import Cascade
    from vhd.annotate.ledger import Ledger
    from vhd.annotate.work import DebateItem, DebateOutcome
    from vhd.backends.openai_batch import BatchRunner
    from vhd.debate.engine import Debate, DebateResult
    from vhd.debate.stagewise import Cohorts
    from vhd.execution import Executor, Pool
    from vhd.media.load import LoadedSample, MediaSettings
    from vhd.store.sqlite import Store

NON_RETRYABLE_LIMIT = 8
"""Consecutive samples failing with non-retryable errors after which the run stops."""

TRUNCATED_LIMIT = 8
"""Consecutive samples ending ``truncated`` (cut off by the token limit) after which the run stops."""

RETRY_BUDGET = 4
"""With ``retry_unparsed``, a call cut off by the token limit is asked once more with this many times its cap."""

CHECKPOINT_EVERY = 5000
"""Samples saved between two checkpoints of the store's write-ahead log."""


async def run(
    inputs: Sequence[str | Path],
    config: AnnotateConfig,
    *,
    store: Path,
    retry_unparsed: bool,
    frame_folders: bool,
    include_duplicates: bool,
    dry_run: bool,
    max_cost: float | None,
    progress: bool | ProgressFn,
    command: str,
    on_event: Callable[[str], None],
    allow_outside_paths: bool = False,
    cascade: Cascade | None = None,
    batch_api: bool = False,
    batch_poll_s: float = 30.0,
    batch_quiet_s: float = 0.5,
    stage_wise: bool = False,
    executor: Executor | None = None,
    rehash: bool = False,
) -> RunSummary:
    """Run (or estimate) one annotation job; see `vhd.annotate.api.annotate` (and `vhd.annotate.work`)."""
    from vhd.debate.engine import Debate
    from vhd.debate.icl import load_examples
    from vhd.debate.identity import config_identity, digest
    from vhd.debate.prompts import Prompts
    from vhd.media.discover import check_inputs, iter_discover
    from vhd.media.load import media_settings
    from vhd.store.statindex import ScratchSet

    base = Path(config.base_dir) if config.base_dir else None
    prompts = Prompts(config.prompts, base)
    settings = media_settings(config.media)
    from vhd.labels.rules import store_lookup

    known = store_lookup(store)  # manifest rows naming the store's samples may lead anywhere
    check_inputs(list(inputs))
    summary = RunSummary(run_id=None, store=str(store), dry_run=dry_run, stage_wise=stage_wise or batch_api)
    backends = build_backends(config)
    if executor is None:  # elsewhere a model path may exist only where the workers run
        for backend in {id(b): b for b in backends.values()}.values():
            backend.precheck()  # before the identity below imports torch for a local model
    if batch_api:
        from vhd.annotate.batch import check_batchable

        check_batchable(backends)
    examples = load_examples(config.resolve_path(config.icl), settings) if config.icl else []
    identity = config_identity(config, backends, prompts, examples)
    if cascade is not None:  # stages decide some verdicts: a distinct configuration
        identity = {**identity, "cascade": cascade.identity()}
    config_hash = digest(identity)

    from vhd.annotate.ledger import Ledger
    from vhd.store.curation import excluded_samples
    from vhd.store.sqlite import Store

    if dry_run:
        from vhd.annotate.estimate import estimate

        paths_seen = ScratchSet()

        def streamed_items() -> Iterator[MediaItem]:
            """Discovery, streamed into the estimate; skipped inputs are counted, a few kept."""
            for found in iter_discover(
                list(inputs),
                frame_folders=frame_folders,
                allow_outside_paths=allow_outside_paths,
                known=known,
                first_seen=paths_seen.add,
            ):
                if isinstance(found, Skipped):
                    if len(summary.skip_reasons) < SKIP_REASONS_KEPT:
                        summary.skip_reasons.append((display_path(found.path), found.reason))
                    summary.skipped += 1
                    summary.rows_left_out += found.row_left_out
                else:
                    yield found

        try:
            summary.estimate = await estimate(streamed_items(), config, prompts, examples, store, config_hash)
        finally:
            paths_seen.close()
        summary.found = summary.estimate["samples"]
        summary.already_done = summary.estimate["already_done"]
        return summary

    from vhd.annotate.work import remote_pool

    unique = list({id(b): b for b in backends.values()}.values())
    workers = AsyncExitStack()  # an executor's workers check their own backends as they start
    retry_budget = RETRY_BUDGET if retry_unparsed else 1
    pool = await workers.enter_async_context(
        remote_pool(executor, config, prompts, examples, settings, retry_budget=retry_budget)
    )
    for backend in unique if pool is None else ():
        await backend.check()
    try:
        if cascade is not None:
            await cascade.check()
        db = Store(store)
    except BaseException:
        await workers.aclose()  # stop the workers (and a Ray this run started)
        raise
    paths_seen, ids_seen = ScratchSet(), ScratchSet()
    try:
        try:
            recorded = redact(config.model_dump())
            if cascade is not None:  # the stages, for `vhd runs` and the review app's "decided by"
                recorded = {**recorded, "cascade": cascade.record()}
            run_id = db.start_run(
                recorded,
                config_hash,
                {role.value: b.spec for role, b in backends.items()},
                prompts.digest(),
                command=command,
            )
        except StoreWriteError as exc:
            summary.store_error = store_message(exc, summary)
            return summary
        summary.run_id = run_id
        runners: list[BatchRunner] = []
        job = _Job(db, settings, summary, config_hash, run_id, max_cost, on_event)
        job.retry_unparsed = retry_unparsed
        job.budget_fix = summary.budget_fix = budget_fix(config, RETRY_BUDGET, retried=retry_unparsed)
        job.lease_seconds = config.lease_seconds
        job.pool = pool
        job.ship_media = executor is not None and executor.options.ship_media
        job.cascade = cascade
        job.rehash, job.seen, job.paths_seen = rehash, ids_seen, paths_seen
        streamed = iter_discover(
            list(inputs),
            frame_folders=frame_folders,
            allow_outside_paths=allow_outside_paths,
            known=known,
            first_seen=paths_seen.add,
            record_new=paths_seen.put_new,
            plain_files=True,  # a `MediaItem` is made only for a file that still needs work
        )
        try:
            job.excluded = excluded_samples(db, duplicates=not include_duplicates)
            with Ledger(db, run_id, lease_seconds=config.lease_seconds) as ledger:
                job.ledger = ledger
                debating = backends
                if batch_api:  # every call through the endpoint's batch API (`vhd.annotate.batch`)
                    from vhd.annotate.batch import batch_backends

                    debating, runners = batch_backends(
                        backends, db, config_hash, poll_s=batch_poll_s, quiet_s=batch_quiet_s, on_event=on_event
                    )
                job.debate = Debate(debating, config, prompts, examples, on_call=job.on_call, retry_budget=retry_budget)
                if stage_wise or batch_api:  # debates advance in lockstep, a cohort of `concurrency` at a time
                    from vhd.debate.stagewise import Cohorts

                    job.debate = Cohorts(job.debate, config.concurrency)
                drawn = nullcontext(progress) if callable(progress) else bar("annotating", progress, unit="samples")
                with drawn as on_progress:
                    job.on_progress = on_progress
                    await job.run(streamed, config.concurrency)
            summary.endpoints = merge_stats([b.endpoint_stats() for b in unique])
            summary.local = {b.spec: stats for b in unique if (stats := b.local_stats())}
            if ledger.error is not None:  # the last write of the counters failed
                job.fail_store(ledger.error)
            job.finish()
            if job.store_error is not None:
                summary.store_error = store_message(job.store_error, summary)
            db.finish_run(run_id, summary.to_dict())
        except StoreWriteError as exc:
            job.store_error = job.store_error or exc
        finally:
            for runner in runners:
                await runner.aclose()
                summary.batches += runner.batches_created
            with suppress(StoreWriteError):
                db.release_leases(run_id)
        if job.store_error is not None:
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
        db: Store,
        settings: MediaSettings,
        summary: RunSummary,
        config_hash: str,
        run_id: str,
        max_cost: float | None,
        on_event: Callable[[str], None],
    ) -> None:
        super().__init__(db, settings, summary, config_hash, run_id, on_event)
        self.max_cost = max_cost
        self.debate: Debate | Cohorts | None = None
        self.pool: Pool[DebateItem, DebateOutcome] | None = None
        self.ship_media = False
        self.cascade: Cascade | None = None
        self.ledger: Ledger | None = None
        self.saved = 0
        self.fatal_streak = 0
        self.truncated_streak = 0
        self.budget_fix = ""

    def on_call(self, usage: Usage) -> None:
        """Every answered model call: counted at once, in the summary and the store's ledger."""
        self.summary.usage.add(usage)
        if self.ledger is not None:
            self.ledger.add(usage)
            if self.ledger.error is not None:
                self.fail_store(self.ledger.error)
        if self.max_cost is not None and self.summary.usage.cost >= self.max_cost and not self.stopping:
            self.summary.budget_reached = True
            self.stop(
                f"budget reached: ${self.summary.usage.cost:.4f} of ${self.max_cost:.4f}; finishing samples in flight"
            )

    async def run(self, found: Iterable[MediaItem | PlainFile | Skipped], concurrency: int) -> None:
        """Annotate what discovery yields, ``concurrency`` samples at a time."""
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
        """Load, debate and save one claimed sample."""
        from vhd.annotate.work import debate_on
        from vhd.media.load import load_sample

        try:
            if self.pool is not None:  # debated on an executor's worker, saved here
                out = await debate_on(self.pool, item, sid, self.settings, ship=self.ship_media)
                if out.sample is None or out.result is None:  # unreadable, or its workers kept dying
                    self.summary.remaining += out.lost is not None
                    if out.lost:
                        self.on_event(out.lost)
                    else:
                        self.skip(item.path, out.media_error or "unreadable")
                    self.db.release_leases(self.run_id, [sid])
                    return
                self.summary.found += 1
                self.on_call(out.result.usage)
                self.commit(out.sample, out.result, out.started)
                return
            loaded = await asyncio.to_thread(guarded, load_sample, item, self.settings)
            if isinstance(loaded, ItemFailure):  # unreadable, damaged, or a missing extra (named)
                self.skip(item.path, loaded.reason)
                self.db.release_leases(self.run_id, [sid])
                return
            self.summary.found += 1
            await self.annotate_one(loaded)
        except StoreWriteError as exc:
            self.summary.remaining += 1  # debated, perhaps, but not saved
            self.fail_store(exc)

    async def annotate_one(self, loaded: LoadedSample) -> None:
        assert self.debate is not None
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
        result = await self.debate.run(sample.kind, loaded.images)
        result.usage.add(stage_usage)
        self.commit(sample, result, started, decided_by)

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
