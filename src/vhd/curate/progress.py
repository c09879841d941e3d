"""A progress bar on stderr for the curation commands (shown only on a terminal)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def progress_bar(label: str, enabled: bool = True) -> Iterator[Callable[..., None]]:
    """Yield a callback ``(done, total)`` or ``(stage, done, total)`` that draws a rich bar.

    Nothing is drawn when ``enabled`` is false or stderr is not a terminal.

    Args:
        label: Text before the bar.
        enabled: Whether to draw at all.
    """
    bar: Any = None
    if enabled:
        from rich.console import Console

        console = Console(stderr=True)
        if console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
            )
    tasks: dict[str, Any] = {}

    def update(*args: Any) -> None:
        if bar is None:
            return
        stage, done, total = args if len(args) == 3 else (label, *args)
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage if stage == label else f"{label}: {stage}", total=total)
        bar.update(tasks[stage], completed=done, total=total)

    if bar is not None:
        bar.start()
    try:
        yield update
    finally:
        if bar is not None:
            bar.stop()
