"""The annotation room: the entry point, the async loop, the dry-run estimate and the run summary.

The function users call is `vhd.annotate.api.annotate`, exported as ``vhd.annotate`` (its async
twin is ``vhd.annotate_async``, 0.1's ``vhd.aannotate``; its run settings are `RunOptions`): after
``import vhd``, ``vhd.annotate`` is that function, while this package stays importable by name
(``from vhd.annotate import RunSummary``, ``from vhd.annotate import loop``). Module attribute
chains through the function (``vhd.annotate.loop.run``) do not work: import the module by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.annotate.api import aannotate, annotate, annotate_async
    from vhd.annotate.options import RunOptions
    from vhd.annotate.summary import RunSummary

_LAZY = {
    "annotate": "vhd.annotate.api",
    "annotate_async": "vhd.annotate.api",
    "aannotate": "vhd.annotate.api",
    "RunOptions": "vhd.annotate.options",
    "RunSummary": "vhd.annotate.summary",
}

__all__ = ["RunOptions", "RunSummary", "aannotate", "annotate", "annotate_async"]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
