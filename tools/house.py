"""Measure the house: rooms, floors, import circles, upward imports and long modules.

A *room* is each module or folder directly under ``src/vhd/`` (a folder is one room), plus
``src/vhd/__main__.py`` and each top-level folder of the repository other than ``tests/``.
*Floors* is the longest chain of imports between rooms, counting both ends. *Circles* are import
cycles between files (inside one room too), counting every import statement wherever it
stands: at module level, inside functions, and under ``if TYPE_CHECKING:``. *Private imports* are
``_names`` taken from another module. *Upward imports*
are imports from a room to a room above it in the layers contract of ``pyproject.toml``
(``[tool.importlinter]``).

Run ``python tools/house.py`` for the report; ``tests/test_house.py`` asserts the targets.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "vhd"
LONG_MODULE = 450
EXTRA_ROOMS_SKIP = {"tests", "src", ".git", ".venv", ".ci", "constraints", "build", "dist"}


@dataclass
class House:
    """What the measurement found."""

    modules: dict[str, Path] = field(default_factory=dict)
    edges: dict[str, set[str]] = field(default_factory=dict)
    rooms: dict[str, str] = field(default_factory=dict)  # module -> room

    def room_edges(self) -> dict[str, set[str]]:
        """Room-level import graph (no self edges)."""
        out: dict[str, set[str]] = {room: set() for room in self.rooms.values()}
        for src, dsts in self.edges.items():
            for dst in dsts:
                a, b = self.rooms[src], self.rooms[dst]
                if a != b:
                    out[a].add(b)
        return out


def _module_name(path: Path, base: Path, prefix: str) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([prefix, *parts]) if prefix else ".".join(parts)


def _discover(root: Path) -> tuple[dict[str, Path], dict[str, str]]:
    modules: dict[str, Path] = {}
    rooms: dict[str, str] = {}
    pkg = root / "src" / PACKAGE
    for path in sorted(pkg.rglob("*.py")):
        name = _module_name(path, pkg, PACKAGE)
        modules[name] = path
        rel = path.relative_to(pkg).parts
        rooms[name] = PACKAGE if len(rel) == 1 and rel[0] == "__init__.py" else f"{PACKAGE}.{Path(rel[0]).stem}"
    for top in sorted(root.iterdir()):
        if not top.is_dir() or top.name.startswith(".") or top.name in EXTRA_ROOMS_SKIP:
            continue
        for path in sorted(top.rglob("*.py")):
            name = f"{top.name}/" + path.relative_to(top).as_posix()
            modules[name] = path
            rooms[name] = top.name
    return modules, rooms


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                # `from vhd.a import b` names the module vhd.a.b when it exists, else a name in vhd.a
                # (`_resolve` walks up to the nearest module), as import-linter's grimp reads it.
                yield f"{target}.{alias.name}"


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def measure(root: Path = ROOT) -> House:
    """Parse every module and build the file and room import graphs."""
    modules, rooms = _discover(root)
    house = House(modules=modules, rooms=rooms)
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets: set[str] = set()
        for imported in _imported_names(tree, name, path.name == "__init__.py"):
            if not (imported == PACKAGE or imported.startswith(PACKAGE + ".")):
                continue
            # `from vhd.a import b` names a submodule when vhd/a/b.py exists, else a name in vhd.a.
            resolved = _resolve(imported, modules)
            if resolved is not None and resolved != name:
                targets.add(resolved)
        house.edges[name] = targets
    return house


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    item = stack.pop()
                    on_stack.discard(item)
                    component.append(item)
                    if item == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest path in an acyclic graph (nodes in order); [] when the graph has a cycle."""
    if cycles(graph):
        return []
    memo: dict[str, list[str]] = {}

    def best(node: str) -> list[str]:
        if node not in memo:
            tails = [best(child) for child in sorted(graph.get(node, ()))]
            memo[node] = [node, *max(tails, key=len, default=[])]
        return memo[node]

    return max((best(node) for node in sorted(graph)), key=len, default=[])


def declared_layers(root: Path = ROOT) -> list[list[str]]:
    """Layers of the first layers contract in pyproject.toml, top first; each layer a list of rooms."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config.get("tool", {}).get("importlinter", {}).get("contracts", [])
    for contract in contracts:
        if contract.get("type") == "layers":
            layers = []
            for layer in contract["layers"]:
                names = [part.strip().strip("()") for part in layer.replace("|", ":").split(":")]
                layers.append([f"{PACKAGE}.{n}" if n != PACKAGE else n for n in names if n])
            return layers
    return []


def upward_imports(house: House, layers: list[list[str]]) -> list[tuple[str, str]]:
    """(importer, imported) file pairs where a lower layer imports a higher one."""
    level: dict[str, int] = {}
    for depth, layer in enumerate(layers):
        for room in layer:
            level[room] = depth
    bad = []
    for src, dsts in sorted(house.edges.items()):
        for dst in sorted(dsts):
            a, b = house.rooms[src], house.rooms[dst]
            if a in level and b in level and level[a] > level[b]:
                bad.append((src, dst))
    return bad


def private_imports(root: Path = ROOT) -> list[tuple[str, str]]:
    """(importer, ``module._name``) for private names taken from another vhd module."""
    modules, _ = _discover(root)
    found = []
    for name, path in sorted(modules.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE + "."):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append((name, f"{node.module}.{alias.name}"))
    return found


def allowed_long_modules(root: Path = ROOT) -> dict[str, str]:
    """The modules allowed past `LONG_MODULE` lines, with why: ``[tool.vhd.house.long-modules]`` in pyproject.toml."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    table: dict[str, str] = config.get("tool", {}).get("vhd", {}).get("house", {}).get("long-modules", {})
    return table


def long_modules(house: House, limit: int = LONG_MODULE, root: Path = ROOT) -> list[tuple[str, int, bool]]:
    """Modules over ``limit`` lines: (module, lines, on the allow-list of `allowed_long_modules`)."""
    allowed = allowed_long_modules(root)
    out = []
    for name, path in sorted(house.modules.items()):
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > limit:
            out.append((name, lines, name in allowed))
    return out


def report(root: Path = ROOT) -> dict[str, object]:
    """Every figure in one JSON-friendly mapping."""
    house = measure(root)
    rooms = house.room_edges()
    chain = longest_chain(rooms)
    layers = declared_layers(root)
    return {
        "rooms": len(rooms),
        "modules": len(house.modules),
        "floors": len(chain),
        "longest_chain": chain,
        "room_cycles": cycles(rooms),
        "circles": cycles(house.edges),
        "upward_imports": upward_imports(house, layers),
        "private_imports": private_imports(root),
        "long_modules": long_modules(house),
    }


def main(argv: list[str] | None = None) -> int:
    """Print the report; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    figures = report()
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"rooms {figures['rooms']}, modules {figures['modules']}, floors {figures['floors']}")
        print("longest chain: " + " -> ".join(figures["longest_chain"]))  # type: ignore[arg-type]
        for key in ("room_cycles", "circles", "upward_imports", "private_imports", "long_modules"):
            items = figures[key]
            print(f"{key}: {len(items)}")  # type: ignore[arg-type]
            for item in items:  # type: ignore[attr-defined]
                print("   ", item)
    missed = figures["circles"] or figures["upward_imports"] or figures["room_cycles"]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
