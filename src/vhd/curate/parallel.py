"""An ordered, bounded thread map that stops promptly when its consumer stops."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def thread_map(fn: Callable[[T], R], items: Iterable[T], jobs: int) -> Iterator[R]:
    """Yield ``fn(item)`` for each item, in order, computed by up to ``jobs`` threads.

    At most ``2 * jobs`` items are in flight, and when the consumer stops early (an exception,
    Ctrl-C) the items not yet started are cancelled, so only those already running finish.

    Args:
        fn: The function.
        items: Its inputs.
        jobs: Threads (1 runs everything in the calling thread).
    """
    if jobs <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(jobs) as pool:
        pending: deque[Future[R]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= 2 * jobs:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
