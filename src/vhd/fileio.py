"""Atomic file writes, shared by every command that writes a file.

The content goes to a temporary file in the target's folder, is flushed to disk, and is then
renamed over the target: a reader, or a re-run after the process was killed, sees the old file
or the complete new one, never a partial file under the final name. A crash leaves at most a
hidden ``.NAME.*.tmp`` file beside it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from vhd.errors import ConfigError

Content = str | bytes | Callable[[IO[Any]], None]
"""Text (written as UTF-8), bytes, or a function that writes to the open file."""


def atomic_write(path: str | os.PathLike[str], content: Content, *, binary: bool = False) -> Path:
    """Write a file atomically.

    Args:
        path: The final file; its folder is created when missing.
        content: Text (UTF-8, newlines untranslated), bytes, or a function given the open
            temporary file.
        binary: For a function: open the file in binary mode instead of text.

    Returns:
        The final path. The file keeps the mode of the file it replaces, else 0644.

    Raises:
        ConfigError: The folder cannot be created or written (the message says which).
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise ConfigError(f"cannot write {target}: {exc.strerror}; choose another output path") from exc
    if isinstance(content, str):
        data: bytes | None = content.encode("utf-8")
    else:
        data = content if isinstance(content, bytes) else None
    try:
        if data is not None or binary:
            fh: IO[Any] = os.fdopen(fd, "wb")
        else:
            fh = os.fdopen(fd, "w", encoding="utf-8", newline="")
        with fh:
            if data is not None:
                fh.write(data)
            elif callable(content):
                content(fh)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            mode = target.stat().st_mode & 0o777
        except OSError:
            mode = 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""A spreadsheet reads a cell starting with one of these as a formula (OWASP's CSV-injection rule)."""


def escape_cell(value: object) -> object:
    """Make a text cell safe to open in a spreadsheet: a leading formula character gets a ``'``.

    Text that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is prefixed with a
    single quote, which spreadsheets show as text. Text that already starts with quotes followed
    by such a character gets one more quote, so `unescape_cell` gives back exactly the original.
    Numbers, booleans and None are returned unchanged.
    """
    if isinstance(value, str) and value.lstrip("'").startswith(_FORMULA_START):
        return "'" + value
    return value


def unescape_cell(value: str) -> str:
    """Undo `escape_cell`: vhd's CSV readers give back the text vhd's writers were given."""
    if value.startswith("'") and value[1:].lstrip("'").startswith(_FORMULA_START):
        return value[1:]
    return value


def path_within(path: str | os.PathLike[str], folders: Iterable[str | os.PathLike[str]]) -> bool:
    """Whether a path lies in one of the folders (or is one), symbolic links resolved on both sides.

    The rule every reader of a file that names other files applies (labels files, manifests): a
    path written there, as ``../``, ``~`` or absolute, may lead anywhere on disk, so by default it
    must stay under the folders the user named; a symbolic link inside them that leads out counts
    as outside.
    """
    real = os.path.realpath(path)
    for folder in folders:
        root = os.path.realpath(folder)
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False
