"""Run the review app with uvicorn (what `vhd serve` calls)."""

from __future__ import annotations

from collections.abc import Callable

from vhd.errors import MissingDependencyError
from vhd.serve.settings import ServeSettings


def serve(settings: ServeSettings, *, on_event: Callable[[str], None] | None = None) -> None:
    """Serve the review app until interrupted (Ctrl-C); it opens no browser by itself.

    Raises:
        MissingDependencyError: uvicorn, starlette or jinja2 is missing (``pip install 'vhd[serve]'``).
        ConfigError: The store or queue cannot be read.
    """
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingDependencyError("uvicorn", "serve") from exc
    from vhd.serve.app import create_app

    app = create_app(settings, on_event=on_event)
    say = on_event or (lambda _m: None)
    say(f"reviewing {settings.store} into labelled set {settings.set_name!r} as {settings.reviewer}")
    say(f"open http://{settings.host}:{settings.port}/ (Ctrl-C stops)")
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", access_log=False)
