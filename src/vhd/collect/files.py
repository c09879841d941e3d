"""Small file helpers shared by the collect room: atomic text writes."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write text (UTF-8) through a temporary file in the same folder, then rename it over ``path``.

    A reader sees the old content or the new, never a mix; a crash leaves at most a hidden
    ``.NAME.*.tmp`` file. The folder is created when missing; the file gets mode 0644 (or keeps
    the mode of the file it replaces).

    Args:
        path: The file to write.
        text: Its new content.

    Returns:
        The path written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
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
