"""The ``ray`` executor: each worker is a Ray actor that owns its backends; the driver commits.

Why actors driven by the driver, not Ray Data's ``map_batches``: the work list is not known up
front. The driver claims samples in the store in small batches (sample leases, so two drivers
never pay twice) and only hands out what it holds a lease on; Ray Data wants its whole input as a
dataset and owns the scheduling, so leases would have to cover every sample at once and a
killed worker's items would be redone by Ray Data's retries, out of the driver's sight. Here:

- ``workers`` async actors (``num_cpus``, ``num_gpus`` each) are started with the `Work`; each
  builds its backend clients, model or pipeline once (`Work.setup`), on the GPU Ray gives it;
- the driver awaits one actor call per item, sending it to the actor with the fewest items in
  flight (an actor runs many at once: its endpoint calls overlap); results stream back as each
  item finishes and the driver, the only writer, commits them to the store at once;
- an actor that dies (``ray.kill``, a crashed node) fails only its in-flight calls: the pool
  starts a replacement and redoes those items there (at most ``max_attempts`` times each), so
  nothing is lost and nothing finished is redone;
- media go by path (workers share the driver's filesystem) or, with ``ship_media``, as the
  encoded bytes inside the item (Ray moves large arguments through its object store).

Configuration is resolved on the driver and travels inside the `Work`. API keys never do: the
workers get the environment variables that `Work.env_vars` names through the actors'
``runtime_env={"env_vars": ...}``. vhd itself reaches the workers of a cluster through
``runtime_env={"py_modules": [<the driver's vhd package>]}`` (added whenever ``address`` is
set), so they run exactly the driver's code; its dependencies (``pip install 'vhd[ray]'`` plus
the backends' extras) must be installed on the nodes, or named in ``runtime_env={"pip": [...]}``.
"""

from __future__ import annotations

import asyncio
import os
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from vhd.errors import ExecutorError, VhdError, WorkerLostError, require
from vhd.execution import Executor, ExecutorOptions, Pool, Work

I = TypeVar("I")  # noqa: E741 - an item
R = TypeVar("R")

DEFAULT_IN_FLIGHT = 16
"""Items one actor runs at once when neither the options nor the workflow say."""


class WorkerActor:
    """The body of one Ray actor: one `Work`, set up once, run on item after item (async actor)."""

    def __init__(self, work: Work[Any, Any]) -> None:
        self.work = work

    async def setup(self) -> dict[str, Any]:
        """Set the work up; returns where this worker runs (pid, node, vhd's location)."""
        import vhd

        await self.work.setup()
        return {"pid": os.getpid(), "vhd": str(Path(vhd.__file__).parent)}

    async def run(self, item: Any) -> Any:
        """Run the work on one item."""
        return await self.work.run(item)

    async def close(self) -> None:
        """Release what the work set up."""
        await self.work.aclose()


@dataclass
class Timings:
    """Where a pool's time went (seconds), for the overhead benchmark.

    Attributes:
        connect: ``ray.init`` (zero when a Ray session was already up).
        actors: Starting the actors and setting the work up in them, in parallel.
        calls: Item calls made, redone ones included.
        redone: Items redone after their worker died.
    """

    connect: float = 0.0
    actors: float = 0.0
    calls: int = 0
    redone: int = 0


@dataclass
class Slot:
    """One worker place: its current actor and the items it runs now."""

    index: int
    handle: Any = None
    in_flight: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    replacing: asyncio.Future[None] | None = None


def job_env(options: ExecutorOptions) -> dict[str, Any]:
    """The job's ``runtime_env`` (given to ``ray.init``): the options' own, plus vhd's code for a cluster.

    Ray uploads local folders named in ``py_modules`` only at the job level, so vhd's package
    is added here when connecting to a cluster (``address`` set): workers import the driver's
    exact vhd, whatever the nodes have installed.
    """
    env: dict[str, Any] = dict(options.runtime_env)
    if options.address is not None:
        import vhd

        modules = list(env.get("py_modules", []))
        package = str(Path(vhd.__file__).parent)
        if package not in modules:
            env["py_modules"] = [*modules, package]
    return env


def actor_env(work: Work[Any, Any], options: ExecutorOptions, *, joined: bool) -> dict[str, Any]:
    """The actors' own ``runtime_env``: the secrets the work names, as environment variables.

    Only variables set on the driver are passed; their values never enter the work or the items.
    When this process joined a Ray session started elsewhere (``joined``), the options'
    ``runtime_env`` applies here instead of to the job (then it may name only URIs and packages).
    """
    env: dict[str, Any] = dict(options.runtime_env) if joined else {}
    secrets = {name: os.environ[name] for name in work.env_vars() if os.environ.get(name)}
    if secrets:
        env["env_vars"] = {**dict(env.get("env_vars", {})), **secrets}
    return env


class RayPool(Pool[I, R]):
    """Actors running one `Work`; see the module docstring."""

    def __init__(self, work: Work[I, R], options: ExecutorOptions, *, owns_ray: bool, timings: Timings) -> None:
        import ray

        self.ray = ray
        self.work = work
        self.options = options
        self.owns_ray = owns_ray
        self.timings = timings
        self.env = actor_env(work, options, joined=not owns_ray)
        self.slots = [Slot(i) for i in range(max(1, options.workers))]
        self.actor_class: Any = ray.remote(WorkerActor)

    @property
    def actors(self) -> list[Any]:
        """The live actor handles, one per worker."""
        return [slot.handle for slot in self.slots if slot.handle is not None]

    async def spawn(self, slot: Slot) -> None:
        """Start an actor in ``slot`` and wait for its work to be set up."""
        opts: dict[str, Any] = {
            "num_cpus": self.options.num_cpus,
            "num_gpus": self.options.num_gpus,
            "max_concurrency": max(1, self.options.in_flight or DEFAULT_IN_FLIGHT),
        }
        if self.env:
            opts["runtime_env"] = self.env
        handle: Any = self.actor_class.options(**opts).remote(self.work)
        try:
            slot.info = await handle.setup.remote()
        except self.ray.exceptions.RayTaskError as exc:
            self.ray.kill(handle)
            cause = exc.cause
            if isinstance(cause, VhdError):
                raise cause from None
            raise ExecutorError(f"a Ray worker could not set up its work: {cause}".splitlines()[0]) from None
        except self.ray.exceptions.RayError as exc:
            self.ray.kill(handle)
            raise ExecutorError(f"a Ray worker could not start: {exc}".splitlines()[0]) from None
        slot.handle = handle

    async def start(self) -> None:
        """Start every worker at once."""
        began = time.perf_counter()
        try:
            await asyncio.gather(*(self.spawn(slot) for slot in self.slots))
        except BaseException:
            await self.aclose()
            raise
        self.timings.actors = time.perf_counter() - began

    async def replace(self, slot: Slot, dead: Any) -> None:
        """Start a new actor in place of ``dead`` (once, however many calls saw it die)."""
        if slot.handle is not dead:
            return  # already replaced
        if slot.replacing is None:
            slot.replacing = asyncio.get_running_loop().create_future()
            try:
                await self.spawn(slot)
                slot.replacing.set_result(None)
            except BaseException as exc:
                slot.replacing.set_exception(exc)
                slot.replacing.exception()  # retrieved: the callers below re-raise it
                raise
            finally:
                slot.replacing = None
        else:
            await asyncio.shield(slot.replacing)

    async def run(self, item: I) -> R:
        """Run the work on one item on the least busy actor; redone elsewhere if the actor dies."""
        last: BaseException | None = None
        for attempt in range(max(1, self.options.max_attempts)):
            slot = min(self.slots, key=lambda s: (s.replacing is not None, s.in_flight))
            if slot.replacing is not None:
                await asyncio.shield(slot.replacing)
            handle = slot.handle
            slot.in_flight += 1
            self.timings.calls += 1
            self.timings.redone += attempt > 0
            try:
                result: R = await handle.run.remote(item)
                return result
            except self.ray.exceptions.RayTaskError as exc:
                cause = exc.cause
                raise (cause if isinstance(cause, Exception) else ExecutorError(str(exc))) from None
            except self.ray.exceptions.RayActorError as exc:
                last = exc
            finally:
                slot.in_flight -= 1
            try:
                await self.replace(slot, handle)
            except VhdError as exc:  # no replacement can start (the cluster is gone, a key vanished): item lost
                raise WorkerLostError(f"{exc}; run the same command again to retry the samples left") from None
        raise WorkerLostError(
            f"the Ray workers running an item died {self.options.max_attempts} times "
            f"({str(last).splitlines()[0] if last else 'no reason given'}); run the same command again to retry it"
        )

    async def aclose(self) -> None:
        """Close the work in every actor, stop the actors, and shut Ray down if this pool started it."""
        for slot in self.slots:
            if slot.handle is None:
                continue
            with suppress(Exception):  # a dead or stuck actor is killed below either way
                await asyncio.wait_for(slot.handle.close.remote(), timeout=30)
            self.ray.kill(slot.handle)
            slot.handle = None
        if self.owns_ray:
            self.ray.shutdown()


class RayExecutor(Executor):
    """Runs work on Ray actors: `ExecutorOptions.workers` of them, on this machine or a cluster.

    Connects to ``options.address`` (``auto``: the cluster ``ray start --head`` started on this
    machine; ``ray://host:10001``: a remote one through Ray Client). Without an address it uses
    the Ray session already started in this process, else starts a local one and stops it when
    the pool closes.
    """

    name: ClassVar[str] = "ray"
    in_process: ClassVar[bool] = False

    def __init__(self, options: ExecutorOptions | None = None) -> None:
        super().__init__(options)
        self.timings = Timings()
        self.pools: list[RayPool[Any, Any]] = []

    async def start(self, work: Work[I, R]) -> Pool[I, R]:
        """Connect to Ray (or start it), then start the actors; fails with one line if either fails."""
        ray: Any = require("ray", "ray", "ray[data]")
        began = time.perf_counter()
        owns = False
        if not ray.is_initialized():
            try:
                ray.init(
                    address=self.options.address,
                    runtime_env=job_env(self.options) or None,
                    include_dashboard=False if self.options.address is None else None,
                    log_to_driver=False,
                    configure_logging=False,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = self.options.address or "a local Ray"
                raise ExecutorError(
                    f"cannot connect to {where}: {exc}".splitlines()[0]
                    + " (start a cluster with `ray start --head`, then pass --ray-address auto)"
                ) from None
            owns = True
        self.timings.connect = time.perf_counter() - began
        pool: RayPool[I, R] = RayPool(work, self.options, owns_ray=owns, timings=self.timings)
        await pool.start()
        self.pools.append(pool)
        return pool
