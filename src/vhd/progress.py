"""Progress: the library reports through a callback; `bar` draws those reports with rich.

Every long-running library call takes ``progress``, a `ProgressFn` called as
``progress(done, total, stage=..., info=...)`` (``vhd.annotate`` and the workflows that annotate
also take ``True``, a bar of their own). The library never draws anything itself;
the CLI (or a notebook) passes `bar`'s callback, which shows a rich bar on stderr when it is a
terminal and nothing otherwise.

Example:
    >>> with bar("hashing") as on_progress:  # doctest: +SKIP
    ...     for i in range(10):
    ...         on_progress(i + 1, 10)
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class ProgressFn(Protocol):
    """A progress callback: ``done`` of ``total`` units (total None when unknown)."""

    def __call__(self, done: int, total: int | None, *, stage: str = "", info: str = "") -> None:
        """Report progress; ``stage`` names a phase of the work, ``info`` is a short status text."""


def no_progress(done: int, total: int | None, *, stage: str = "", info: str = "") -> None:
    """A `ProgressFn` that does nothing."""


def staged(progress: bool | ProgressFn, stage: str) -> bool | ProgressFn:
    """``progress`` with its reports filed under ``stage`` (one bar line per stage).

    A library call that runs a job several times (each configuration of ``vhd compare``) gives
    each run its own stage this way. A stage the job reports itself is kept after it
    (``stage: inner``). A bool, meaning "draw a bar or not", is returned unchanged.
    """
    if isinstance(progress, bool):
        return progress
    outer, prefix = progress, stage

    def report(done: int, total: int | None, *, stage: str = "", info: str = "") -> None:
        outer(done, total, stage=f"{prefix}: {stage}" if stage else prefix, info=info)

    return report


@contextmanager
def bar(label: str, enabled: bool = True, *, unit: str = "", console: Any = None) -> Iterator[ProgressFn]:
    """Yield a `ProgressFn` that draws a rich progress bar, one line per stage.

    Nothing is drawn when ``enabled`` is false or the console (stderr by default) is not a
    terminal, so piped output stays clean. The bar is taken down when the block ends, also after
    an error or Ctrl-C.

    Args:
        label: Text before the bar (``annotating``, ``dedup``...).
        enabled: False draws nothing whatever the terminal.
        unit: Unit for the rate column (``samples`` gives ``12.3 samples/s``); empty hides it.
        console: A rich console to draw on (default: stderr); for tests.
    """
    progress: Any = None
    if enabled:
        from rich.console import Console

        console = console or Console(stderr=True)
        if console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[info]}"),
                console=console,
            )
    tasks: dict[str, tuple[Any, float]] = {}

    def update(done: int, total: int | None, *, stage: str = "", info: str = "") -> None:
        if progress is None:
            return
        if stage not in tasks:
            description = f"{label}: {stage}" if stage else label
            tasks[stage] = (progress.add_task(description, total=total, rate="", info=""), time.perf_counter())
        task, start = tasks[stage]
        rate = f"{done / max(time.perf_counter() - start, 1e-9):.1f} {unit}/s" if unit else ""
        progress.update(task, completed=done, total=total, rate=rate, info=info)

    if progress is not None:
        progress.start()
    try:
        yield update
    finally:
        if progress is not None:
            progress.stop()


def renamed_on_progress(fn: Callable[P, R]) -> Callable[P, R]:
    """Accept 0.1's ``on_progress=`` keyword as ``progress=``, with a `DeprecationWarning`, until 0.3.

    Every long call names its progress callback ``progress`` (0.1 said ``on_progress`` in some).
    """

    @functools.wraps(fn)
    def accepting(*args: P.args, **kwargs: P.kwargs) -> R:
        if "on_progress" in kwargs:
            from vhd.lazy import REMOVAL_RELEASE

            warnings.warn(
                f"{fn.__name__}(on_progress=...): the keyword is progress= now; the old keyword goes in "
                f"vhd {REMOVAL_RELEASE}",
                DeprecationWarning,
                stacklevel=2,
            )
            kwargs["progress"] = kwargs.pop("on_progress")
        return fn(*args, **kwargs)

    return accepting
