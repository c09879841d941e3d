"""Run detectors over a labelled set, through the prediction cache.

Each sample's media is loaded once (in a thread) and judged by every detector that has no
cached prediction for it. ``concurrency`` bounds the detector calls in flight across all
detectors together. A detector failing on one sample records the error for that sample and
the run goes on; failed predictions are not cached, so a re-run retries them. Predictions are
written to the cache in small transactions as they finish, and what is buffered is committed
when the run is interrupted (Ctrl-C): a killed run resumes where it was.

Memory does not grow with the set beyond its labels: each detector's predictions go to a
`vhd.bench.predictions.PredictionLog` (a temporary file, read back by the evaluation), cached
predictions are looked up one sample at a time, and the samples with work left are fed to the
workers through a bounded queue instead of a list built up front.

A detector whose class sets ``wants_original = True`` (NudeNet, which decodes files itself) is
given an image sample's original file bytes after header checks (`vhd.bench.original`) instead
of the re-encoded JPEG vision-language models are sent; videos are sampled into frames as usual.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vhd.aio import run_sync
from vhd.bench.cache import PredictionCache, detector_key
from vhd.bench.original import original_identity, wants_original
from vhd.bench.predictions import PredictionLog
from vhd.bench.timeline import segment_truth, timeline_identity, wants_timeline
from vhd.bench.work import DetectWork, Entry, Outcome, predict_item
from vhd.detectors.base import Detector, Prediction
from vhd.errors import ConfigError, WorkerLostError
from vhd.progress import ProgressFn, renamed_on_progress

if TYPE_CHECKING:
    from vhd.bench.data import BenchItem, BenchSet
    from vhd.execution import Executor, ExecutorOptions, Pool
    from vhd.media.load import MediaSettings

FLUSH_EVERY = 32
"""Predictions buffered per detector before they are committed to the cache."""


@dataclass
class DetectorRun:
    """One detector's predictions over the set.

    Attributes:
        label: The detector's label in reports.
        name: Its registry name.
        key: The prediction-cache key (hash of its identity and the media settings).
        identity: What the key stands for.
        multiclass: Whether it names categories itself.
        predictions: By sample id, failed ones included (``harmful`` None, ``error`` set): a
            `PredictionLog` (kept on disk, read back one prediction at a time) for a run made
            by `run_bench`; any mapping for one built by hand.
        cached: Predictions taken from the cache.
        computed: Predictions made in this run (failed ones included).
        wall_s: Seconds from its first call to its last in this run (None when nothing ran).
    """

    label: str
    name: str
    key: str
    identity: dict[str, Any]
    multiclass: bool
    predictions: Mapping[str, Prediction] = field(default_factory=PredictionLog)
    cached: int = 0
    computed: int = 0
    wall_s: float | None = None

    @property
    def failed(self) -> int:
        """Samples the detector failed on."""
        if isinstance(self.predictions, PredictionLog):
            return self.predictions.failed
        return sum(1 for p in self.predictions.values() if p.harmful is None)

    @property
    def samples_per_s(self) -> float | None:
        """Throughput of this run: predictions made / wall seconds (shared concurrency included)."""
        if not self.computed or not self.wall_s:
            return None
        return self.computed / self.wall_s

    @property
    def mean_latency_s(self) -> float | None:
        """Mean seconds per successful prediction (cached ones keep their original latency)."""
        if isinstance(self.predictions, PredictionLog):
            log = self.predictions
            return log.latency_s / log.answered if log.answered else None
        lat = [p.latency_s for p in self.predictions.values() if p.harmful is not None]
        return sum(lat) / len(lat) if lat else None

    def summary(self) -> dict[str, Any]:
        """The run's counts and speed, JSON-serialisable."""
        return {
            "label": self.label,
            "name": self.name,
            "key": self.key,
            "identity": self.identity,
            "cached": self.cached,
            "computed": self.computed,
            "failed": self.failed,
            "samples_per_s": self.samples_per_s,
            "mean_latency_s": self.mean_latency_s,
        }


@dataclass
class BenchRun:
    """Every detector's predictions over one labelled set.

    Attributes:
        bench: The labelled set.
        detectors: One entry per detector, in the order given.
    """

    bench: BenchSet
    detectors: list[DetectorRun]


def _settings_identity(settings: MediaSettings | None) -> dict[str, Any]:
    from vhd.media.load import MediaSettings

    return (settings or MediaSettings()).identity()


class _Job:
    def __init__(
        self,
        detectors: Sequence[Detector],
        runs: list[DetectorRun],
        logs: list[PredictionLog],
        cache: PredictionCache | None,
        settings: MediaSettings | None,
        concurrency: int,
        progress: ProgressFn | None,
        pool: Pool[Entry, list[Outcome]] | None = None,
        timeline_ids: frozenset[str] = frozenset(),
    ) -> None:
        self.timeline_ids = timeline_ids
        self.detectors = detectors
        self.pool = pool
        self.runs = runs
        self.logs = logs
        self.cache = cache
        self.settings = settings
        self.slots = asyncio.Semaphore(concurrency)
        self.pending: list[dict[str, Prediction]] = [{} for _ in detectors]
        self.spans: list[list[float]] = [[] for _ in detectors]
        self.progress = progress
        self.done = 0

    def flush(self, index: int, force: bool = False) -> None:
        buf = self.pending[index]
        if buf and (force or len(buf) >= FLUSH_EVERY):
            if self.cache is not None:
                self.cache.put_many(self.runs[index].key, buf)
            self.pending[index] = {}

    def record(self, index: int, sid: str, pred: Prediction, start: float, end: float) -> None:
        run = self.runs[index]
        self.logs[index].put(sid, pred)
        run.computed += 1
        span = self.spans[index]
        span[:] = [min(span[0], start), max(span[1], end)] if span else [start, end]
        self.pending[index][sid] = pred
        self.flush(index)

    async def sample(self, item: BenchItem, todo: list[int], total: int) -> None:
        if self.pool is None:
            found = await predict_item(
                self.detectors, self.settings, item, todo, self.slots, item.id in self.timeline_ids
            )
        else:  # on an executor's worker; a sample whose workers kept dying fails here (not cached: retried)
            try:
                found = await self.pool.run((item, todo))
            except WorkerLostError as exc:
                now = time.perf_counter()
                found = [(index, Prediction(None, error=str(exc)), now, now) for index in todo]
        for index, pred, start, end in found:
            self.record(index, item.id, pred, start, end)
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, total)

    async def run(self, work: Iterator[tuple[BenchItem, list[int]]], total: int, concurrency: int) -> None:
        """Judge ``total`` samples from ``work``, fed through a queue of at most twice the workers."""
        workers = max(1, min(concurrency, total))
        queue: asyncio.Queue[tuple[BenchItem, list[int]] | None] = asyncio.Queue(maxsize=2 * workers)

        async def feed() -> None:
            for entry in work:
                await queue.put(entry)
            for _ in range(workers):
                await queue.put(None)

        async def worker() -> None:
            while (entry := await queue.get()) is not None:
                await self.sample(entry[0], entry[1], total)

        try:
            await asyncio.gather(feed(), *(worker() for _ in range(workers)))
        finally:
            for index in range(len(self.detectors)):
                self.flush(index, force=True)
                span = self.spans[index]
                if span:
                    self.runs[index].wall_s = span[1] - span[0]


async def arun_bench(
    bench: BenchSet,
    detectors: Sequence[Detector],
    *,
    cache: PredictionCache | None = None,
    settings: MediaSettings | None = None,
    concurrency: int = 4,
    progress: ProgressFn | None = None,
    executor: Executor | None = None,
) -> BenchRun:
    """Run detectors over a labelled set (async form of `run_bench`)."""
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
    labels = [d.label for d in detectors]
    dups = sorted({x for x in labels if labels.count(x) > 1})
    if dups:
        raise ConfigError(f"detector label {dups[0]!r} given twice: name them apart with LABEL=NAME")
    media_id = _settings_identity(settings)
    truth = segment_truth(bench.items)
    timeline_ids = frozenset(i.id for i, t in zip(bench.items, truth, strict=True) if wants_timeline(i, t))
    runs: list[DetectorRun] = []
    logs: list[PredictionLog] = []
    for det in detectors:
        det_media = {**media_id, **original_identity()} if wants_original(det) else media_id
        if timeline_ids and det.scores_frames:  # its predictions carry segments: cached apart
            det_media = {**det_media, **timeline_identity()}
        key = detector_key(det.identity(), det_media)
        log = PredictionLog()
        runs.append(DetectorRun(det.label, det.name, key, det.identity(), det.multiclass, log))
        logs.append(log)
        if cache is not None:
            cache.register(key, {"detector": det.identity(), "media": det_media})

    def todo(item: BenchItem) -> list[int]:
        return [i for i, log in enumerate(logs) if item.id not in log]

    total, needed = 0, set()
    for item in bench.items:  # cached predictions into the logs, one sample at a time
        if cache is not None:
            for run, log in zip(runs, logs, strict=True):
                if item.id not in log and (pred := cache.get(run.key, item.id)) is not None:
                    log.put(item.id, pred)
                    run.cached += 1
        left = todo(item)
        total += bool(left)
        needed.update(left)
    work = ((item, left) for item in bench.items if (left := todo(item)))
    if executor is not None and not executor.in_process and total:  # detectors load on the workers
        share = -(-concurrency // max(1, executor.options.workers))
        async with executor.pool(DetectWork(detectors, sorted(needed), settings, share, timeline_ids)) as pool:
            job = _Job(detectors, runs, logs, cache, settings, concurrency, progress, pool, timeline_ids)
            await job.run(work, total, concurrency)
        return BenchRun(bench=bench, detectors=runs)
    try:
        for i in sorted(needed):
            await detectors[i].check()
        job = _Job(detectors, runs, logs, cache, settings, concurrency, progress, timeline_ids=timeline_ids)
        await job.run(work, total, concurrency)
    finally:
        for i in sorted(needed):
            await detectors[i].aclose()
    return BenchRun(bench=bench, detectors=runs)


@renamed_on_progress
def run_bench(
    bench: BenchSet,
    detectors: Sequence[Detector],
    *,
    cache: PredictionCache | None = None,
    settings: MediaSettings | None = None,
    concurrency: int = 4,
    progress: ProgressFn | None = None,
    executor: str | Executor = "local",
    executor_options: ExecutorOptions | None = None,
) -> BenchRun:
    """Run detectors over a labelled set, taking what the cache holds and caching the rest.

    Args:
        bench: The labelled set (`vhd.bench.data.load_bench_set`).
        detectors: The detectors, with distinct labels.
        cache: Where predictions are kept between runs (None: nothing cached).
        settings: How media is prepared (frames per video, image size).
        concurrency: Detector calls in flight at once, across all detectors.
        progress: Called with (samples done, samples to do) after each sample.
        executor: Where detectors run: ``local`` (here) or ``ray`` (Ray actors, each loading its
            own copy of the detectors and reading media by path); the cache is written here.
        executor_options: Workers, Ray address, CPUs/GPUs per worker.

    Returns:
        Every detector's predictions, with counts and throughput.

    Raises:
        ConfigError: Duplicate labels or a bad concurrency.
        VhdError: A detector's `check()` failed (missing weights, key or endpoint).
    """
    from vhd.execution import executor as find_executor

    runner = find_executor(executor, executor_options)
    return run_sync(
        arun_bench(
            bench,
            detectors,
            cache=cache,
            settings=settings,
            concurrency=concurrency,
            progress=progress,
            executor=None if runner.in_process else runner,
        )
    )
