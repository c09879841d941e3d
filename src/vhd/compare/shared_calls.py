"""Identical model calls answered once, across runs: what two policies' annotations share.

Two annotations of the same samples under two configurations often send some identical
requests: a policy change that only touches the judge's prompt leaves every debater's call as
it was. `SharedCalls` is a hook on `vhd.backends.base.ask` (`CALL_HOOK`): while it is active,
a call is keyed by the backend's identity, the decoding settings and the messages (text, and
each image by its sha256), and a key answered before gets the answer given then. So each
identical request is sent once, and the second configuration sees exactly the debaters'
arguments the first one saw: a diff shows what the configuration changed, not sampling noise.

Answers are kept as JSON in a private temporary SQLite file (`vhd.store.statindex.ScratchMap`),
so memory does not grow with the number of calls. A failed call (a `BackendError`) is not
kept: the next identical call is sent again. Calls made through a provider's batch API or on an
executor's workers do not pass through ``ask`` in this process and are not shared.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Iterator, Sequence
from contextvars import Token
from typing import Any

from vhd.backends.base import CALL_HOOK, Ask, Backend, CallHook, GenerateConfig, Message, Output
from vhd.errors import BackendError
from vhd.media.encoded import EncodedImage, EncodedVideo
from vhd.store.statindex import ScratchMap


def _part(part: str | EncodedImage | EncodedVideo) -> Any:
    if isinstance(part, str):
        return part
    if isinstance(part, EncodedImage):
        return {"image": part.sha256}
    return {"video": hashlib.sha256(part.data).hexdigest(), "span": [part.start_s, part.end_s]}


class SharedCalls:
    """Answer identical calls once while active (``with shared.active(): ...``).

    Attributes:
        made: Calls sent to a backend while active (failed ones included).
        shared: Calls answered with an earlier identical call's answer.
    """

    def __init__(self) -> None:
        self._answers = ScratchMap()
        self._identities: dict[int, tuple[Backend, str]] = {}
        self._pending: dict[str, asyncio.Future[Output | BackendError]] = {}
        self.made = 0
        self.shared = 0

    def key(self, backend: Backend, messages: Sequence[Message], config: GenerateConfig) -> str:
        """The sha256 naming a call: backend identity, decoding settings, messages (images by hash)."""
        known = self._identities.get(id(backend))
        if known is None or known[0] is not backend:
            known = (backend, json.dumps(backend.identity(), sort_keys=True, default=str))
            self._identities[id(backend)] = known  # the backend is held, so its id is not reused
        request = {
            "backend": known[1],
            "config": dataclasses.asdict(config),
            "messages": [[m.role, [_part(p) for p in m.parts]] for m in messages],
        }
        return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode("utf-8")).hexdigest()

    async def __call__(
        self, backend: Backend, messages: Sequence[Message], config: GenerateConfig, ask: Ask
    ) -> Output | BackendError:
        """The hook: an earlier identical call's answer, else the call itself (kept when it succeeds)."""
        key = self.key(backend, messages, config)
        kept = self._answers.get(key)
        if kept is not None:
            self.shared += 1
            return _reused(kept)
        pending = self._pending.get(key)
        if pending is not None and pending.get_loop() is asyncio.get_running_loop():
            self.shared += 1
            answer = await asyncio.shield(pending)
            return _reused(_encode(answer)) if isinstance(answer, Output) else answer
        future: asyncio.Future[Output | BackendError] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            self.made += 1
            answer = await ask(backend, messages, config)
            if isinstance(answer, Output):
                self._answers.put(key, _encode(answer))
            future.set_result(answer)
            return answer
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            self._pending.pop(key, None)

    @contextlib.contextmanager
    def active(self) -> Iterator[SharedCalls]:
        """Route every `vhd.backends.base.ask` of this context (and the tasks it starts) through this memo."""
        hook: CallHook = self
        token: Token[CallHook | None] = CALL_HOOK.set(hook)
        try:
            yield self
        finally:
            CALL_HOOK.reset(token)

    def close(self) -> None:
        """Drop the kept answers."""
        self._answers.close()


def _encode(out: Output) -> str:
    return json.dumps(dataclasses.asdict(out), default=str)


def _reused(text: str) -> Output:
    data = json.loads(text)
    data["latency_s"] = 0.0
    data["extra"] = {**(data.get("extra") or {}), "shared_call": True}
    return Output(**data)
