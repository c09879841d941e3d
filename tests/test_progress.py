"""`vhd.progress`: the one progress helper (callback protocol, rich bars on a terminal only)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from vhd.progress import ProgressFn, bar, no_progress, staged


def _terminal(buf: io.StringIO) -> Console:
    return Console(file=buf, force_terminal=True, width=120)


def test_bar_draws_on_a_terminal() -> None:
    buf = io.StringIO()
    with bar("benchmarking", unit="samples", console=_terminal(buf)) as on_progress:
        for done in range(1, 11):
            on_progress(done, 10, info="ok 3")
    text = buf.getvalue()
    assert "benchmarking" in text and "10/10" in text and "samples/s" in text and "ok 3" in text


def test_one_line_per_stage() -> None:
    buf = io.StringIO()
    with bar("dedup", console=_terminal(buf)) as on_progress:
        on_progress(2, 4, stage="hash")
        on_progress(4, 4, stage="hash")
        on_progress(1, 4, stage="link")
    text = buf.getvalue()
    assert "dedup: hash" in text and "dedup: link" in text and "4/4" in text


def test_unknown_total_and_no_unit() -> None:
    buf = io.StringIO()
    with bar("fetching", console=_terminal(buf)) as on_progress:
        on_progress(3, None, info="ok 3  failed 0")
    text = buf.getvalue()
    assert "fetching" in text and "ok 3  failed 0" in text and "/s" not in text


def test_nothing_when_piped_or_disabled() -> None:
    buf = io.StringIO()
    with bar("benchmarking", console=Console(file=buf, force_terminal=False)) as on_progress:
        on_progress(1, 2)
    assert buf.getvalue() == ""
    buf = io.StringIO()
    with bar("benchmarking", enabled=False, console=_terminal(buf)) as on_progress:
        on_progress(1, 2, stage="x")
    assert buf.getvalue() == ""
    no_progress(1, 2, stage="x", info="y")


def test_bar_comes_down_after_an_interrupt() -> None:
    buf = io.StringIO()
    console = _terminal(buf)
    with pytest.raises(KeyboardInterrupt), bar("benchmarking", console=console) as on_progress:
        on_progress(1, 10)
        raise KeyboardInterrupt
    text = buf.getvalue()
    assert "1/10" in text
    assert text.rindex("\x1b[?25h") > text.rindex("\x1b[?25l")  # stopped: the cursor is shown again


def test_staged() -> None:
    seen: list[tuple[int, int | None, str, str]] = []

    def record(done: int, total: int | None, *, stage: str = "", info: str = "") -> None:
        seen.append((done, total, stage, info))

    assert staged(True, "x") is True and staged(False, "x") is False
    fn = staged(record, "debate-r1")
    assert callable(fn)
    fn(1, 2, info="tok 5")
    fn(2, 2, stage="hash")
    assert seen == [(1, 2, "debate-r1", "tok 5"), (2, 2, "debate-r1: hash", "")]
    _: ProgressFn = record  # the protocol fits a plain function


def test_every_long_call_names_its_callback_progress_and_0_1s_on_progress_warns(tmp_path: Path) -> None:
    import inspect

    from vhd.bench.pipeline import benchmark
    from vhd.bench.runner import run_bench
    from vhd.curate.dedup import find_duplicates
    from vhd.curate.frames import extract_frames
    from vhd.curate.ingest import ingest
    from vhd.synth.generate import generate
    from vhd.tune.api import tune

    for fn in (benchmark, run_bench, find_duplicates, extract_frames, ingest, generate, tune):
        params = inspect.signature(fn).parameters
        assert "progress" in params and "on_progress" not in params, fn.__name__
    calls: list[tuple[int, int | None]] = []
    with pytest.warns(DeprecationWarning, match=r"ingest\(on_progress=\.\.\.\): the keyword is progress= now"):
        ingest([tmp_path], tmp_path / "s.db", on_progress=lambda d, t, **_: calls.append((d, t)))  # type: ignore[call-arg]
    ingest([tmp_path], tmp_path / "s.db", progress=lambda d, t, **_: calls.append((d, t)))


def test_a_tally_sums_jobs_in_flight_into_one_stage() -> None:
    from vhd.progress import Tally

    seen: list[tuple[int, int | None, str]] = []

    def report(done: int, total: int | None, *, stage: str = "", info: str = "") -> None:
        seen.append((done, total, stage))

    tally = Tally(report, "video segments")
    a, b = tally.part("a"), tally.part("b")
    a(10, 60)
    b(5, None)  # no total known: it counts what it did
    a(30, 60, stage="ignored")
    assert seen == [(10, 60, "video segments"), (15, 65, "video segments"), (35, 65, "video segments")]
