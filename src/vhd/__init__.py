"""vhd: build, annotate and benchmark visual-harmfulness datasets.

Importing vhd is cheap: heavy parts (torch, transformers, PyAV, the OpenAI SDK) load only when
a feature that needs them runs. Every room is reachable from here (``vhd.export``,
``vhd.bench.benchmark``, ...), loaded on first use.

``vhd.annotate`` and ``vhd.aannotate`` are functions (`vhd.annotate.api.annotate`), with their
real signatures. The room of the same name stays importable as a package
(``from vhd.annotate import RunSummary``, ``from vhd.annotate.loop import run``); Python would
otherwise bind the package over the function when one of its modules is first imported, so this
module keeps the function under that name (`vhd.lazy.keep_exports`).

Example:
    >>> import vhd
    >>> summary = vhd.annotate(["photos/"], model="openai:gpt-4o", store="run.db")  # doctest: +SKIP
    >>> summary = await vhd.annotate_async("photos/", model="scripted:demo", store="run.db")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vhd.lazy import keep_exports, moved_modules

if TYPE_CHECKING:
    from vhd import align as align
    from vhd import bench as bench
    from vhd import categorize as categorize
    from vhd import collect as collect
    from vhd import compare as compare
    from vhd import config as config
    from vhd import curate as curate
    from vhd import detectors as detectors
    from vhd import errors as errors
    from vhd import export as export
    from vhd import icl as icl
    from vhd import labels as labels
    from vhd import media as media
    from vhd import progress as progress
    from vhd import records as records
    from vhd import store as store
    from vhd import synth as synth
    from vhd import taxonomy as taxonomy
    from vhd.annotate.api import aannotate, annotate, annotate_async

_FUNCTIONS = {"annotate": "vhd.annotate.api", "annotate_async": "vhd.annotate.api", "aannotate": "vhd.annotate.api"}
"""Functions exported here, by the module that defines them."""

_ROOMS = frozenset(
    {
        "align",
        "bench",
        "categorize",
        "collect",
        "compare",
        "config",
        "curate",
        "detectors",
        "errors",
        "export",
        "icl",
        "labels",
        "media",
        "progress",
        "records",
        "store",
        "synth",
        "taxonomy",
    }
)
"""Rooms (and modules) reachable as attributes after a bare ``import vhd``, each loaded on first use."""

_MOVED = {
    "vhd.align.labels": ("vhd.labels.sets",),
    "vhd.align.labelstudio": ("vhd.labels.labelstudio.convert",),
    "vhd.align.labelstudio_api": ("vhd.labels.labelstudio.api",),
    "vhd.align.labelstudio_read": ("vhd.labels.labelstudio.read",),
    "vhd.align.review": ("vhd.compare.review_queue",),
    "vhd.align.icl_files": ("vhd.icl.files",),
    "vhd.align.icl_metrics": ("vhd.icl.metrics",),
    "vhd.align.icl_result": ("vhd.icl.result",),
    "vhd.align.icl_search": ("vhd.icl.search",),
    "vhd.align.compare": ("vhd.compare.runner",),
    "vhd.align.compare_cascade": ("vhd.compare.cascade_run",),
    "vhd.align.compare_report": ("vhd.compare.report",),
    "vhd.align.compare_result": ("vhd.compare.result",),
    "vhd.align.compare_single": ("vhd.compare.single",),
    "vhd.align.injection": ("vhd.compare.injection",),
    "vhd.align.cascade": ("vhd.compare.cascade", "vhd.cli.cascade_flags"),
    "vhd.align.agreement": ("vhd.bench.metrics.agreement",),
    "vhd.store.labels": ("vhd.labels.files",),
    "vhd.store.label_rules": ("vhd.labels.rules",),
    "vhd.store.export": ("vhd.export",),
    "vhd.store.columns": ("vhd.export.schema",),
    "vhd.hub": ("vhd.export",),
    "vhd.hub.hf": ("vhd.export.hf",),
    "vhd.hub.card": ("vhd.export.hf_card",),
    "vhd.hub.result": ("vhd.export.hf_result",),
}
"""Module paths of 0.1 that moved in the house's reorganisation: importable until `vhd.lazy.REMOVAL_RELEASE`,
with a `DeprecationWarning` (`vhd.lazy.moved_modules`)."""

__all__ = ["__version__", "aannotate", "annotate", "annotate_async", *sorted(_ROOMS)]


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
moved_modules(_MOVED)
