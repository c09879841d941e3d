"""Atomic file writes: a temporary file in the target folder, then `os.replace`.

A reader (or a re-run after the process was killed) sees either the old file or the complete
new one, never a partial file under the final name.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from vhd.errors import ConfigError


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[str]], None]) -> Path:
    """Write a text file atomically.

    Args:
        path: The final file (its folder is created when missing).
        write: Writes the content to the open temporary file (UTF-8, newlines untranslated).

    Returns:
        The final path.

    Raises:
        ConfigError: The folder cannot be created or written.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise ConfigError(f"cannot write {target}: {exc.strerror}; choose another output path") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write bytes to a file atomically (see `atomic_write`)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target
