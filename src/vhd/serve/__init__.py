"""`vhd serve`: the review app, a small local web app over a store (room `serve/`, floor 2).

People look at samples safely (previews blurred on the server, the clear image only after a click
per sample), read the debate, decide harmful / not harmful, and their labels go straight into a
labelled set of the store, where `vhd icl`, `vhd align`, `vhd bench` and `vhd tune` read them.
Starlette, uvicorn and Jinja2 load only when the app is built (`vhd[serve]`).

Example:
    >>> from vhd.serve import ServeSettings, create_app, serve
    >>> settings = ServeSettings(store="run.db", reviewer="alice")  # doctest: +SKIP
    >>> serve(settings)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports
from vhd.serve.settings import ServeSettings, check_bind

if TYPE_CHECKING:
    from vhd.serve.app import create_app
    from vhd.serve.run import serve

__all__ = ["ServeSettings", "check_bind", "create_app", "serve"]

__getattr__, __dir__ = lazy_exports(__name__, {"create_app": "vhd.serve.app", "serve": "vhd.serve.run"})
