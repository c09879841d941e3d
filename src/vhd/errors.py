"""Exceptions that vhd raises, each carrying a one-line message that says what to do."""

from __future__ import annotations

import shlex
import sys


class VhdError(Exception):
    """Base class for errors shown to the user as one line (no traceback)."""


class ConfigError(VhdError):
    """Bad configuration or command-line usage (exit code 2)."""


class MediaError(VhdError):
    """A media file cannot be used: unreadable, corrupt, unsupported or over a limit."""


class StoreWriteError(VhdError):
    """The store could not be written: full disk, read-only file, I/O error, or locked too long.

    Everything committed before stays in the store, readable; running the same command again
    resumes once the cause is fixed.

    Attributes:
        full: The disk (or the store's size limit) is full.
    """

    def __init__(self, message: str, *, full: bool = False) -> None:
        super().__init__(message)
        self.full = full

    def __reduce__(self) -> tuple[type[StoreWriteError], tuple[str], dict[str, bool]]:
        return (type(self), (str(self),), {"full": self.full})


def pip_install(what: str) -> str:
    """The pip command that installs ``what`` for the running interpreter.

    ``python -m pip`` with this interpreter's path (``sys.executable``), so the line installs into
    the environment vhd runs in even when that virtual environment is not activated (a bare
    ``pip`` may belong to another Python).
    """
    return f"{shlex.quote(sys.executable or 'python3')} -m pip install {what}"


class MissingDependencyError(VhdError):
    """An optional extra is not installed; the message gives the exact pip line (for this interpreter)."""

    def __init__(self, package: str, extra: str) -> None:
        line = pip_install(f"'vhd[{extra}]'")
        super().__init__(f"{package} is not installed: run `{line}` (or `{pip_install(package)}`)")
        self.package = package
        self.extra = extra

    def __reduce__(self) -> tuple[type[MissingDependencyError], tuple[str, str]]:
        # Rebuilt from its two fields, so it crosses process boundaries (multiprocessing pools).
        return (type(self), (self.package, self.extra))


class BackendError(VhdError):
    """A model call failed.

    Attributes:
        retryable: Whether trying the same call later may succeed (timeouts, 429, 5xx).
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class BackendUnavailableError(VhdError):
    """A backend cannot work at all: missing credentials, unreachable endpoint, missing model."""


def require(module: str, extra: str, package: str | None = None) -> object:
    """Import an optional module or raise `MissingDependencyError` naming the extra.

    Args:
        module: Module to import, e.g. ``"av"``.
        extra: The vhd extra that installs it, e.g. ``"video"``.
        package: The pip package name when it differs from the module name.

    Returns:
        The imported module.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(package or module, extra) from exc


class ExecutorError(VhdError):
    """Workers cannot be started or reached (a Ray cluster address that answers nothing, ...)."""


class WorkerLostError(ExecutorError):
    """The workers running an item died too many times; the item was not finished (run again to retry)."""
