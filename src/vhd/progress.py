"""Progress: the library reports through a callback; `bar` draws those reports with rich.

Every long-running library call takes ``progress``, a `ProgressFn` called as
``progress(done, total, stage=..., info=...)`` (``vhd.annotate`` and the workflows that annotate
also take ``True``, a bar of their own). The library never draws anything itself;
the CLI (or a notebook) passes `bar`'s callback, which shows a rich bar on stderr when it is a
terminal, the same bar as a cell output that updates in place in a Jupyter notebook (HTML
rendered by rich, shown through IPython's display: no ipywidgets needed), and nothing otherwise
(piped output stays clean).

Example:
    >>> with bar("hashing") as on_progress:  # doctest: +SKIP
    ...     for i in range(10):
    ...         on_progress(i + 1, 10)
"""

from __future__ import annotations

import functools
import io
import sys
import threading
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


class Tally:
    """Several jobs' progress summed into one stage of a `ProgressFn` (the segments of the videos in flight).

    Each job reports through its own `part` as a `ProgressFn` would; the stage shows the sum of
    every part's ``done`` over the sum of their totals (a part without one counts its ``done``),
    so jobs running at once move one bar, and its ETA is that of all of them.

    Args:
        progress: Where the sums go.
        stage: The stage they are filed under.
    """

    def __init__(self, progress: ProgressFn, stage: str) -> None:
        self.progress = progress
        self.stage = stage
        self._parts: dict[str, tuple[int, int | None]] = {}
        self._lock = threading.Lock()

    def part(self, key: str) -> ProgressFn:
        """The `ProgressFn` of one job (``key`` names it; its ``stage`` is ignored, its ``info`` shown)."""

        def report(done: int, total: int | None, *, stage: str = "", info: str = "") -> None:
            with self._lock:
                self._parts[key] = (done, total)
                done_sum = sum(d for d, _ in self._parts.values())
                total_sum = sum(d if t is None else max(t, d) for d, t in self._parts.values())
            self.progress(done_sum, total_sum, stage=self.stage, info=info)

        return report


def in_notebook() -> bool:
    """Whether this code runs in a Jupyter kernel (a notebook, JupyterLab, Colab, VS Code's notebooks).

    IPython is never imported here: only a process that already runs it can be a kernel. An
    IPython shell in a terminal is not a notebook (the terminal bar works there).
    """
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # an IPython too old or half-imported: no notebook display
        return False
    if shell is None:
        return False
    kind = type(shell)
    return kind.__name__ == "ZMQInteractiveShell" or "google.colab" in kind.__module__


NOTEBOOK_REFRESH_S = 0.2
"""Least seconds between two redraws of a notebook bar (the last state is always drawn)."""


class _NotebookDisplay:
    """A rich `Progress` drawn as one notebook output, replaced in place as it advances.

    Rich renders the bar to HTML (and plain text for other front ends); IPython's ``display``
    with a ``display_id`` shows it and ``update`` replaces it, so a notebook, a saved ``.ipynb``
    and nbclient all carry the bar's last state. The output goes to the cell that opened the bar,
    also when reports come from a worker thread (the synchronous API runs there in a notebook).
    """

    def __init__(self, progress: Any) -> None:
        import IPython.display

        display: Any = IPython.display.display
        self.progress = progress
        self._last = 0.0
        self._lock = threading.Lock()
        self._handle = display(self._bundle(), raw=True, display_id=True)

    def _bundle(self) -> dict[str, str]:
        from rich.console import Console

        page = Console(file=io.StringIO(), record=True, width=110, force_terminal=True, force_jupyter=False)
        page.print(self.progress.get_renderable())
        text = page.export_text(clear=False)
        html = page.export_html(
            inline_styles=True,
            code_format='<pre class="vhd-progress" style="font-family: monospace; line-height: 1.3">{code}</pre>',
        )
        return {"text/plain": text.rstrip("\n"), "text/html": html}

    def refresh(self, *, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            if not force and now - self._last < NOTEBOOK_REFRESH_S:
                return
            self._last = now
            if self._handle is not None:
                self._handle.update(self._bundle(), raw=True)


def _columns() -> tuple[Any, ...]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
    )


@contextmanager
def bar(label: str, enabled: bool = True, *, unit: str = "", console: Any = None) -> Iterator[ProgressFn]:
    """Yield a `ProgressFn` that draws a rich progress bar, one line per stage.

    On a terminal (stderr by default) the bar is drawn live; in a Jupyter notebook (`in_notebook`)
    it is a cell output replaced in place (HTML, at most every `NOTEBOOK_REFRESH_S` seconds and
    once more at the end). Nothing is drawn when ``enabled`` is false or the console is neither,
    so piped output stays clean. The bar is taken down when the block ends, also after an error
    or Ctrl-C (a notebook keeps its last state as the cell's output).

    Args:
        label: Text before the bar (``annotating``, ``dedup``...).
        enabled: False draws nothing whatever the terminal.
        unit: Unit for the rate column (``samples`` gives ``12.3 samples/s``); empty hides it.
        console: A rich console to draw on (default: stderr, or the notebook); for tests.
    """
    progress: Any = None
    notebook: _NotebookDisplay | None = None
    if enabled:
        from rich.console import Console
        from rich.progress import Progress

        if console is None and in_notebook():
            progress = Progress(*_columns(), auto_refresh=False, console=Console(file=io.StringIO()))
            notebook = _NotebookDisplay(progress)
        else:
            console = console or Console(stderr=True)
            if console.is_terminal:
                progress = Progress(*_columns(), console=console)
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
        if notebook is not None:
            notebook.refresh()

    if progress is not None and notebook is None:
        progress.start()
    try:
        yield update
    finally:
        if notebook is not None:
            notebook.refresh(force=True)
        elif progress is not None:
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
