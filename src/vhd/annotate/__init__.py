"""The annotation room: the entry point, the async loop, the dry-run estimate and the run summary.

The function users call is `vhd.annotate.api.annotate`, exported as ``vhd.annotate`` (and its
async twin as ``vhd.aannotate``): after ``import vhd``, ``vhd.annotate`` is that function, while
this package stays importable by name (``from vhd.annotate import RunSummary``,
``from vhd.annotate import loop``). Module attribute chains through the function
(``vhd.annotate.loop.run``) do not work: import the module by name instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.annotate.api import aannotate, annotate
    from vhd.annotate.summary import RunSummary

_LAZY = {"annotate": "vhd.annotate.api", "aannotate": "vhd.annotate.api", "RunSummary": "vhd.annotate.summary"}

__all__ = ["RunSummary", "aannotate", "annotate"]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
