"""vhd: build, annotate and benchmark visual-harmfulness datasets.

Importing vhd is cheap: heavy parts (torch, transformers, PyAV, the OpenAI SDK) load only when
a feature that needs them runs.

Example:
    >>> import vhd
    >>> summary = vhd.annotate(["photos/"], model="openai:gpt-4o", store="run.db")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vhd.annotate.api import annotate

__all__ = ["__version__", "annotate"]


def __getattr__(name: str) -> Any:
    if name == "annotate":
        # The `vhd.annotate` package is callable (it forwards to `vhd.annotate.api.annotate`), so
        # `vhd.annotate(...)` works whether or not the package was imported before.
        import vhd.annotate

        return vhd.annotate
    if name == "__version__":
        from vhd.version import version

        return version()
    raise AttributeError(f"module 'vhd' has no attribute {name!r}")
