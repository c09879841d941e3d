"""Small `Work` classes for executor tests (sent to Ray workers by value)."""

from __future__ import annotations

import asyncio
import hashlib
import os

from vhd.errors import BackendUnavailableError
from vhd.execution import Work


class Square(Work[int, tuple[int, int]]):
    """``(n, n * n)`` after ``delay`` seconds; item 13 raises (one item's failure)."""

    def __init__(self, delay: float = 0.0, env: tuple[str, ...] = ()) -> None:
        self.delay = delay
        self.env = list(env)
        self.ready = False

    async def setup(self) -> None:
        self.ready = True

    async def run(self, item: int) -> tuple[int, int]:
        assert self.ready
        if item == 13:
            raise ValueError("thirteen")
        await asyncio.sleep(self.delay)
        return item, item * item

    def env_vars(self) -> list[str]:
        return self.env


class EnvDigest(Work[str, str]):
    """The sha256 of an environment variable as the worker sees it ("" hashed when unset): no value travels back."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = list(names)

    async def run(self, item: str) -> str:
        return hashlib.sha256(os.environ.get(item, "").encode()).hexdigest()

    def env_vars(self) -> list[str]:
        return self.names


class Broken(Work[int, int]):
    """A work whose setup fails the way a backend with no key does."""

    async def setup(self) -> None:
        raise BackendUnavailableError(f"VHD_NO_SUCH_KEY is not set in process {os.getpid()}: export it")

    async def run(self, item: int) -> int:
        return item


class GpuProbe(Work[int, str]):
    """The name of the CUDA device the worker sees ("" without one)."""

    async def run(self, item: int) -> str:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""
