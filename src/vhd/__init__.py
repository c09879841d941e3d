"""vhd: build, annotate and benchmark visual-harmfulness datasets.

Importing vhd is cheap: heavy parts (torch, transformers, PyAV, the OpenAI SDK) load only when
a feature that needs them runs. Every room is reachable from here (``vhd.store.export``,
``vhd.bench.benchmark``, ...), loaded on first use.

``vhd.annotate`` and ``vhd.aannotate`` are functions (`vhd.annotate.api.annotate`), with their
real signatures. The room of the same name stays importable as a package
(``from vhd.annotate import RunSummary``, ``from vhd.annotate.loop import run``); Python would
otherwise bind the package over the function when one of its modules is first imported, so this
module keeps the function under that name (`vhd.lazy.keep_exports`).

Example:
    >>> import vhd
    >>> summary = vhd.annotate(["photos/"], model="openai:gpt-4o", store="run.db")  # doctest: +SKIP
    >>> summary = await vhd.aannotate(["photos/"], model="scripted:demo", store="run.db")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vhd.lazy import keep_exports

if TYPE_CHECKING:
    from vhd import align as align
    from vhd import bench as bench
    from vhd import categorize as categorize
    from vhd import collect as collect
    from vhd import curate as curate
    from vhd import hub as hub
    from vhd import media as media
    from vhd import records as records
    from vhd import store as store
    from vhd import synth as synth
    from vhd import taxonomy as taxonomy
    from vhd.annotate.api import aannotate, annotate

_FUNCTIONS = {"annotate": "vhd.annotate.api", "aannotate": "vhd.annotate.api"}
"""Functions exported here, by the module that defines them."""

_ROOMS = frozenset(
    {"align", "bench", "categorize", "collect", "curate", "hub", "media", "records", "store", "synth", "taxonomy"}
)
"""Rooms (and modules) reachable as attributes after a bare ``import vhd``."""

__all__ = ["__version__", "aannotate", "annotate", *sorted(_ROOMS)]


def __getattr__(name: str) -> Any:
    module = _FUNCTIONS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # cached (past the guard of `keep_exports`)
        return value
    if name in _ROOMS:
        return importlib.import_module(f"vhd.{name}")
    if name == "__version__":
        from vhd.version import version

        return version()
    raise AttributeError(f"module 'vhd' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


keep_exports(__name__, _FUNCTIONS)
