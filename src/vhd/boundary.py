"""The item boundary: one user-supplied item's unexpected error becomes that item's outcome.

Every loop over user-supplied items (files, folder entries, manifest and label rows, URLs, JSON
tasks, a video's frames) runs each item inside `item_boundary` (or calls it through `guarded`).
An `Exception` raised for the item is caught there and kept as an `ItemFailure` (the exception's
type and a one-line message), which the loop records as the item's ``skipped``/``failed`` outcome
before going on. Expected errors keep their precise reasons (a `vhd.errors.MediaError`'s message is
the reason as it stands); the boundary is the net for the rest.

Run faults are not items and pass through untouched, to stop the run with one line:
interrupts and cancellation (`BaseException`s that are not `Exception`s), a full or read-only
disk (``ENOSPC``, ``EDQUOT``, ``EFBIG``, ``EROFS``), a full or locked SQLite database, running out
of memory, and vhd's own run-level errors (`vhd.errors.VhdError` other than `MediaError` and
`MissingDependencyError`, e.g. a store that cannot be written or a backend that is unavailable).
A missing optional extra is an item's outcome: the reason names the extra to install.

``tools/item_loops.py`` (run by ``tests/test_house.py``) finds every loop over a user-item source
(`ITEM_SOURCES` there) and fails when its body does not use this boundary.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from vhd.errors import MediaError, MissingDependencyError, VhdError

T = TypeVar("T")

__all__ = ["Boundary", "ItemFailure", "disk_full", "guarded", "is_run_fault", "item_boundary", "one_line"]

RUN_FAULT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
"""OS errors that end the run, whatever item met them: the disk is full or read-only."""

MESSAGE_LIMIT = 300
"""Characters of an exception's message kept in a reason."""


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """Fold a message onto one line (whitespace runs become one space) and cut it to ``limit``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def is_run_fault(exc: BaseException) -> bool:
    """Whether an error ends the run instead of one item (see the module docstring)."""
    if not isinstance(exc, Exception) or isinstance(exc, MemoryError):
        return True
    if isinstance(exc, VhdError):
        return not isinstance(exc, MediaError | MissingDependencyError)
    if isinstance(exc, OSError) and exc.errno in RUN_FAULT_ERRNOS:
        return True
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc)
        return "full" in text or "locked" in text or "readonly" in text or "disk I/O" in text
    return False


def disk_full(exc: BaseException) -> OSError | None:
    """The full-disk (or file-size-limit, or read-only disk) error behind ``exc``, if there is one.

    Libraries wrap it (``datasets`` raises ``DatasetGenerationError`` from it), so the chain of
    causes and contexts is searched.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in RUN_FAULT_ERRNOS:
            return current
        current = current.__cause__ or current.__context__
    return None


@dataclass(frozen=True)
class ItemFailure:
    """What went wrong with one item.

    Attributes:
        error_type: The exception's class name (``AttributeError``, ``MediaError``, ...).
        message: Its message on one line.
        expected: The error is one vhd raises on purpose (`vhd.errors.MediaError`,
            `vhd.errors.MissingDependencyError`), whose message is a complete reason.
    """

    error_type: str
    message: str
    expected: bool = False

    @classmethod
    def of(cls, exc: BaseException) -> ItemFailure:
        """The failure an exception describes."""
        expected = isinstance(exc, VhdError)
        text = one_line(str(exc)) or "(no message)"
        return cls(type(exc).__name__, text, expected)

    @property
    def reason(self) -> str:
        """One line for the item's recorded outcome and the summary."""
        if self.expected:
            return self.message
        return f"unexpected error ({self.error_type}: {self.message})"

    def __str__(self) -> str:
        return self.reason


class Boundary:
    """The state of one `item_boundary`: the item's failure, if there was one."""

    def __init__(self, item: object = None) -> None:
        self.item = item
        self.failure: ItemFailure | None = None

    @property
    def failed(self) -> bool:
        """Whether the item raised."""
        return self.failure is not None


@contextmanager
def item_boundary(item: object = None) -> Iterator[Boundary]:
    """Run one item's work; an item error is kept in the yielded `Boundary`, run faults pass.

    Example::

        for path in paths:
            with item_boundary(path) as b:
                process(path)
            if b.failure is not None:
                record_skip(path, b.failure.reason)

    Args:
        item: The item (for the caller's records; not used here).
    """
    boundary = Boundary(item)
    try:
        yield boundary
    except Exception as exc:
        if is_run_fault(exc):
            raise
        boundary.failure = ItemFailure.of(exc)


def guarded(fn: Callable[..., T], *args: object, **kwargs: object) -> T | ItemFailure:
    """Call ``fn(*args, **kwargs)`` inside the item boundary: its result, or the item's failure."""
    with item_boundary() as b:
        return fn(*args, **kwargs)
    assert b.failure is not None
    return b.failure
