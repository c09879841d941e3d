"""Logging for the command line: ``-v``/``-q`` levels and the text or JSON line format.

Imported by `vhd.cli.main` only after the arguments are parsed (``vhd --help`` never loads it).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any


def log_level(verbose: int, quiet: int) -> int:
    """The logging level ``-v``/``-q`` ask for (WARNING when neither is given)."""
    step = max(-2, min(2, verbose - quiet))
    return {-2: logging.CRITICAL, -1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO, 2: logging.DEBUG}[step]


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601 UTC), level, logger, message (secrets redacted)."""

    def format(self, record: logging.LogRecord) -> str:
        """Format one record as a JSON line."""
        from vhd.redaction import redact_text

        data: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact_text(record.getMessage()),
        }
        if record.exc_info:
            data["exception"] = redact_text(self.formatException(record.exc_info))
        return json.dumps(data, ensure_ascii=False)


class TextLogFormatter(logging.Formatter):
    """``vhd: message`` for warnings and above, ``vhd: info: ...`` / ``vhd: debug: ...`` below."""

    def format(self, record: logging.LogRecord) -> str:
        """Format one record as a line a person reads."""
        from vhd.fileio import printable
        from vhd.redaction import redact_text

        tag = "" if record.levelno >= logging.WARNING else f"{record.levelname.lower()}: "
        return f"vhd: {tag}{printable(redact_text(record.getMessage()))}"


class CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler that writes to whatever ``sys.stderr`` is when a record comes.

    While a progress bar is drawn, rich points ``sys.stderr`` at a proxy that prints above the bar;
    a handler holding the stderr of start-up would write at the cursor instead, glued to the bar's
    line (``errors 0^Cvhd: interrupted``).
    """

    @property
    def stream(self) -> Any:
        """The current ``sys.stderr``."""
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass  # always the current sys.stderr


def configure_logging(verbose: int = 0, quiet: int = 0, log_format: str = "text") -> int:
    """Send the ``vhd`` loggers (and libraries' warnings) to stderr at the level asked for.

    Args:
        verbose: How many ``-v``.
        quiet: How many ``-q``.
        log_format: ``text`` or ``json``.

    Returns:
        The level set.
    """
    level = log_level(verbose, quiet)
    handler = CurrentStderr()
    handler.setFormatter(JsonLogFormatter() if log_format == "json" else TextLogFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "vhd_habits", False)]:
        root.removeHandler(old)
    handler.vhd_habits = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(max(level, logging.WARNING))
    logging.getLogger("vhd").setLevel(level)
    logging.captureWarnings(True)
    return level
