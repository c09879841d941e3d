"""vhd: build, annotate and benchmark visual-harmfulness datasets.

Importing vhd is cheap: heavy parts (torch, transformers, PyAV, the OpenAI SDK) load only when
a feature that needs them runs.

Example:
    >>> import vhd
    >>> summary = vhd.annotate(["photos/"], model="openai:gpt-4o", store="run.db")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from vhd.annotator import annotate

__all__ = ["__version__", "annotate"]


def __getattr__(name: str) -> Any:
    if name == "annotate":
        from vhd.annotator import annotate

        return annotate
    raise AttributeError(f"module 'vhd' has no attribute {name!r}")
