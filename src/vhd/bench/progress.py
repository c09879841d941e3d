"""The progress bar of ``vhd bench``: rich, on a terminal only (nothing when output is piped)."""

from __future__ import annotations

import time
from typing import Any


class BenchProgress:
    """Samples done out of samples to do, rate and time left; a no-op unless stderr is a terminal.

    Pass an instance as ``on_progress`` to `vhd.bench.benchmark` / `vhd.bench.run_bench`, and
    call `stop` when the run ends (also after an error or Ctrl-C).

    Args:
        enabled: False turns it off whatever the terminal.
        console: A rich console to draw on (default: stderr); for tests.
    """

    def __init__(self, enabled: bool = True, console: Any = None) -> None:
        self.bar: Any = None
        self.task: Any = None
        self.start = time.perf_counter()
        if not enabled:
            return
        from rich.console import Console

        self.console = console or Console(stderr=True)
        if not self.console.is_terminal:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.bar = Progress(
            TextColumn("benchmarking"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
        )

    def __call__(self, done: int, total: int) -> None:
        """Record that ``done`` of ``total`` samples are finished."""
        if self.bar is None:
            return
        if self.task is None:
            self.start = time.perf_counter()
            self.task = self.bar.add_task("bench", total=total, rate="")
            self.bar.start()
        rate = done / max(time.perf_counter() - self.start, 1e-9)
        self.bar.update(self.task, completed=done, total=total, rate=f"{rate:.1f} samples/s")

    def stop(self) -> None:
        """Take the bar down (safe to call twice, or when it never started)."""
        if self.bar is not None and self.task is not None:
            self.bar.stop()
        self.bar = None
