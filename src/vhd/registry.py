"""One registry helper for every pluggable kind (backends, detectors, crawl sources, export formats...).

A `Registry` maps names to lazy ``"module:attr"`` targets, so importing a registry imports none of
the libraries its entries need (torch, transformers, httpx...). Each built-in `Entry` names the
vhd extra that installs what it needs and the top-level modules it needs, so `Registry.check`
can fail with the exact pip line before any work starts, without importing anything. Third-party
packages add entries through the kind's entry-point group (in their ``pyproject.toml``)::

    [project.entry-points."vhd.backends"]
    mybackend = "my_package.backend:MyBackend"

A built-in wins over a plugin of the same name. `Registry.names` (sorted, plugins included)
feeds the command line's ``choices=`` and help lists, through `RegistryNames` so that building
the parser imports no registry.

Example:
    >>> from vhd.registry import Registry
    >>> FORMATS: Registry[type[Format]] = Registry("export format", "vhd.export_formats", base=Format)  # doctest: +SKIP
    >>> FORMATS.add("parquet", "vhd.export:ParquetFormat", extra="parquet", needs=["pyarrow"])  # doctest: +SKIP
    >>> FORMATS.load("parquet")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar, cast

from vhd.errors import ConfigError, MissingDependencyError

T = TypeVar("T")


@dataclass(frozen=True)
class Entry:
    """One registered name.

    Attributes:
        name: The name users type (``--format parquet``, ``hf:MODEL``).
        target: ``"module:attr"`` (``attr`` may be dotted) of what the name stands for.
        extra: The vhd extra that installs what it needs (``pip install 'vhd[EXTRA]'``), or None.
        needs: ``(module, pip package)`` for each top-level module it needs.
        summary: One line for help text.
        plugin: Where an entry-point plugin comes from (its distribution, else its module); None
            for a built-in.
    """

    name: str
    target: str
    extra: str | None = None
    needs: tuple[tuple[str, str], ...] = ()
    summary: str = ""
    plugin: str | None = None

    def missing(self) -> list[tuple[str, str]]:
        """The ``(module, pip package)`` needs not installed (``find_spec`` only: nothing is imported)."""
        return [(module, package) for module, package in self.needs if not installed(module)]

    def install_line(self) -> str | None:
        """The pip line that installs what this entry needs, e.g. ``pip install 'vhd[local]'``."""
        return f"pip install 'vhd[{self.extra}]'" if self.extra else None

    def describe(self) -> str:
        """``NAME: summary (pip install ...)`` for help text."""
        text = self.name + (f": {self.summary}" if self.summary else "")
        if self.plugin:
            return f"{text} (from {self.plugin})"
        line = self.install_line()
        return f"{text} ({line})" if line else text


def installed(module: str) -> bool:
    """Whether a top-level module can be imported, without importing it.

    A module in ``sys.modules`` counts as installed unless it is None there (which is what a
    failed import, or a test hiding a library, leaves behind).
    """
    import importlib.util

    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _needs(needs: Iterable[str] | Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    pairs = list(needs.items()) if isinstance(needs, Mapping) else [(m, m) for m in needs]
    for module, _ in pairs:
        if not module or "." in module:
            raise ValueError(f"needs names top-level modules, got {module!r}")
    return tuple(pairs)


class BuiltinEntries(MutableMapping[str, Entry]):
    """A registry's built-in entries by name; assigning a ``"module:attr"`` string registers it bare.

    (Tests swap an entry with ``monkeypatch.setitem(BUILTIN, "name", "tests.module:Class")``.)
    """

    def __init__(self) -> None:
        self._data: dict[str, Entry] = {}

    def __getitem__(self, name: str) -> Entry:
        return self._data[name]

    def __setitem__(self, name: str, value: Entry | str) -> None:
        entry = Entry(name, value) if isinstance(value, str) else value
        self._data[name] = entry if entry.name == name else replace(entry, name=name)

    def __delitem__(self, name: str) -> None:
        del self._data[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"BuiltinEntries({self._data!r})"


class Registry(Generic[T]):
    """Names of one pluggable kind, resolved lazily to classes (or functions).

    It is also the collection of its names: ``"jsonl" in FORMATS``, ``list(FORMATS)``.

    Args:
        kind: What one entry is, for messages (``"backend"``, ``"export format"``).
        group: The entry-point group plugins register in (``"vhd.backends"``).
        base: Entries must be subclasses of this class; None: entries must be callables.
        plural: The plural of ``kind`` in messages (default ``kind + "s"``).
    """

    def __init__(self, kind: str, group: str, *, base: type[Any] | None = None, plural: str | None = None) -> None:
        self.kind = kind
        self.group = group
        self.base = base
        self.plural = plural or f"{kind}s"
        self.builtin = BuiltinEntries()

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.group!r}, names={self.names()!r})"

    def add(
        self,
        name: str,
        target: str,
        *,
        extra: str | None = None,
        needs: Iterable[str] | Mapping[str, str] = (),
        summary: str = "",
    ) -> Entry:
        """Register a built-in entry.

        Args:
            name: Its name.
            target: ``"module:attr"``; the module is imported only by `load`.
            extra: The vhd extra that installs its needs.
            needs: Top-level modules it needs: a list (pip package named like the module) or a
                mapping module -> pip package (``{"yt_dlp": "yt-dlp"}``).
            summary: One line for help text.

        Returns:
            The entry.

        Raises:
            ValueError: ``needs`` without ``extra``, a dotted module, or a target without ``:``.
        """
        pairs = _needs(needs)
        if pairs and not extra:
            raise ValueError(f"{self.kind} {name!r}: an entry with needs must name the extra that installs them")
        if ":" not in target:
            raise ValueError(f"{self.kind} {name!r}: target {target!r} must be 'module:attr'")
        entry = Entry(name, target, extra, pairs, summary)
        self.builtin[name] = entry
        return entry

    def plugins(self) -> dict[str, Entry]:
        """Entries that installed packages declare in this kind's entry-point group (built-ins not applied)."""
        import importlib.metadata

        found: dict[str, Entry] = {}
        for ep in importlib.metadata.entry_points(group=self.group):
            source = getattr(getattr(ep, "dist", None), "name", None) or ep.value.partition(":")[0].strip()
            found.setdefault(ep.name, Entry(ep.name, ep.value, plugin=source))
        return found

    def entries(self) -> dict[str, Entry]:
        """Every entry by name, sorted; a built-in wins over a plugin of the same name."""
        merged = {**self.plugins(), **self.builtin}
        return {name: merged[name] for name in sorted(merged)}

    def names(self) -> list[str]:
        """Every name, sorted (plugins included): what ``choices=`` and help lists show."""
        return list(self.entries())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self.builtin or name in self.plugins())

    def __len__(self) -> int:
        return len(self.names())

    def describe(self) -> list[str]:
        """One ``NAME: summary (pip install ...)`` line per entry, sorted by name."""
        return [entry.describe() for entry in self.entries().values()]

    def entry(self, name: str) -> Entry:
        """The entry registered as ``name``.

        Raises:
            ConfigError: Unknown name (the message lists every valid one).
        """
        found = self.builtin.get(name) or self.plugins().get(name)
        if found is None:
            raise ConfigError(f"unknown {self.kind} {name!r}; valid {self.plural}: {', '.join(self.names()) or 'none'}")
        return found

    def check(self, name: str) -> Entry:
        """Fail now, before any work, when ``name`` is unknown or what it needs is not installed.

        Nothing is imported (``importlib.util.find_spec`` only).

        Raises:
            ConfigError: Unknown name (the message lists every valid one).
            MissingDependencyError: A module it needs is missing (the message gives the pip line).
        """
        entry = self.entry(name)
        missing = entry.missing()
        if missing and entry.extra:
            raise MissingDependencyError(missing[0][1], entry.extra)
        return entry

    def load(self, name: str, *, check_needs: bool = True) -> T:
        """Import and return what ``name`` stands for, checked against the kind's type.

        Args:
            name: The registered name.
            check_needs: Run `check` first, so a missing library fails before the import.
                Kinds whose objects check their libraries themselves when they start (backends,
                detectors, crawl sources) pass False, which keeps building them possible where
                the library is missing (a detector whose predictions are all cached).

        Raises:
            ConfigError: Unknown name, or the target is not a subclass of the kind's base (not
                callable, for a kind of functions).
            MissingDependencyError: A module it needs is missing.
        """
        entry = self.check(name) if check_needs else self.entry(name)
        module_name, _, attr = entry.target.partition(":")
        attr = attr.split("[", 1)[0].strip()  # an entry point's value may end with "[extras]"
        try:
            obj: Any = importlib.import_module(module_name.strip())
        except ModuleNotFoundError as exc:
            top = (exc.name or "").partition(".")[0]
            for module, package in entry.needs:
                if module == top and entry.extra:
                    raise MissingDependencyError(package, entry.extra) from exc
            raise
        try:
            for part in attr.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{self.kind} {name!r} ({entry.target}): {module_name} has no {attr!r}") from None
        if self.base is not None:
            if not (isinstance(obj, type) and issubclass(obj, self.base)):
                raise ConfigError(f"{self.kind} {name!r} ({entry.target}) is not a vhd {self.base.__name__} subclass")
        elif not callable(obj):
            raise ConfigError(f"{self.kind} {name!r} ({entry.target}) is not callable")
        return cast(T, obj)


class RegistryNames(Collection[str]):
    """A registry's names, looked up when first used: lazy ``choices=`` and help lists for argparse.

    argparse iterates ``choices`` as soon as an argument is added, so the command line assigns
    this to the action's ``choices`` after ``add_argument`` (or to an attribute its help names as
    ``%(attr)s``): building the parser then imports no registry, and ``vhd --help`` stays fast.

    Args:
        load: Returns the registry (imports its module); called once, on first use.
        default: A name to mark ``(default)`` in `str`.
        describe: `str` gives each entry's `Entry.describe` line instead of its name.
    """

    def __init__(
        self, load: Callable[[], Registry[Any]], *, default: str | None = None, describe: bool = False
    ) -> None:
        self._load = load
        self._registry: Registry[Any] | None = None
        self.default = default
        self.describe = describe

    @property
    def registry(self) -> Registry[Any]:
        """The registry (loaded on first use)."""
        if self._registry is None:
            self._registry = self._load()
        return self._registry

    def __iter__(self) -> Iterator[str]:
        return iter(self.registry.names())

    def __contains__(self, name: object) -> bool:
        return name in self.registry

    def __len__(self) -> int:
        return len(self.registry)

    def __str__(self) -> str:
        """``a, b (default) or c`` (or the entries' descriptions, separated by ``;``)."""
        if self.describe:
            return "; ".join(self.registry.describe())
        names = [f"{n} (default)" if n == self.default else n for n in self.registry.names()]
        return " or ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)

    def __repr__(self) -> str:
        return f"RegistryNames({self.registry.group!r})"
