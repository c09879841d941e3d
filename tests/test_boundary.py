"""The item boundary (vhd.boundary): item errors become outcomes, run faults pass."""

from __future__ import annotations

import asyncio
import errno
import sqlite3

import pytest

from vhd.boundary import ItemFailure, guarded, is_run_fault, item_boundary
from vhd.errors import ConfigError, MediaError, MissingDependencyError, StoreWriteError, pip_install


def test_an_item_error_is_kept_as_its_failure_and_the_loop_goes_on() -> None:
    outcomes = []
    for item in ["ok", "boom", "media", "extra"]:
        with item_boundary(item) as b:
            if item == "boom":
                raise AttributeError("'NoneType' object has no attribute 'codec'\nsecond line")
            if item == "media":
                raise MediaError("damaged: bad data")
            if item == "extra":
                raise MissingDependencyError("av", "video")
        outcomes.append(b.failure.reason if b.failure else "done")
    assert outcomes == [
        "done",
        "unexpected error (AttributeError: 'NoneType' object has no attribute 'codec' second line)",
        "damaged: bad data",  # an expected error keeps its precise reason
        "av is not installed: run `" + pip_install("'vhd[video]'") + "` (or `" + pip_install("av") + "`)",
    ]


@pytest.mark.parametrize(
    "fault",
    [
        KeyboardInterrupt(),
        SystemExit(1),
        asyncio.CancelledError(),
        MemoryError(),
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EROFS, "Read-only file system"),
        sqlite3.OperationalError("database or disk is full"),
        sqlite3.OperationalError("database is locked"),
        StoreWriteError("the store could not be written", full=True),
        ConfigError("bad flag"),
    ],
)
def test_run_faults_pass_through(fault: BaseException) -> None:
    assert is_run_fault(fault)
    with pytest.raises(type(fault)), item_boundary("x"):
        raise fault


def test_guarded_returns_the_result_or_the_failure() -> None:
    assert guarded(int, "12") == 12
    failure = guarded(int, "x")
    assert isinstance(failure, ItemFailure) and failure.error_type == "ValueError" and not failure.expected
    assert guarded(lambda: [][0]).reason.startswith("unexpected error (IndexError")  # type: ignore[union-attr]
    long = guarded(lambda: (_ for _ in ()).throw(RuntimeError("x" * 1000)))
    assert isinstance(long, ItemFailure) and len(long.message) <= 300
