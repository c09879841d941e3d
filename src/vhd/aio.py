"""Run a coroutine to its end from synchronous code, whether or not an event loop is running.

vhd's synchronous entry points (`vhd.annotate`, `vhd.bench.run_bench`, ...) drive async code.
``asyncio.run`` refuses to start inside a running event loop, which is where a Jupyter cell or an
async web service calls them from; `run_sync` then runs the coroutine on its own loop in a
worker thread and waits for it, so the same call works in a script and in a notebook. Async code
should rather await the async entry points (`vhd.aannotate`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion and return its result (or raise its exception).

    Without a running event loop in this thread this is ``asyncio.run(coro)``. Inside one (a
    notebook, an async service) the coroutine runs on a fresh event loop in a worker thread while
    this thread waits; an interrupt (Ctrl-C, a notebook's stop button) while waiting cancels it,
    waits for it to wind down, and is raised here.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}
    started = threading.Event()

    async def main() -> T:
        box["loop"], box["task"] = asyncio.get_running_loop(), asyncio.current_task()
        started.set()
        return await coro

    def target() -> None:
        try:
            box["value"] = asyncio.run(main())
        except BaseException as exc:  # handed to the waiting thread, which raises it
            box["error"] = exc
        finally:
            started.set()

    thread = threading.Thread(target=target, name="vhd-run-sync", daemon=True)
    thread.start()
    try:
        thread.join()
    except KeyboardInterrupt:
        started.wait()
        if "task" in box:
            box["loop"].call_soon_threadsafe(box["task"].cancel)
        thread.join()
        raise
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value
