"""Lazy package exports: names imported from their submodule on first use.

A package's ``__init__`` lists ``{name: "module.path"}`` and gets module-level ``__getattr__``
and ``__dir__`` from `lazy_exports`, so importing the package loads none of its heavy parts.

An exported name may also be the name of a submodule (``vhd.export`` the function, in
``vhd/store/export.py``). Python binds a submodule as an attribute of its package when it is first
imported, which would replace the function with the module; `keep_exports` makes the package
refuse that binding, so the name stays the function (the module is still imported by name:
``from vhd.export import ExportFormat``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

REMOVAL_RELEASE = "0.3"
"""The release that drops the module paths and names moved in 0.2 (`moved_modules`, ``lazy_exports(moved=...)``)."""


def lazy_exports(
    package: str, exports: Mapping[str, str], moved: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build ``(__getattr__, __dir__)`` for a package whose names load on first access.

    Args:
        package: The package's ``__name__``.
        exports: Each exported name and the module that defines it.
        moved: Names the package used to export that now live elsewhere, each with its new
            module: still served, with a `DeprecationWarning` pointing at the caller (not listed
            by ``dir``), until `REMOVAL_RELEASE`.

    Returns:
        The two module-level functions; a loaded name is cached in the package's namespace. The
        package keeps its exported names over submodules of the same name (`keep_exports`).
    """
    old = dict(moved or {})
    keep_exports(package, [*exports, *old])

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None and name in old:
            warnings.warn(
                f"{package}.{name} moved to {old[name]}.{name}; the old name goes in vhd {REMOVAL_RELEASE}",
                DeprecationWarning,
                stacklevel=2,
            )
            value = getattr(importlib.import_module(old[name]), name)
            vars(sys.modules[package])[name] = value  # warned once: ``from p import x`` looks it up twice
            return value
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


class _MovedModule(types.ModuleType):
    """An old module path: each attribute is looked up in the module(s) that now hold it."""

    def __init__(self, name: str, targets: tuple[str, ...]) -> None:
        super().__init__(name, f"moved: {name} is now {' and '.join(targets)}")
        self.__targets = targets

    def __getattr__(self, attr: str) -> Any:
        for target in self.__targets:
            module = importlib.import_module(target)
            if hasattr(module, attr):
                return getattr(module, attr)
        raise AttributeError(f"module {self.__name__!r} (now {' / '.join(self.__targets)}) has no attribute {attr!r}")

    def __dir__(self) -> list[str]:
        return sorted({name for t in self.__targets for name in dir(importlib.import_module(t))})


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves old module paths (`moved_modules`) as `_MovedModule` proxies, with a deprecation warning."""

    def __init__(self, table: Mapping[str, tuple[str, ...]]) -> None:
        self.table = dict(table)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.table:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        targets = self.table[spec.name]
        warnings.warn(
            f"{spec.name} moved to {' and '.join(targets)}; the old path goes in vhd {REMOVAL_RELEASE}",
            DeprecationWarning,
            stacklevel=2,  # the importing line: warnings skips the import system's frames
        )
        module = _MovedModule(spec.name, targets)
        module.__path__ = []  # a package: older paths below it (``vhd.hub.hf``) resolve through the table too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def moved_modules(table: Mapping[str, tuple[str, ...]]) -> None:
    """Keep old module paths importable: each is served by the module(s) that now hold its names.

    ``import vhd.store.export`` (moved to ``vhd.export``) then gives a module whose attributes are
    those of the new module(s), and warns with a `DeprecationWarning` pointing at the importing
    line. Installed once, ahead of the normal finders, when ``vhd`` is imported.

    Args:
        table: Each old dotted module path and the new module(s) its names are looked up in, in order.
    """
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder(table))
