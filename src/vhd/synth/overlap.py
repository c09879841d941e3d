"""The local run of `vhd generate`: the host work of batch k overlaps the pipeline call of batch k+1.

A diffusers pipeline call releases the GIL in its kernels, and so do zlib, hashing and SQLite:
running the pipeline in one thread while this thread encodes, signs, writes and commits the batch
before keeps the accelerator busy between calls. Two batches at most are in flight, outputs are
committed in prompt order by the calling thread (the only one that touches the store), and a
pipeline failure surfaces after the batch before it is committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from vhd.synth.batch import Generated, finish_batch, identity, plan_jobs
from vhd.synth.generators import Generator
from vhd.synth.work import Batch


class Timings(Protocol):
    """Where `overlapped` adds up its seconds."""

    generate_s: float
    host_s: float


def overlapped(
    gen: Generator,
    seed: int,
    planned: Iterator[Batch],
    save: Callable[..., None],
    advance: Callable[[int], None],
    result: Timings,
) -> None:
    """Run batch k+1's pipeline call in a pipeline thread while this thread finishes and commits batch k.

    Args:
        gen: The generator.
        seed: ``--seed``.
        planned: The batches, planned lazily (the caller stops yielding once asked to stop).
        save: Commits one output: ``save(item, existing_file_or_None)``.
        advance: Called with a batch's row count once it is committed (the progress).
        result: Where pipeline and host seconds add up (`vhd.synth.generate.GenerateResult`).

    At most two batches are in flight (one whose host work runs here, one in or queued for the
    pipeline); outputs are committed in prompt order, here, so the store is written by this
    thread only. Once ``stop`` is set no batch is planned, and the ones in flight finish.
    """

    def call(jobs: list[Any]) -> tuple[list[Any], float]:
        began = time.perf_counter()
        made = gen.run(jobs)
        return made, time.perf_counter() - began

    def finish(batch: Batch, jobs: list[Any], running: Future[tuple[list[Any], float]] | None) -> None:
        began = time.perf_counter()
        ready: list[tuple[Generated, Path | None]] = list(batch.found)
        if running is not None:
            waited = time.perf_counter()
            made, took = running.result()  # a pipeline failure stops the run, as before
            began += time.perf_counter() - waited  # waiting for the pipeline is not host work
            result.generate_s += took
            finished = finish_batch(gen, batch.rows, jobs, made, ident=ident, first_frames=batch.first_frames)
            ready += [(item, None) for item in finished]
        for item, path in sorted(ready, key=lambda pair: pair[0].row.line):  # in prompt order
            save(item, path)
        result.host_s += time.perf_counter() - began
        advance(batch.size)

    ident: dict[str, Any] = {}
    pending: tuple[Batch, list[Any], Future[tuple[list[Any], float]] | None] | None = None
    pipeline = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vhd-pipeline")
    try:
        for batch in planned:
            running = None
            jobs: list[Any] = []
            if batch.rows:
                ident = ident or identity(gen)  # loads the pipeline, here, before the first call
                jobs = plan_jobs(gen, batch.rows, base_seed=seed, first_frames=batch.first_frames)
                running = pipeline.submit(call, jobs)
            if pending is not None:
                finish(*pending)
            pending = (batch, jobs, running)
        if pending is not None:
            finish(*pending)
    finally:  # after a failure or a second Ctrl-C, a batch not started yet is not started
        pipeline.shutdown(wait=True, cancel_futures=True)
