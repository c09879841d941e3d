"""The annotation room: the entry point, the async loop, the dry-run estimate and the run summary.

``vhd.annotate`` is both this package and the function users call
(``vhd.annotate(["photos/"], model=..., store=...)``, docs/python-api.md). Python binds a
package's submodules as attributes of its parent, which would replace the function with this
package the first time any ``vhd.annotate.*`` module is imported; so the package itself is
callable and forwards to `vhd.annotate.api.annotate`.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.annotate.api import annotate
    from vhd.annotate.summary import RunSummary

_LAZY = {"annotate": "vhd.annotate.api", "RunSummary": "vhd.annotate.summary"}

__all__ = ["RunSummary", "annotate"]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from vhd.annotate.api import annotate

        return annotate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
