"""Lazy package exports: names imported from their submodule on first use.

A package's ``__init__`` lists ``{name: "module.path"}`` and gets module-level ``__getattr__``
and ``__dir__`` from `lazy_exports`, so importing the package loads none of its heavy parts.

An exported name may also be the name of a submodule (``vhd.store.export`` the function, in
``vhd/store/export.py``). Python binds a submodule as an attribute of its package when it is first
imported, which would replace the function with the module; `keep_exports` makes the package
refuse that binding, so the name stays the function (the module is still imported by name:
``from vhd.store.export import ExportFormat``).
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build ``(__getattr__, __dir__)`` for a package whose names load on first access.

    Args:
        package: The package's ``__name__``.
        exports: Each exported name and the module that defines it.

    Returns:
        The two module-level functions; a loaded name is cached in the package's namespace. The
        package keeps its exported names over submodules of the same name (`keep_exports`).
    """
    keep_exports(package, exports)

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        vars(sys.modules[package])[name] = value  # cached (past the guard of `keep_exports`)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__


class _KeepsExports(types.ModuleType):
    """A package whose exported names are never replaced by submodules of the same name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in vars(self).get("__lazy_exports__", ()):
            return  # the import system binding `package.name` to the submodule: the export keeps the name
        super().__setattr__(name, value)


def keep_exports(package: str, names: Iterable[str]) -> None:
    """Make ``package`` keep ``names`` (its exports) when a submodule of the same name is imported."""
    module = sys.modules[package]
    vars(module)["__lazy_exports__"] = frozenset(names)
    module.__class__ = _KeepsExports
