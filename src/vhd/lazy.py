"""Lazy package exports: names imported from their submodule on first use.

A package's ``__init__`` lists ``{name: "module.path"}`` and gets module-level ``__getattr__``
and ``__dir__`` from `lazy_exports`, so importing the package loads none of its heavy parts.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build ``(__getattr__, __dir__)`` for a package whose names load on first access.

    Args:
        package: The package's ``__name__``.
        exports: Each exported name and the module that defines it.

    Returns:
        The two module-level functions; a loaded name is cached in the package's namespace.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
