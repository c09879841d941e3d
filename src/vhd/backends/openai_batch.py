"""OpenAI-compatible batch APIs: many chat requests as one JSONL file, answered within 24 hours.

`BatchRunner` sits behind an ``openai`` backend. Each `BatchRunner.request` (one chat call of a
debate) waits in a pending list; once no new request has come for ``quiet_s`` seconds (every
debate in flight is waiting for an answer), the pending requests go out as one batch, the way the
files and batches endpoints document it: the JSONL upload (``POST /v1/files``, purpose
``batch``; one line ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}``
per request), ``POST /v1/batches`` (``completion_window`` 24h), polling ``GET
/v1/batches/{id}`` every ``poll_s`` seconds until the batch is completed, failed, expired or
cancelled, then ``GET /v1/files/{id}/content`` for the output file (one line per request:
``{"custom_id", "response": {"status_code", "body"}, "error"}``) and the error file. The debates
then take their next turn, so a debate runs stage by stage: every sample's first turn in one
batch, then the next turns in the next.

A request's ``custom_id`` is a hash of its body, so a debate replayed after a stop (even days
later) asks the very same questions: a `BatchLedger` (the store, in ``vhd annotate --batch-api``)
remembers which batch holds which request, and a request already in a batch is answered from that
batch (polled until done) instead of being sent again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from vhd.backends.base import Backend, GenerateConfig, Message, Output
from vhd.backends.openai_payload import build_payload, is_content_policy_error, parse_response
from vhd.errors import BackendError
from vhd.netread import DEFAULT_MAX_REPLY_BYTES, parse_json, reply_limits

if TYPE_CHECKING:
    from vhd.backends.openai import OpenAIBackend

ENDPOINT = "/v1/chat/completions"
"""The endpoint every request of a batch goes to."""

DONE = ("completed", "failed", "expired", "cancelled")
"""Batch statuses after which nothing more happens."""

LIVE = ("validating", "in_progress", "finalizing", "completed")
"""Statuses of batches whose requests need not be sent again."""

MAX_REQUESTS = 50_000
"""OpenAI's limit on requests in one batch."""

FILE_TIMEOUT = 600.0
"""Seconds a result file may take to download, start to end (at least; the backend's timeout if longer)."""


@dataclass(frozen=True)
class BatchInfo:
    """A batch as the endpoint reported it.

    Attributes:
        batch_id: Its id.
        input_file_id: The uploaded requests.
        status: ``validating``, ``in_progress``, ``finalizing``, ``completed``, ``failed``,
            ``expired``, ``cancelling`` or ``cancelled``.
        output_file_id: The results, when there are any.
        error_file_id: The failed requests, when there are any.
    """

    batch_id: str
    input_file_id: str
    status: str
    output_file_id: str | None = None
    error_file_id: str | None = None


class BatchLedger(Protocol):
    """Where batch ids are kept between runs (`vhd.store.batches` in ``vhd annotate``)."""

    def sent(self, custom_ids: Sequence[str]) -> dict[str, str]:
        """For requests already in a batch that is not failed, expired or cancelled: their batch id."""
        ...

    def created(self, info: BatchInfo, custom_ids: Sequence[str]) -> None:
        """A batch was just created with these requests."""
        ...

    def updated(self, info: BatchInfo, *, collected: bool) -> None:
        """A batch's status changed (``collected``: its results were read)."""
        ...


def custom_id(body: Mapping[str, Any]) -> str:
    """A request's id in a batch: a hash of its body (the same question gets the same id)."""
    return "vhd-" + hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:40]


def request_line(cid: str, body: Mapping[str, Any]) -> str:
    """One line of a batch input file."""
    return json.dumps({"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": body}, separators=(",", ":"))


def read_results(text: str, max_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> dict[str, Output | BackendError]:
    """Answers by ``custom_id`` from an output or error file's lines (bad lines are skipped).

    Each line is read as one reply (`vhd.netread.parse_json` under ``max_bytes``): a line nested
    too deeply or holding too many objects is skipped, so only its request goes unanswered.
    """
    results: dict[str, Output | BackendError] = {}
    for line in text.splitlines():
        try:
            item = parse_json(line, max_bytes=max_bytes)
        except ValueError:
            continue
        if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
            continue
        cid = item["custom_id"]
        response = item.get("response") if isinstance(item.get("response"), dict) else None
        status = int(response.get("status_code") or 0) if response else 0
        body = response.get("body") if response else None
        if response and status == 200:
            try:
                results[cid] = parse_response(body)
            except BackendError as exc:
                results[cid] = exc
        elif response and is_content_policy_error(status, body):
            results[cid] = Output(text="", refused=True, finish_reason="content_filter", extra={"batch_status": status})
        else:
            error = item.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
            message = error.get("message") if isinstance(error, dict) else str(error)
            results[cid] = BackendError(f"batch request failed (HTTP {status or '-'}: {message})"[:300], retryable=True)
    return results


@dataclass
class _Pending:
    body: dict[str, Any]
    futures: list[asyncio.Future[Output]] = field(default_factory=list)


class BatchRunner:
    """Sends an ``openai`` backend's chat requests through the batch API (see the module docstring).

    Args:
        backend: The ``openai`` backend whose endpoint, key and options the batches use.
        ledger: Where batch ids are kept (None: not kept; a stopped run sends again).
        quiet_s: Seconds without a new request after which the pending ones go out.
        poll_s: Seconds between status checks of a batch in progress.
        max_requests: Most requests in one batch.
        stage: A word recorded with each batch (what it holds).
        on_event: One-line progress messages (batch created, completed).
    """

    def __init__(
        self,
        backend: OpenAIBackend,
        ledger: BatchLedger | None = None,
        *,
        quiet_s: float = 0.5,
        poll_s: float = 30.0,
        max_requests: int = MAX_REQUESTS,
        stage: str = "debate",
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        self.backend = backend
        self.ledger = ledger
        self.quiet_s = quiet_s
        self.poll_s = poll_s
        self.max_requests = max_requests
        self.stage = stage
        self.on_event = on_event or (lambda _m: None)
        self.batches_created = 0
        self.requests_sent = 0
        self._pending: dict[str, _Pending] = {}
        self._last = 0.0
        self._timer: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self._results: dict[str, dict[str, Output | BackendError]] = {}
        self._collecting: dict[str, asyncio.Task[dict[str, Output | BackendError]]] = {}

    def wrap(self) -> BatchedBackend:
        """A backend that answers through this runner (for the debate)."""
        return BatchedBackend(self)

    async def request(self, body: dict[str, Any]) -> Output:
        """Queue one chat request and wait for its answer from a batch."""
        cid = custom_id(body)
        future: asyncio.Future[Output] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(cid, _Pending(body)).futures.append(future)
        self._last = time.monotonic()
        if self._timer is None or self._timer.done():
            self._timer = asyncio.create_task(self._flush_when_quiet())
        return await future

    async def aclose(self) -> None:
        """Stop the timer; fail what is still pending (a stopped run asks again next time)."""
        if self._timer is not None:
            self._timer.cancel()
        for task in (*self._sending, *self._collecting.values()):
            task.cancel()
        self._fail(list(self._pending.items()), BackendError("the batch run stopped before an answer", retryable=True))
        self._pending.clear()

    async def _flush_when_quiet(self) -> None:
        while self._pending:
            wait = self._last + self.quiet_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            items = list(self._pending.items())[: self.max_requests]
            for cid, _ in items:
                del self._pending[cid]
            task = asyncio.create_task(self._send(items))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send(self, items: list[tuple[str, _Pending]]) -> None:
        try:
            known = self.ledger.sent([cid for cid, _ in items]) if self.ledger is not None else {}
            fresh = [(cid, p) for cid, p in items if cid not in known]
            by_batch: dict[str, list[tuple[str, _Pending]]] = {}
            for cid, p in items:
                if cid in known:
                    by_batch.setdefault(known[cid], []).append((cid, p))
            for batch_id, group in by_batch.items():
                results = await self._collect(batch_id)
                answered = [(cid, p) for cid, p in group if isinstance(results.get(cid), Output)]
                self._resolve(answered, results)
                fresh += [(cid, p) for cid, p in group if not isinstance(results.get(cid), Output)]  # ask again
            if fresh:
                batch_id = await self._create(fresh)
                self._resolve(fresh, await self._collect(batch_id))
        except asyncio.CancelledError:
            raise
        except BackendError as exc:
            self._fail(items, exc)
        except Exception as exc:  # the SDK's errors: the samples fail and are retried next run
            self._fail(items, BackendError(f"batch API call failed: {type(exc).__name__}: {exc}"[:300], retryable=True))

    async def _create(self, items: list[tuple[str, _Pending]]) -> str:
        client = await self.backend.sdk_client()
        data = ("\n".join(request_line(cid, p.body) for cid, p in items) + "\n").encode()
        uploaded = await client.files.create(file=("vhd-batch.jsonl", data, "application/jsonl"), purpose="batch")
        batch = await client.batches.create(
            input_file_id=uploaded.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"vhd_stage": self.stage},
        )
        info = BatchInfo(batch.id, uploaded.id, str(batch.status))
        if self.ledger is not None:
            self.ledger.created(info, [cid for cid, _ in items])
        self.batches_created += 1
        self.requests_sent += len(items)
        self.on_event(f"batch {batch.id}: {len(items)} request(s) sent ({self.backend.spec})")
        return str(batch.id)

    async def _collect(self, batch_id: str) -> dict[str, Output | BackendError]:
        if batch_id in self._results:
            return self._results[batch_id]
        task = self._collecting.get(batch_id)
        if task is None:
            task = asyncio.create_task(self._poll(batch_id))
            self._collecting[batch_id] = task
        return await asyncio.shield(task)

    async def _poll(self, batch_id: str) -> dict[str, Output | BackendError]:
        client = await self.backend.sdk_client()
        while True:
            batch = await client.batches.retrieve(batch_id)
            status = str(batch.status)
            if status in DONE:
                break
            await asyncio.sleep(self.poll_s)
        info = BatchInfo(batch_id, str(batch.input_file_id), status, batch.output_file_id, batch.error_file_id)
        results: dict[str, Output | BackendError] = {}
        opts = self.backend.opts
        # A result file holds one reply per request: its cap grows with them; it may take minutes.
        total = getattr(getattr(batch, "request_counts", None), "total", None)
        count = total if isinstance(total, int) and 0 < total <= self.max_requests else self.max_requests
        cap, seconds = min(opts.max_reply_bytes * count + (1 << 20), 4 << 30), max(opts.timeout, FILE_TIMEOUT)
        for file_id in (info.error_file_id, info.output_file_id):
            if file_id:
                with reply_limits(max_bytes=cap, timeout=seconds):
                    async with asyncio.timeout(seconds):
                        content = await client.files.content(file_id)
                text = content.content.decode("utf-8", "replace")
                results.update(read_results(text, opts.max_reply_bytes))
        if self.ledger is not None:
            self.ledger.updated(info, collected=True)
        self.on_event(f"batch {batch_id}: {status}, {len(results)} answer(s)")
        self._results[batch_id] = results
        return results

    def _resolve(self, items: list[tuple[str, _Pending]], results: Mapping[str, Output | BackendError]) -> None:
        for cid, p in items:
            result = results.get(cid) or BackendError(f"batch answered nothing for request {cid}", retryable=True)
            for future in p.futures:
                if future.done():
                    continue
                if isinstance(result, BackendError):
                    future.set_exception(BackendError(str(result), retryable=True))
                else:
                    out = Output(**{**result.__dict__, "extra": dict(result.extra)})
                    future.set_result(out)

    @staticmethod
    def _fail(items: list[tuple[str, _Pending]], exc: BackendError) -> None:
        for _, p in items:
            for future in p.futures:
                if not future.done():
                    future.set_exception(BackendError(str(exc), retryable=True))


class BatchedBackend(Backend):
    """An ``openai`` backend whose calls are answered by a `BatchRunner` (same spec and identity)."""

    name = "openai"
    supports_logprobs = True

    def __init__(self, runner: BatchRunner) -> None:
        inner = runner.backend
        super().__init__(inner.model, inner.options)
        self.alias = inner.alias
        self.runner = runner

    def identity(self) -> dict[str, Any]:
        """The wrapped backend's identity: a batch answers as the endpoint does."""
        return self.runner.backend.identity()

    async def check(self) -> None:
        """Check the wrapped backend."""
        await self.runner.backend.check()

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> Output:
        """Queue the call for the next batch and return its answer (``latency_s`` includes the wait)."""
        start = time.perf_counter()
        body = build_payload(self.model, messages, config, self.runner.backend.opts)
        out = await self.runner.request(body)
        out.latency_s = time.perf_counter() - start
        return out
