"""The ``vllm-engine`` backend: a vLLM engine in this process (``vllm.LLM``), one per GPU worker.

``vllm-engine:MODEL`` names a hub id or a local model directory that vLLM can serve
(``vllm-engine:Qwen/Qwen2.5-VL-7B-Instruct``). The engine loads once, in a worker thread, on
`VLLMEngineBackend.check` or the first call, with prefix caching on, so the system prompts and the
judge's in-context prefix, identical across samples, are computed once. Concurrent calls are
gathered (up to ``max_batch_size``, waiting at most ``batch_wait_ms`` for company) and sent as one
``LLM.chat`` call with one ``SamplingParams`` per conversation; vLLM schedules them with
continuous batching. Pair it with ``vhd annotate --stage-wise`` so a batch holds one role's calls.

Needs ``pip install 'vhd[vllm]'`` and a CUDA GPU (vLLM's PyPI wheels are CUDA-only). Options
(``[backends.vllm-engine]``)::

    tensor_parallel_size = 1
    gpu_memory_utilization = 0.9
    max_model_len = 32768          # else the model's
    dtype = "auto"
    max_images = 16                # images per conversation (in-context examples included)
    enable_prefix_caching = true
    max_batch_size = 256
    batch_wait_ms = 20
    engine_kwargs = { enforce_eager = true }     # any other vllm.LLM / EngineArgs argument
    sampling = { top_k = 20 }                     # extra SamplingParams fields

The score works as with ``openai``: the judge asks for the first token's top log-probabilities
(``SamplingParams(logprobs=k)``), read from the request output.

Everything that does not need the engine (options, messages, sampling arguments, output
conversion) is a pure function here and tested on plain values; the engine path is tested on a
GPU (``gpu`` marker).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vhd.backends.base import Backend, GenerateConfig, Message, Output, validate_table
from vhd.errors import BackendError, BackendUnavailableError, MissingDependencyError
from vhd.media.encoded import EncodedImage

log = logging.getLogger(__name__)


class VLLMEngineOptions(BaseModel):
    """Options of the ``vllm-engine`` backend (``[backends.vllm-engine]``); see the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tensor_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    max_model_len: int | None = Field(default=None, ge=1)
    dtype: str = "auto"
    max_images: int = Field(default=16, ge=1)
    enable_prefix_caching: bool = True
    trust_remote_code: bool = False
    revision: str | None = None
    seed: int | None = None
    max_batch_size: int = Field(default=256, ge=1)
    batch_wait_ms: float = Field(default=20.0, ge=0)
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    sampling: dict[str, Any] = Field(default_factory=dict)


def parse_options(options: Mapping[str, Any]) -> VLLMEngineOptions:
    """Validate ``[backends.vllm-engine]``.

    Raises:
        ConfigError: Unknown key (listing the valid ones) or a bad value.
    """
    return validate_table(VLLMEngineOptions, options, "vllm-engine")


def engine_kwargs(model: str, opts: VLLMEngineOptions) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM``: prefix caching on, image limit per prompt, the user's extras last."""
    kwargs: dict[str, Any] = {
        "model": model,
        "tensor_parallel_size": opts.tensor_parallel_size,
        "gpu_memory_utilization": opts.gpu_memory_utilization,
        "dtype": opts.dtype,
        "enable_prefix_caching": opts.enable_prefix_caching,
        "limit_mm_per_prompt": {"image": opts.max_images},
        "trust_remote_code": opts.trust_remote_code,
    }
    if opts.max_model_len is not None:
        kwargs["max_model_len"] = opts.max_model_len
    if opts.revision is not None:
        kwargs["revision"] = opts.revision
    if opts.seed is not None:
        kwargs["seed"] = opts.seed
    return kwargs | opts.engine_kwargs


def chat_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation in the OpenAI chat format ``LLM.chat`` takes; images as base64 data URLs.

    Raises:
        BackendError: An image outside a user message (no chat template places one there).
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message.content, str) or not message.images:
            out.append({"role": message.role, "content": message.text})
            continue
        if message.role != "user":
            raise BackendError(f"vllm-engine: images are only allowed in user messages, not {message.role} ones")
        parts: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, EncodedImage):
                parts.append({"type": "image_url", "image_url": {"url": part.data_url}})
            elif part:
                parts.append({"type": "text", "text": part})
        out.append({"role": message.role, "content": parts})
    return out


def sampling_kwargs(config: GenerateConfig, opts: VLLMEngineOptions) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` from a role's decoding settings."""
    kwargs: dict[str, Any] = {"n": 1, "temperature": config.temperature, "max_tokens": config.max_tokens}
    if config.top_p is not None:
        kwargs["top_p"] = config.top_p
    if config.seed is not None:
        kwargs["seed"] = config.seed
    if config.stop:
        kwargs["stop"] = list(config.stop)
    if config.logprobs:
        kwargs["logprobs"] = max(1, config.top_logprobs)
    return kwargs | opts.sampling


def first_token_table(position: Mapping[int, tuple[str | None, float]]) -> dict[str, float] | None:
    """``{token text: logprob}`` from the first generated position (``{token id: (text, logprob)}``).

    Tokens that decode to the same text keep the higher log-probability; undecoded ones are left out.
    """
    table: dict[str, float] = {}
    for text, logprob in position.values():
        if text is not None:
            table[text] = max(logprob, table.get(text, logprob))
    return table or None


def to_output(
    text: str,
    *,
    prompt_tokens: int,
    completion_tokens: int,
    finish_reason: str | None,
    first_position: Mapping[int, tuple[str | None, float]] | None,
    model: str,
) -> Output:
    """An `Output` from the fields of one vLLM completion."""
    return Output(
        text=text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        first_token_logprobs=first_token_table(first_position) if first_position else None,
        finish_reason=finish_reason,
        model=model,
    )


def read_request_output(result: Any, model: str) -> Output:
    """Convert a ``vllm.RequestOutput`` (engine path; tested on a GPU)."""
    completion = result.outputs[0]
    first: dict[int, tuple[str | None, float]] | None = None
    if completion.logprobs:
        first = {tid: (lp.decoded_token, float(lp.logprob)) for tid, lp in completion.logprobs[0].items()}
    return to_output(
        completion.text,
        prompt_tokens=len(result.prompt_token_ids or ()),
        completion_tokens=len(completion.token_ids or ()),
        finish_reason=completion.finish_reason,
        first_position=first,
        model=model,
    )


@dataclass
class _Request:
    messages: list[dict[str, Any]]
    sampling: dict[str, Any]
    future: Future[Output]
    start: float = field(default_factory=time.perf_counter)


class _EngineWorker:
    """One thread that owns the engine and sends gathered calls as one ``LLM.chat``."""

    def __init__(self, model: str, opts: VLLMEngineOptions) -> None:
        self.model = model
        self.opts = opts
        self.ready: Future[None] = Future()
        self._queue: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="vhd-vllm-engine", daemon=True)
        self._thread.start()

    def submit(self, messages: list[dict[str, Any]], sampling: dict[str, Any]) -> Future[Output]:
        request = _Request(messages, sampling, Future())
        self._queue.put(request)
        return request.future

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _load(self) -> Any:
        try:
            import vllm
        except ImportError as exc:
            raise MissingDependencyError("vllm", "vllm") from exc
        try:
            return vllm.LLM(**engine_kwargs(self.model, self.opts))
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise BackendUnavailableError(f"vllm-engine: cannot start {self.model!r}: {first}") from exc

    def _run(self) -> None:
        try:
            llm = self._load()
        except BaseException as exc:
            self.ready.set_exception(exc)
            llm = None
        else:
            self.ready.set_result(None)
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            deadline = time.monotonic() + self.opts.batch_wait_ms / 1000
            while len(batch) < self.opts.max_batch_size:
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            self._serve(llm, batch)

    def _serve(self, llm: Any, batch: list[_Request]) -> None:
        live = [r for r in batch if r.future.set_running_or_notify_cancel()]
        if llm is None:
            for r in live:
                r.future.set_exception(BackendError("vllm-engine: the engine did not start"))
            return
        try:
            from vllm import SamplingParams

            params = [SamplingParams(**r.sampling) for r in live]
            results = llm.chat([r.messages for r in live], sampling_params=params, use_tqdm=False)
            outputs = [read_request_output(result, self.model) for result in results]
        except Exception as exc:
            log.exception("vllm-engine failed on a batch of %d", len(live))
            error = BackendError(f"vllm-engine: generation failed: {type(exc).__name__}: {exc}")
            for r in live:
                r.future.set_exception(error)
            return
        now = time.perf_counter()
        for request, output in zip(live, outputs, strict=True):
            output.latency_s = now - request.start
            request.future.set_result(output)


class VLLMEngineBackend(Backend):
    """A vLLM engine in this process (``vllm-engine:MODEL``); see the module docstring."""

    name = "vllm-engine"
    supports_logprobs = True

    def __init__(self, model: str, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(model, options)
        self.opts = parse_options(self.options)
        self._worker: _EngineWorker | None = None
        self._lock = threading.Lock()

    def identity(self) -> dict[str, Any]:
        """Spec, dtype, revision, engine and sampling extras (what changes answers)."""
        return {
            "spec": self.spec,
            "dtype": self.opts.dtype,
            "revision": self.opts.revision,
            "max_model_len": self.opts.max_model_len,
            "engine_kwargs": dict(self.opts.engine_kwargs),
            "sampling": dict(self.opts.sampling),
        }

    def _ensure_worker(self) -> _EngineWorker:
        with self._lock:
            if self._worker is None:
                self._worker = _EngineWorker(self.model, self.opts)
            return self._worker

    async def check(self) -> None:
        """Start the engine now (minutes for a large model), so a missing GPU or model fails before any work.

        Raises:
            MissingDependencyError: vLLM is not installed.
            BackendUnavailableError: The engine could not start (no GPU, unknown model...).
        """
        await asyncio.wrap_future(self._ensure_worker().ready)

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> Output:
        """Queue one conversation for the next engine batch and wait for its answer."""
        worker = self._ensure_worker()
        await asyncio.wrap_future(worker.ready)
        future = worker.submit(chat_messages(messages), sampling_kwargs(config, self.opts))
        return await asyncio.wrap_future(future)

    async def aclose(self) -> None:
        """Stop the worker thread and drop the engine."""
        worker, self._worker = self._worker, None
        if worker is not None:
            await asyncio.to_thread(worker.stop)
