"""The ``hf`` backend's worker thread: loads the model, then serves queued calls in batches.

`BatchWorker` owns one thread. It loads the model, then takes queued requests and gathers them
into batches (up to ``max_batch_size``, waiting at most ``wait_s`` for more after the first),
splits each batch into groups that share decoding settings and runs each group as one
left-padded ``model.generate`` call. Only this thread touches the model, so forward passes
never overlap. Callers in any event loop wait on `concurrent.futures.Future` objects.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from vhd.backends.base import GenerateConfig, Message, Output
from vhd.backends.hf_batch import LoadedModel, Prepared, generate_group, group_key, prepare, video_key
from vhd.errors import BackendError

log = logging.getLogger(__name__)


@dataclass
class _Request:
    messages: Sequence[Message]
    config: GenerateConfig
    future: Future[Output]
    start: float = field(default_factory=time.perf_counter)


_STOP = None


class BatchWorker:
    """One thread that loads a model and serves queued requests in batches.

    Args:
        load: Called once in the worker thread; returns the loaded model.
        max_batch_size: Most requests in one batch.
        wait_s: Longest wait for more requests after the first one arrives.
        name: Thread name, for logs.
    """

    def __init__(self, load: Callable[[], LoadedModel], *, max_batch_size: int, wait_s: float, name: str) -> None:
        self._load = load
        self._max_batch = max_batch_size
        self._wait_s = wait_s
        self._queue: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self.ready: Future[None] = Future()
        """Resolves once the model is loaded, or to the loading error."""
        self.loaded: LoadedModel | None = None
        """The model while the worker runs; dropped when it stops."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, messages: Sequence[Message], config: GenerateConfig) -> Future[Output]:
        """Queue one conversation; the future resolves to its `Output`."""
        request = _Request(messages, config, Future())
        self._queue.put(request)
        return request.future

    def stop(self, timeout: float | None = None) -> None:
        """Serve what was queued before this call, then end the thread (later calls fail)."""
        self._queue.put(_STOP)
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            loaded: LoadedModel | None = self._load()
        except BaseException as exc:
            self.ready.set_exception(exc)
            loaded = None
        else:
            self.loaded = loaded
            self.ready.set_result(None)
        while loaded is not None:
            batch, stopping = self._next_batch()
            try:
                self._serve(loaded, batch)
            except Exception as exc:  # a bug must not leave callers waiting forever
                log.exception("hf worker failed on a batch")
                pending = [r for r in batch if not r.future.done()]
                self._fail(pending, BackendError(f"hf worker failed: {type(exc).__name__}: {exc}"))
            if stopping:
                break
        self.loaded = loaded = None
        self._drain()

    def _next_batch(self) -> tuple[list[_Request], bool]:
        first = self._queue.get()
        if first is _STOP:
            return [], True
        batch = [first]
        deadline = time.monotonic() + self._wait_s
        while len(batch) < self._max_batch:
            remaining = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return batch, True
            batch.append(item)
        return batch, False

    def _serve(self, loaded: LoadedModel, batch: list[_Request]) -> None:
        live = [r for r in batch if r.future.set_running_or_notify_cancel()]
        groups: dict[tuple[Any, ...], list[_Request]] = {}
        for request in live:
            key = group_key(request.config)
            frames = video_key(request.messages)
            if frames:  # clips of a batch must have the same frame counts
                key = (*key, frames)
            if request.config.seed is not None and request.config.temperature > 0:
                key = (*key, id(request))  # seeded sampling runs alone, so it is reproducible
            groups.setdefault(key, []).append(request)
        log.debug("hf batch: %d calls in %d group(s)", len(live), len(groups))
        for group in groups.values():
            self._run_group(loaded, group)

    def _run_group(self, loaded: LoadedModel, group: list[_Request]) -> None:
        ready: list[tuple[_Request, Prepared]] = []
        began = time.perf_counter()
        for request in group:
            try:
                ready.append((request, prepare(loaded.processor, request.messages, loaded.cache)))
            except BackendError as exc:
                request.future.set_exception(exc)
        loaded.stats.preprocess_s += time.perf_counter() - began  # rendering prompts, decoding images
        if ready:
            self._generate(loaded, ready)

    def _generate(self, loaded: LoadedModel, ready: list[tuple[_Request, Prepared]]) -> None:
        import torch

        requests = [request for request, _ in ready]
        try:
            outputs = generate_group(loaded, [p for _, p in ready], requests[0].config)
        except torch.OutOfMemoryError as exc:
            if len(ready) > 1:
                log.warning("hf: out of memory at batch size %d; splitting the batch", len(ready))
                with contextlib.suppress(Exception):
                    torch.cuda.empty_cache()
                half = len(ready) // 2
                self._generate(loaded, ready[:half])
                self._generate(loaded, ready[half:])
                return
            msg = f"hf: out of memory on a single request ({exc}); use a smaller model or dtype"
            self._fail(requests, BackendError(msg))
            return
        except BackendError as exc:
            self._fail(requests, exc)
            return
        except Exception as exc:
            msg = f"hf generation failed: {type(exc).__name__}: {exc}"
            self._fail(requests, BackendError(msg))
            return
        now = time.perf_counter()
        for request, output in zip(requests, outputs, strict=True):
            output.latency_s = now - request.start
            request.future.set_result(output)

    @staticmethod
    def _fail(group: list[_Request], exc: BaseException) -> None:
        for request in group:
            request.future.set_exception(exc)

    def _drain(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not _STOP and item.future.set_running_or_notify_cancel():
                item.future.set_exception(BackendError("hf backend was closed"))
