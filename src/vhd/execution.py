"""Where per-item work runs: the `Executor` interface and the ``executors`` registry.

A workflow (annotate, dedup hashing, ...) splits itself into three parts:

- the driver plans (discovers inputs, claims sample leases in the store) and commits results,
  alone, in its own process: ONE writer per store;
- a `Work`: a picklable object, built on the driver from the resolved configuration, that each
  worker sets up once (`Work.setup`: its backend clients, model or pipeline) and then calls on
  one item at a time (`Work.run`), a pure function of the item;
- an `Executor` says where the work runs: ``local`` (in this process) or ``ray`` (actors on a
  Ray cluster, `vhd.executors.ray_pool`). `Executor.start` gives a `Pool` whose `Pool.run`
  the driver awaits per item; a pool hides worker start-up, balancing and the redoing of items
  whose worker died.

Executors are found by name through `EXECUTORS` (entry-point group ``vhd.executors``), so a
room below ``executors/`` never imports it: ``vhd.annotate(..., executor="ray")``.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from vhd.errors import ConfigError
from vhd.registry import Registry

I = TypeVar("I")  # noqa: E741 - an item
R = TypeVar("R")


class Work(abc.ABC, Generic[I, R]):
    """Per-item work, shipped to workers (pickled): configuration in, nothing secret inside.

    Secrets never travel in a `Work`: a worker reads API keys from the environment variables
    that `Work.env_vars` names, which the executor sets on its workers.
    """

    async def setup(self) -> None:
        """Build what the work needs, once per worker (clients, models, pipelines), and check it works.

        Raises:
            vhd.errors.VhdError: The work cannot run here (one line with the fix).
        """

    @abc.abstractmethod
    async def run(self, item: I) -> R:
        """The result for one item (a pure function of the item and the configuration)."""

    async def aclose(self) -> None:
        """Release what `setup` built."""

    def env_vars(self) -> list[str]:
        """Names of the environment variables workers need (API keys); the values stay out of the work."""
        return []


@dataclass(frozen=True)
class ExecutorOptions:
    """How an executor runs its workers.

    Attributes:
        workers: Workers (Ray actors; threads are not used by ``local``).
        address: Ray cluster address (``auto``, ``ray://host:10001``); None starts a local Ray.
        ship_media: Send media bytes to the workers (through the Ray object store) instead of
            paths (for workers that do not share the driver's filesystem).
        num_cpus: CPUs each worker reserves.
        num_gpus: GPUs each worker reserves (an ``hf`` model or a diffusers pipeline uses it).
        in_flight: Items each worker runs at once (None: the workflow decides, e.g. annotate's
            concurrency divided among the workers).
        runtime_env: Extra Ray ``runtime_env`` for the workers (``pip``, ``py_modules``, ...);
            merged with vhd's own (see `vhd.executors.ray_pool`).
        max_attempts: Times an item is tried on a fresh worker when its worker dies.
    """

    workers: int = 1
    address: str | None = None
    ship_media: bool = False
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    in_flight: int | None = None
    runtime_env: Mapping[str, Any] = field(default_factory=dict)
    max_attempts: int = 3

    def __post_init__(self) -> None:
        """Refuse values no executor can run with.

        Raises:
            ConfigError: Fewer than one worker or attempt, or negative CPUs or GPUs.
        """
        if self.workers < 1 or self.max_attempts < 1:
            raise ConfigError(f"workers ({self.workers}) and max_attempts ({self.max_attempts}) must be at least 1")
        if self.num_cpus < 0 or self.num_gpus < 0:
            raise ConfigError(f"CPUs ({self.num_cpus:g}) and GPUs ({self.num_gpus:g}) per worker cannot be negative")
        if self.in_flight is not None and self.in_flight < 1:
            raise ConfigError(f"in_flight ({self.in_flight}) must be at least 1")


class Pool(abc.ABC, Generic[I, R]):
    """Started workers running one `Work`."""

    @abc.abstractmethod
    async def run(self, item: I) -> R:
        """Run the work on one item on some worker; an item whose worker died is redone on another.

        Raises:
            vhd.errors.WorkerLostError: Its workers died ``max_attempts`` times running it.
        """

    async def aclose(self) -> None:
        """Stop the workers."""


class Executor(abc.ABC):
    """Where `Work` runs.

    Attributes:
        in_process: Work runs in the driver's own process and loop (workflows may keep their
            own in-process path, which is what ``local`` means for annotate).
        options: How workers run.
    """

    name: ClassVar[str] = ""
    in_process: ClassVar[bool] = False

    def __init__(self, options: ExecutorOptions | None = None) -> None:
        self.options = options or ExecutorOptions()

    @abc.abstractmethod
    async def start(self, work: Work[I, R]) -> Pool[I, R]:
        """Start the workers, each set up with ``work``.

        Raises:
            vhd.errors.BackendUnavailableError: The work cannot be set up (its error, one line).
            vhd.errors.ExecutorError: The workers cannot be started.
        """

    @asynccontextmanager
    async def pool(self, work: Work[I, R]) -> AsyncIterator[Pool[I, R]]:
        """`start`, then `Pool.aclose` on the way out."""
        started = await self.start(work)
        try:
            yield started
        finally:
            await started.aclose()


DEFAULT_ENV = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_VERSION")
"""Variables the ``openai`` backend reads when its table names none: passed to workers when set."""


def named_env(tables: Mapping[str, Any]) -> list[str]:
    """Names of the environment variables a configuration's ``[backends.*]`` tables refer to.

    Every string (or list of strings) under a key ending in ``_env`` (``api_key_env``, at any
    depth, endpoint lists included), then `DEFAULT_ENV`. Workers get these variables (those set
    on the driver) through their environment, never inside the work.
    """
    names: list[str] = []

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and key.endswith("_env") and value:
            names.append(value)

    walk(tables)
    return list(dict.fromkeys([*names, *DEFAULT_ENV]))


EXECUTORS: Registry[type[Executor]] = Registry("executor", "vhd.executors", base=Executor)
EXECUTORS.add("local", "vhd.executors.local:LocalExecutor", summary="in this process (the default)")
EXECUTORS.add(
    "ray",
    "vhd.executors.ray_pool:RayExecutor",
    extra="ray",
    needs=["ray"],
    summary="actors on a Ray cluster (--ray-address), one backend per worker",
)


def executor(name: str | Executor, options: ExecutorOptions | None = None) -> Executor:
    """The executor registered as ``name`` (an `Executor` passes through).

    Raises:
        ConfigError: Unknown name (the message lists the valid ones).
        MissingDependencyError: Its extra is not installed (the message gives the pip line).
    """
    if isinstance(name, Executor):
        return name
    return EXECUTORS.load(name)(options)


async def map_async(
    runner: Executor,
    work: Work[I, R],
    items: Iterable[I],
    on_result: Callable[[R], object],
    *,
    concurrency: int = 16,
) -> list[tuple[I, BaseException]]:
    """Run ``work`` on every item (``concurrency`` at once) and pass each result to ``on_result`` here.

    Returns:
        The items whose work raised (a worker lost for good, a bug), with the exception; the
        others went on.
    """
    failures: list[tuple[I, BaseException]] = []
    gate = asyncio.Semaphore(max(1, concurrency))
    async with runner.pool(work) as pool:

        async def one(item: I) -> None:
            async with gate:
                try:
                    result = await pool.run(item)
                except Exception as exc:
                    failures.append((item, exc))
                    return
            on_result(result)

        queue = iter(items)  # drawn by ``concurrency`` workers: no coroutine per item made up front

        async def worker() -> None:
            for item in queue:
                await one(item)

        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    return failures


def map_unordered(
    runner: Executor,
    work: Work[I, R],
    items: Iterable[I],
    *,
    in_flight: int = 16,
    on_result: Callable[[I, R | BaseException], None] | None = None,
) -> Iterator[tuple[I, R | BaseException]]:
    """Run ``work`` on every item, yielding ``(item, result)`` as results come (any order).

    Items are pulled from ``items`` only as slots free up (at most ``in_flight`` at once), so a
    lazy iterable streams: memory does not grow with the number of items. An item whose work
    raised yields the exception instead of a result; the others go on.

    Args:
        runner: Where the work runs.
        work: The work.
        items: The items (read lazily).
        in_flight: Items running at once.
        on_result: Also called with each result, on the driver.
    """

    async def drive() -> AsyncGenerator[tuple[I, R | BaseException], None]:
        async with runner.pool(work) as pool:
            source = iter(items)
            pending: dict[asyncio.Task[R], I] = {}

            def fill() -> None:
                while len(pending) < in_flight:
                    try:
                        item = next(source)
                    except StopIteration:
                        return
                    pending[asyncio.ensure_future(pool.run(item))] = item

            fill()
            while pending:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    item = pending.pop(task)
                    exc = task.exception()
                    yield item, (exc if exc is not None else task.result())
                fill()

    loop = asyncio.new_event_loop()
    agen = drive()
    try:
        while True:
            try:
                pair = loop.run_until_complete(agen.__anext__())
            except StopAsyncIteration:
                break
            if on_result is not None:
                on_result(*pair)
            yield pair
    finally:
        loop.run_until_complete(agen.aclose())
        loop.close()
