"""Real local servers used by tests and benchmarks."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

PR_SET_PDEATHSIG = 1
"""Linux ``prctl`` option: the signal a process gets when the thread that started it ends."""


def free_port() -> int:
    """A loopback port nothing listens on right now (bound once, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def die_with_this_process() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child killed (SIGKILL) when this process ends, however it ends.

    The test session can end without running any fixture's teardown (SIGKILL, pytest-timeout's
    ``thread`` method, which exits at once, a crash); a server started with this dies with it
    instead of running on. Linux only (None elsewhere: teardown is then the only stop). The kernel
    sends the signal when the *thread* that started the child ends, so start servers from the
    main thread (fixtures and tests run there). It survives ``exec`` (a ``bash -c`` that execs its
    one command keeps it) but not a fork: a grandchild is not covered.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, before the fork
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # this process ended before the signal was armed
            os._exit(1)

    return arm


def popen_server(command: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start a server process in its own session that dies with this process (`die_with_this_process`)."""
    return subprocess.Popen(command, start_new_session=True, preexec_fn=die_with_this_process(), **kwargs)
