"""The local run of `vhd generate`: the host work of batch k overlaps the pipeline call of batch k+1.

A diffusers pipeline call releases the GIL in its kernels, and so do zlib, numpy, hashing and
SQLite: running the pipeline in one thread while other threads finish the batch before keeps the
accelerator busy between calls. The pipeline thread only calls the pipeline (its float outputs are
converted to uint8 by the host threads). Each output of a batch is finished (converted,
watermarked, encoded, signed, hashed: `vhd.synth.batch.finish_one`) on a small pool of host
threads, so a batch's host work takes a fraction of its serial time, and the last batch's (which
nothing follows) too; the calling thread commits the outputs in prompt order as they are ready
(it is the only one that touches the store). Two batches at most are in flight, and a pipeline
failure surfaces after the batch before it is committed. The files and store rows are the same
as a serial run's. On Linux the host threads run at a lower OS priority (`HOST_NICE`), so the
pipeline thread gets a CPU as soon as it wakes.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from vhd.synth.batch import Generated, call_size, finish_one, identity, plan_jobs, watermarker
from vhd.synth.generators import Generator
from vhd.synth.work import Batch

HOST_THREADS = max(1, min(4, os.cpu_count() or 1))
"""Threads that finish outputs: one per CPU, up to 4 (encoding, watermarking and hashing release the GIL)."""

HOST_NICE = 10
"""How far the host threads lower their own OS priority (Linux per-thread nice; 0: not at all).

With as many busy host threads as CPUs, the pipeline thread waking from a kernel waited for a CPU
(a few ms a wake-up, which an accelerator spends idle); a woken nice-0 thread now preempts a nice-10
host thread at once. Host threads still get every CPU the pipeline thread leaves (it mostly waits),
and only they are lowered: the pool's initializer runs in each of them, never in another thread."""


class Timings(Protocol):
    """Where `overlapped` adds up its seconds."""

    generate_s: float
    host_s: float


def lower_priority(increment: int) -> None:
    """Lower the OS priority of the calling thread only, by ``increment`` nice levels (the host pool's initializer).

    Linux only: there ``setpriority`` with a thread id changes that one thread. Elsewhere (where a
    thread id is no process id) and where the system refuses, it does nothing: the thread keeps
    the process's priority. Raising a priority back needs privileges, so it is only ever called
    in threads that end with the run.
    """
    if increment <= 0 or sys.platform != "linux":
        return
    tid = threading.get_native_id()
    with contextlib.suppress(OSError):  # a sandbox without setpriority: the thread keeps the process's priority
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + increment))


def start_library_pools(watermark: bool) -> None:
    """Start, from the calling thread, the worker threads a library of the host work starts on first use.

    A new thread inherits its creator's nice: OpenCV (the watermark's colour conversions) starts
    its process-wide pool on its first parallel call, and started by a host thread that pool would
    run at the host threads' lower priority for the rest of the process. One small parallel
    conversion here (well under a millisecond) starts it at the process's priority instead.
    """
    if not watermark:
        return
    import cv2
    import numpy as np

    cv2.cvtColor(np.zeros((512, 512, 3), dtype=np.uint8), cv2.COLOR_BGR2YUV)  # 4 stripes: a parallel call


def overlapped(
    gen: Generator,
    seed: int,
    planned: Iterator[Batch],
    save: Callable[..., None],
    advance: Callable[[int], None],
    result: Timings,
    *,
    host_threads: int | None = None,
) -> None:
    """Run batch k+1's pipeline call in a pipeline thread while host threads finish batch k and this thread commits it.

    Args:
        gen: The generator.
        seed: ``--seed``.
        planned: The batches, planned lazily (the caller stops yielding once asked to stop).
        save: Commits one output: ``save(item, existing_file_or_None)``.
        advance: Called with a batch's row count once it is committed (the progress).
        result: Where pipeline and host seconds add up (`vhd.synth.generate.GenerateResult`).
        host_threads: Threads finishing outputs in parallel (None: `HOST_THREADS`).

    At most two batches are in flight (one being finished and committed, one in or queued for
    the pipeline); outputs are committed in prompt order, here, so the store is written by this
    thread only. Once ``stop`` is set no batch is planned, and the ones in flight finish.
    """

    def call(jobs: list[Any]) -> tuple[list[Any], float]:
        began = time.perf_counter()
        made = gen.run(jobs)
        return made, time.perf_counter() - began

    def finish(batch: Batch, jobs: list[Any], running: Future[tuple[list[Any], float]] | None) -> None:
        began = time.perf_counter()
        ready: list[tuple[int, Generated | Future[Generated], Path | None]] = [
            (item.row.line, item, path) for item, path in batch.found
        ]
        if running is not None:
            waited = time.perf_counter()
            made, took = running.result()  # a pipeline failure stops the run, as before
            began += time.perf_counter() - waited  # waiting for the pipeline is not host work
            result.generate_s += took
            firsts: list[tuple[Any, str] | None] = [*batch.first_frames] if batch.first_frames else [None] * len(jobs)
            size = call_size(gen, jobs)
            for row, job, one, first in zip(batch.rows, jobs, made, firsts, strict=True):
                task = hosts.submit(
                    finish_one, gen, row, job, one, ident=ident, first_frame=first, marker=marker, called=size
                )
                ready.append((row.line, task, None))
            del made  # each task holds its own output's frames: they go as it finishes
        for _, item, path in sorted(ready, key=lambda entry: entry[0]):  # in prompt order, each once it is ready
            save(item.result() if isinstance(item, Future) else item, path)
        result.host_s += time.perf_counter() - began
        advance(batch.size)

    ident: dict[str, Any] = {}
    marker: Any = None
    pending: tuple[Batch, list[Any], Future[tuple[list[Any], float]] | None] | None = None
    pipeline = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vhd-pipeline")
    threads = HOST_THREADS if host_threads is None else host_threads
    hosts = ThreadPoolExecutor(
        max_workers=max(1, threads), thread_name_prefix="vhd-host", initializer=lower_priority, initargs=(HOST_NICE,)
    )
    try:
        for batch in planned:
            running = None
            jobs: list[Any] = []
            if batch.rows:
                if not ident:
                    ident = identity(gen)  # loads the pipeline, here, before the first call
                    marker = watermarker(gen)
                    start_library_pools(marker is not None and HOST_NICE > 0)  # before any host thread starts
                jobs = plan_jobs(gen, batch.rows, base_seed=seed, first_frames=batch.first_frames)
                running = pipeline.submit(call, jobs)
            if pending is not None:
                finish(*pending)
            pending = (batch, jobs, running)
        if pending is not None:
            finish(*pending)
    finally:  # after a failure or a second Ctrl-C, a batch not started yet is not started
        pipeline.shutdown(wait=True, cancel_futures=True)
        hosts.shutdown(wait=True, cancel_futures=True)
