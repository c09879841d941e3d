"""The asynchronous annotation loop behind `vhd.annotate`.

Samples flow through ``concurrency`` workers: hash (skip what is already final), load and
encode (in threads), debate, commit to the store. Ctrl-C once stops taking new samples and
lets those in flight finish; twice abandons them. Nothing finished is ever lost.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from vhd.annotate.summary import RunSummary, count_status
from vhd.backends.registry import build_backends
from vhd.config import AnnotateConfig
from vhd.errors import MediaError
from vhd.fileio import display_path
from vhd.progress import ProgressFn, bar, no_progress
from vhd.records import Annotation, MediaItem, Status
from vhd.redaction import redact

if TYPE_CHECKING:
    from vhd.debate.engine import Debate
    from vhd.media.load import LoadedSample, MediaSettings
    from vhd.store.sqlite import Store

NON_RETRYABLE_LIMIT = 8
"""Consecutive samples failing with non-retryable errors after which the run stops."""


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
) -> RunSummary:
    """Run (or estimate) one annotation job; see `vhd.annotate.api.annotate`."""
    from vhd.debate.engine import Debate
    from vhd.debate.icl import load_examples
    from vhd.debate.identity import config_identity, digest
    from vhd.debate.prompts import Prompts
    from vhd.media.discover import discover
    from vhd.media.load import media_settings

    base = Path(config.base_dir) if config.base_dir else None
    prompts = Prompts(config.prompts, base)
    settings = media_settings(config.media)
    from vhd.store.label_rules import store_lookup

    known = store_lookup(store)  # manifest rows naming the store's samples may lead anywhere
    found = discover(list(inputs), frame_folders=frame_folders, allow_outside_paths=allow_outside_paths, known=known)
    summary = RunSummary(run_id=None, store=str(store), dry_run=dry_run)
    summary.skip_reasons = [(display_path(s.path), s.reason) for s in found.skipped[:1000]]
    summary.skipped = len(found.skipped)
    backends = build_backends(config)
    examples = load_examples(config.resolve_path(config.icl), settings) if config.icl else []
    identity = config_identity(config, backends, prompts, examples)
    config_hash = digest(identity)

    from vhd.store.curation import excluded_samples
    from vhd.store.sqlite import Store

    if dry_run:
        from vhd.annotate.estimate import estimate

        summary.estimate = await estimate(found.items, config, prompts, examples, store, config_hash)
        summary.found = summary.estimate["samples"]
        summary.already_done = summary.estimate["already_done"]
        return summary

    unique = list({id(b): b for b in backends.values()}.values())
    for backend in unique:
        await backend.check()
    db = Store(store)
    try:
        run_id = db.start_run(
            redact(config.model_dump()),
            config_hash,
            {role.value: b.spec for role, b in backends.items()},
            prompts.digest(),
            command=command,
        )
        summary.run_id = run_id
        for skip in found.skipped:
            db.record_skip(run_id, display_path(skip.path), skip.reason)
        debate = Debate(backends, config, prompts, examples)
        job = _Job(db, debate, settings, summary, config_hash, run_id, max_cost, on_event)
        job.done = db.final_ids(config_hash, retry_unparsed=retry_unparsed)
        job.excluded = excluded_samples(db, duplicates=not include_duplicates)
        drawn = nullcontext(progress) if callable(progress) else bar("annotating", progress, unit="samples")
        with drawn as on_progress:
            job.on_progress = on_progress
            await job.run(found.items, config.concurrency)
        db.finish_run(run_id, summary.to_dict())
    finally:
        db.close()
        for backend in unique:
            with suppress(Exception):
                await backend.aclose()
    return summary


class _Job:
    """State shared by the workers of one run."""

    def __init__(
        self,
        db: Store,
        debate: Debate,
        settings: MediaSettings,
        summary: RunSummary,
        config_hash: str,
        run_id: str,
        max_cost: float | None,
        on_event: Callable[[str], None],
    ) -> None:
        self.db = db
        self.debate = debate
        self.settings = settings
        self.summary = summary
        self.config_hash = config_hash
        self.run_id = run_id
        self.max_cost = max_cost
        self.on_event = on_event
        self.done: set[str] = set()
        self.excluded: dict[str, str] = {}
        self.seen: set[str] = set()
        self.stopping = False
        self.fatal_streak = 0
        self.on_progress: ProgressFn = no_progress
        self.total = 0

    def stop(self, message: str) -> None:
        if not self.stopping:
            self.stopping = True
            self.on_event(message)

    def report(self) -> None:
        """Send the run's counts to the progress callback."""
        s = self.summary
        info = f"tok {s.usage.total_tokens:,}  refusals {s.refused}  unparsed {s.unparsed}  errors {s.errors}"
        self.on_progress(s.already_done + s.annotated + s.errors, self.total, info=info)

    async def run(self, items: Sequence[MediaItem], concurrency: int) -> None:
        queue: asyncio.Queue[MediaItem] = asyncio.Queue()
        for item in items:
            queue.put_nowait(item)
        self.total = len(items)
        workers = [asyncio.create_task(self.worker(queue)) for _ in range(min(concurrency, max(len(items), 1)))]
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
                for w in workers:
                    w.cancel()

        installed = False
        with suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
            installed = True
        try:
            outcomes = await asyncio.gather(*workers, return_exceptions=True)
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)
        self.summary.remaining = queue.qsize() + sum(1 for w in workers if w.cancelled())
        failures = [o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, asyncio.CancelledError)]
        if failures:  # a bug, not a sample's error: finished samples are stored; surface it
            raise failures[0]
        if self.summary.interrupted:
            self.on_event("run the same command again to resume; finished samples are kept")

    async def worker(self, queue: asyncio.Queue[MediaItem]) -> None:
        from vhd.media.load import load_sample, sample_id

        while not self.stopping:
            try:
                item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            try:
                sid = await asyncio.to_thread(sample_id, item)
                if sid in self.seen:
                    self.summary.duplicates += 1
                    continue
                self.seen.add(sid)
                if sid in self.excluded:
                    self.summary.excluded += 1
                    self.summary.skip_reasons.append((display_path(item.path), self.excluded[sid]))
                    continue
                if sid in self.done:
                    self.summary.found += 1
                    self.summary.already_done += 1
                    self.report()
                    continue
                loaded = await asyncio.to_thread(load_sample, item, self.settings)
                self.summary.found += 1
            except MediaError as exc:
                self.summary.skipped += 1
                self.summary.skip_reasons.append((display_path(item.path), display_path(str(exc))))
                self.db.record_skip(self.run_id, display_path(item.path), display_path(str(exc)))
                continue
            await self.annotate_one(loaded)

    async def annotate_one(self, loaded: LoadedSample) -> None:
        sample = loaded.sample
        started = time.time()
        result = await self.debate.run(sample.kind, loaded.images)
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
        )
        self.db.save_annotation(ann, sample)
        self.summary.usage.add(result.usage)
        count_status(self.summary, result.verdict.status, result.verdict.harmful)
        self.report()
        if result.verdict.status is Status.ERROR and not result.retryable:
            self.fatal_streak += 1
            if self.fatal_streak >= NON_RETRYABLE_LIMIT:
                self.stop(f"stopping: {self.fatal_streak} samples in a row failed with: {result.error}")
        else:
            self.fatal_streak = 0
        if self.max_cost is not None and self.summary.usage.cost >= self.max_cost:
            self.summary.budget_reached = True
            self.stop(
                f"budget reached: ${self.summary.usage.cost:.4f} of ${self.max_cost:.4f}; finishing samples in flight"
            )
