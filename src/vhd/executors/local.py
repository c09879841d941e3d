"""The ``local`` executor: work runs in the driver's own process and event loop."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from vhd.execution import Executor, Pool, Work

I = TypeVar("I")  # noqa: E741 - an item
R = TypeVar("R")


class LocalPool(Pool[I, R]):
    """One `Work`, set up once in this process; items run concurrently on this event loop."""

    def __init__(self, work: Work[I, R]) -> None:
        self.work = work

    async def run(self, item: I) -> R:
        """Run the work on one item here."""
        return await self.work.run(item)

    async def aclose(self) -> None:
        """Release what the work set up."""
        await self.work.aclose()


class LocalExecutor(Executor):
    """Runs work in this process: what vhd has always done (no extra, no start-up cost)."""

    name: ClassVar[str] = "local"
    in_process: ClassVar[bool] = True

    async def start(self, work: Work[I, R]) -> Pool[I, R]:
        """Set the work up here and return a pool that runs it here."""
        await work.setup()
        return LocalPool(work)
