"""Run the review app with uvicorn (what `vhd serve` calls)."""

from __future__ import annotations

import socket
from collections.abc import Callable

from vhd.errors import ConfigError, MissingDependencyError
from vhd.serve.settings import ServeSettings


def _check_port(host: str, port: int) -> None:
    """Fail in one line before any work when the address cannot be listened on (in use, unknown host)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}): pick another --port, or check --host"
            ) from None


def serve(settings: ServeSettings, *, on_event: Callable[[str], None] | None = None) -> None:
    """Serve the review app until interrupted (Ctrl-C); it opens no browser by itself.

    Raises:
        MissingDependencyError: uvicorn, starlette or jinja2 is missing (``pip install 'vhd[serve]'``).
        ConfigError: The store or queue cannot be read, or the address is in use.
    """
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingDependencyError("uvicorn", "serve") from exc
    from vhd.serve.app import create_app

    _check_port(settings.host, settings.port)
    app = create_app(settings, on_event=on_event)
    say = on_event or (lambda _m: None)
    say(f"reviewing {settings.store} into labelled set {settings.set_name!r} as {settings.reviewer}")
    say(f"open http://{settings.host}:{settings.port}/ (Ctrl-C stops)")
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", access_log=False)
