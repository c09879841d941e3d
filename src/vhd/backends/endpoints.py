"""Several endpoints behind one backend: balancing, cool-downs, rate limits and per-endpoint stats.

Nothing here does network I/O, so all of it is tested directly (with a fake clock where time
matters). `vhd.backends.openai` uses it; any backend that talks to several replicas of one model
could.

- **Balancing.** `EndpointPool.acquire` gives a request the endpoint with the fewest requests in
  flight (relative to its ``max_in_flight``), among those not cooling down, preferring one whose
  rate limits let the request go now. When none has a free slot it waits for one.
- **Cool-down.** `EndpointPool.failed` takes an endpoint out after a connection error, a timeout,
  a 5xx or a 429, for ``cooldown`` seconds (or the server's ``Retry-After``, whichever is longer),
  doubling on consecutive failures up to ``backoff_max``; a success ends the streak. The caller
  retries the request on another endpoint at once; only when every endpoint is cooling does it
  wait, until the first one comes back.
- **Rate limits.** `RateLimiter` holds a token bucket for requests per minute (``rpm``) and one
  for tokens per minute (``tpm``). A request reserves one request and an estimate of its tokens
  (`estimate_tokens`: prompt plus ``max_tokens``, as providers count) before it is sent; the
  reservation may run the bucket into debt, and the request then waits until the debt is repaid,
  so waiting requests go in arrival order. After the answer the estimate is corrected with the
  usage the server reports.

Sharing: the limiter and the cool-down of an endpoint are kept per process (`endpoint_state`),
keyed by the endpoint's URL and key variable, so every role, backend instance and concurrent task
of a process draws on the same budget. Separate processes (Ray workers, several ``vhd`` runs)
each have their own: give each a share of the provider's limit. In-flight counts are per event
loop, since a request's slot lives in one loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vhd.backends.base import GenerateConfig, Message

Clock = Callable[[], float]

CHARS_PER_TOKEN = 4.0
"""Rough characters per token of English text, for estimates before a call."""


def image_tokens(width: int, height: int, detail: str = "auto") -> int:
    """Prompt tokens of one image as OpenAI counts them (``low``: 85; else 512-pixel tiles).

    The image is fitted into 2048x2048, its shorter side scaled to 768; each 512-pixel tile costs
    170 tokens plus 85 for the whole image.
    """
    if detail == "low":
        return 85
    w, h = float(max(width, 1)), float(max(height, 1))
    scale = min(1.0, 2048 / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def video_tokens(frames: int, width: int, height: int) -> int:
    """Prompt tokens of a clip as Qwen2-VL-family models count them (vLLM's ``video_url``).

    Frames are merged two by two in time and cut into 28 x 28 pixel cells, one token each: a
    448 x 252 clip of 60 frames is 30 x 16 x 9 = 4,320 tokens. Other families differ; this is an
    estimate for ``tpm`` limits and dry runs.
    """
    return math.ceil(frames / 2) * math.ceil(width / 28) * math.ceil(height / 28)


def estimate_tokens(messages: Sequence[Message], config: GenerateConfig, detail: str = "auto") -> int:
    """Tokens a call will count against a ``tpm`` limit before it is made: prompt plus ``max_tokens``."""
    chars = 0
    images = 0
    for message in messages:
        chars += len(message.text) + 16  # role markers
        images += sum(image_tokens(im.width, im.height, detail) for im in message.images)
        images += sum(video_tokens(v.frames, v.width, v.height) for v in message.videos)
    return math.ceil(chars / CHARS_PER_TOKEN) + images + config.max_tokens


class TokenBucket:
    """A bucket of ``per_minute`` units that refills continuously; reservations may go into debt.

    Args:
        per_minute: Capacity, and units added per minute.
        clock: Seconds, monotonic (tests pass a fake one).
    """

    def __init__(self, per_minute: float, clock: Clock = time.monotonic) -> None:
        if per_minute <= 0:
            raise ValueError("per_minute must be positive")
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.clock = clock
        self.level = self.capacity
        self.last = clock()

    def _refill(self) -> None:
        now = self.clock()
        self.level = min(self.capacity, self.level + (now - self.last) * self.rate)
        self.last = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` could be taken without debt (0 when it can now)."""
        self._refill()
        need = min(amount, self.capacity) - self.level
        return max(0.0, need / self.rate)

    def take(self, amount: float) -> float:
        """Take ``amount`` now; return the seconds to wait until the bucket is out of debt."""
        self._refill()
        self.level -= amount
        return max(0.0, -self.level / self.rate)

    def give(self, amount: float) -> None:
        """Return ``amount`` (a negative amount takes more, for a correction after the call)."""
        self._refill()
        self.level = min(self.capacity, self.level + amount)


class RateLimiter:
    """Requests-per-minute and tokens-per-minute limits of one endpoint (either may be None).

    Thread-safe; the caller sleeps for the delay `reserve` returns.
    """

    def __init__(self, rpm: float | None = None, tpm: float | None = None, clock: Clock = time.monotonic) -> None:
        self._lock = threading.Lock()
        self.requests = TokenBucket(rpm, clock) if rpm else None
        self.tokens = TokenBucket(tpm, clock) if tpm else None

    @property
    def active(self) -> bool:
        """Whether any limit is set."""
        return self.requests is not None or self.tokens is not None

    def wait_for(self, tokens: int) -> float:
        """Seconds before a request of ``tokens`` could go without waiting (nothing is reserved)."""
        with self._lock:
            waits = [b.wait_for(n) for b, n in ((self.requests, 1), (self.tokens, tokens)) if b is not None]
        return max(waits, default=0.0)

    def reserve(self, tokens: int) -> float:
        """Reserve one request and ``tokens``; return the seconds to wait before sending it."""
        with self._lock:
            waits = [b.take(n) for b, n in ((self.requests, 1), (self.tokens, tokens)) if b is not None]
        return max(waits, default=0.0)

    def settle(self, reserved: int, used: int) -> None:
        """Correct a reservation of ``reserved`` tokens to the ``used`` the server reported."""
        if self.tokens is not None and used != reserved:
            with self._lock:
                self.tokens.give(reserved - used)


@dataclass
class EndpointState:
    """What one endpoint's users share in a process: rate limits and the cool-down.

    Attributes:
        key: The endpoint's identity (URL and key variable).
        limiter: Its rpm/tpm buckets.
        cooling_until: Clock time before which it gets no new request.
        failures: Consecutive failed attempts (reset by a success).
    """

    key: str
    limiter: RateLimiter
    cooling_until: float = 0.0
    failures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


_STATES: dict[str, EndpointState] = {}
_STATES_LOCK = threading.Lock()


def endpoint_state(key: str, rpm: float | None = None, tpm: float | None = None) -> EndpointState:
    """The process-wide state of an endpoint; the first caller's ``rpm``/``tpm`` set its limits.

    A later caller that names limits the first did not set adds them.
    """
    with _STATES_LOCK:
        state = _STATES.get(key)
        if state is None:
            state = _STATES[key] = EndpointState(key, RateLimiter(rpm, tpm))
        else:
            if rpm and state.limiter.requests is None:
                state.limiter.requests = TokenBucket(rpm)
            if tpm and state.limiter.tokens is None:
                state.limiter.tokens = TokenBucket(tpm)
        return state


@dataclass
class EndpointStats:
    """What one backend instance sent to one endpoint (a run's figures, since a run builds its backends).

    Attributes:
        requests: HTTP attempts sent.
        errors: Attempts that failed (connection, timeout, 429, 5xx, unreadable answer).
        cooldowns: Times the endpoint was taken out after a failure.
        latency_s: Sum of the answered attempts' latencies.
        max_latency_s: The slowest answered attempt.
        prompt_tokens: Prompt tokens the endpoint reported.
        completion_tokens: Completion tokens it reported.
        rate_wait_s: Time requests waited for its rpm/tpm limits.
    """

    requests: int = 0
    errors: int = 0
    cooldowns: int = 0
    latency_s: float = 0.0
    max_latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    rate_wait_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The figures with the mean latency of answered attempts, JSON-ready."""
        answered = self.requests - self.errors
        return {
            "requests": self.requests,
            "errors": self.errors,
            "cooldowns": self.cooldowns,
            "mean_latency_s": round(self.latency_s / answered, 4) if answered else 0.0,
            "max_latency_s": round(self.max_latency_s, 4),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "rate_wait_s": round(self.rate_wait_s, 3),
        }


def merge_stats(tables: Sequence[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Add up per-endpoint figures of several backends (roles sharing an endpoint count once each)."""
    merged: dict[str, dict[str, Any]] = {}
    for table in tables:
        for name, row in table.items():
            into = merged.setdefault(name, {})
            answered_before = into.get("requests", 0) - into.get("errors", 0)
            answered_now = row.get("requests", 0) - row.get("errors", 0)
            for key, value in row.items():
                if key == "mean_latency_s":
                    total = answered_before + answered_now
                    before = into.get(key, 0.0) * answered_before
                    into[key] = round((before + value * answered_now) / total, 4) if total else 0.0
                elif key == "max_latency_s":
                    into[key] = max(into.get(key, 0.0), value)
                else:
                    into[key] = into.get(key, 0) + value
    return merged


@dataclass
class Endpoint:
    """One endpoint as a backend instance sees it.

    Attributes:
        name: Display URL (no credentials), the key of its stats.
        max_in_flight: Most concurrent requests to it from one event loop.
        state: The process-wide state (limits, cool-down).
        stats: This instance's figures.
        client: Whatever the backend needs to talk to it (its SDK clients).
    """

    name: str
    max_in_flight: int
    state: EndpointState
    stats: EndpointStats = field(default_factory=EndpointStats)
    client: Any = None


class _LoopSlots:
    """In-flight counts of every endpoint in one event loop, and conditions to wait on.

    Waiters are grouped by the set of endpoints they may use; a freed slot wakes one waiter of
    each group that includes its endpoint (not every waiter), so a release costs the same with
    ten waiting requests or a thousand.
    """

    def __init__(self) -> None:
        self.in_flight: dict[str, int] = {}
        self.lock = asyncio.Lock()
        self.groups: dict[tuple[str, ...], asyncio.Condition] = {}

    def condition(self, keys: tuple[str, ...]) -> asyncio.Condition:
        cond = self.groups.get(keys)
        if cond is None:
            cond = self.groups[keys] = asyncio.Condition(self.lock)
        return cond

    def wake(self, key: str) -> None:
        for keys, cond in self.groups.items():
            if key in keys:
                cond.notify(1)


_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopSlots] = weakref.WeakKeyDictionary()


def _loop_slots() -> _LoopSlots:
    loop = asyncio.get_running_loop()
    slots = _SLOTS.get(loop)
    if slots is None:
        slots = _SLOTS[loop] = _LoopSlots()
    return slots


def in_flight(endpoint: Endpoint) -> int:
    """Requests in flight to an endpoint in the running event loop (from every backend instance)."""
    return _loop_slots().in_flight.get(endpoint.state.key, 0)


class EndpointPool:
    """Picks an endpoint for each attempt and keeps cool-downs (see the module docstring).

    Args:
        endpoints: The endpoints (at least one).
        cooldown: Seconds an endpoint stays out after a failure (doubling while failures repeat).
        cooldown_max: Longest cool-down.
        clock: Monotonic seconds (tests pass a fake one).
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        *,
        cooldown: float = 10.0,
        cooldown_max: float = 60.0,
        clock: Clock = time.monotonic,
    ) -> None:
        if not endpoints:
            raise ValueError("an endpoint pool needs at least one endpoint")
        self.endpoints = list(endpoints)
        self.cooldown = cooldown
        self.cooldown_max = cooldown_max
        self.clock = clock
        self._turn = 0

    @property
    def multiple(self) -> bool:
        """Whether there is anywhere else to go (cool-downs apply only then)."""
        return len(self.endpoints) > 1

    def cooling(self, endpoint: Endpoint) -> float:
        """Seconds left in an endpoint's cool-down (0 when it takes requests)."""
        return max(0.0, endpoint.state.cooling_until - self.clock())

    def choose(self, loads: Sequence[int], tokens: int, avoid: Endpoint | None = None) -> Endpoint | None:
        """The endpoint for the next attempt given each one's in-flight count, or None when all are full.

        Ranks endpoints that are not cooling and have a free slot by (must wait for its rate limit,
        tried last by this request, in-flight / max_in_flight, in-flight); ties go round-robin.
        """
        ranked: list[tuple[tuple[bool, bool, float, int, int], Endpoint]] = []
        n = len(self.endpoints)
        for i, (endpoint, load) in enumerate(zip(self.endpoints, loads, strict=True)):
            if load >= endpoint.max_in_flight or (self.multiple and self.cooling(endpoint) > 0):
                continue
            limited = endpoint.state.limiter.active and endpoint.state.limiter.wait_for(tokens) > 0
            order = (i - self._turn) % n
            ranked.append(((limited, endpoint is avoid, load / endpoint.max_in_flight, load, order), endpoint))
        if not ranked:
            return None
        self._turn = (self._turn + 1) % n
        return min(ranked, key=lambda item: item[0])[1]

    async def acquire(self, tokens: int, avoid: Endpoint | None = None) -> Endpoint:
        """Wait for an endpoint with a free slot (not cooling down) and take the slot.

        Args:
            tokens: The request's estimated tokens (endpoints whose limits let it go now win).
            avoid: The endpoint that just failed this request (used only when nothing else is free).
        """
        slots = _loop_slots()
        keys = tuple(e.state.key for e in self.endpoints)
        async with slots.lock:
            while True:
                loads = [slots.in_flight.get(key, 0) for key in keys]
                chosen = self.choose(loads, tokens, avoid)
                if chosen is not None:
                    slots.in_flight[chosen.state.key] = slots.in_flight.get(chosen.state.key, 0) + 1
                    return chosen
                waits = [self.cooling(e) for e in self.endpoints if self.cooling(e) > 0]
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(slots.condition(keys).wait(), timeout=min(waits) if waits else None)

    async def release(self, endpoint: Endpoint) -> None:
        """Give the slot back and wake one waiter of each group that can use it."""
        slots = _loop_slots()
        async with slots.lock:
            key = endpoint.state.key
            slots.in_flight[key] = max(0, slots.in_flight.get(key, 0) - 1)
            slots.wake(key)

    def succeeded(self, endpoint: Endpoint) -> None:
        """An answered attempt: the endpoint's failure streak ends."""
        with endpoint.state.lock:
            endpoint.state.failures = 0

    def failed(self, endpoint: Endpoint, wait_hint: float | None = None) -> float:
        """A failed attempt: take the endpoint out (when there is another); return the cool-down set."""
        if not self.multiple:
            return 0.0
        with endpoint.state.lock:
            endpoint.state.failures += 1
            period = min(self.cooldown_max, self.cooldown * 2.0 ** min(endpoint.state.failures - 1, 30))
            if wait_hint is not None:
                period = max(period, min(wait_hint, self.cooldown_max))
            endpoint.state.cooling_until = max(endpoint.state.cooling_until, self.clock() + period)
        endpoint.stats.cooldowns += 1
        return period

    def all_cooling(self) -> bool:
        """Whether every endpoint is out (a retry then waits for the first to come back)."""
        return all(self.cooling(e) > 0 for e in self.endpoints)

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per-endpoint figures of this pool, by display URL."""
        return {e.name: e.stats.to_dict() for e in self.endpoints}
