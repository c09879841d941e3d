"""Find loops over user-supplied items that do not run each item inside `vhd.boundary`.

Every loop over user-supplied items (files, folder entries, manifest and label rows, URLs, tasks)
must run each item in ``item_boundary`` or ``guarded`` so that one item's unexpected error becomes
that item's outcome (ARCHITECTURE.md, rule 6). This reads the source (no import) and lists each
loop that does not. Run ``python tools/item_loops.py``; ``tests/test_house.py`` asserts none.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "vhd"


ITEM_SOURCES = frozenset(
    {
        "iter_discover",  # files and folder entries, manifests' rows
        "discover",
        "read_manifest",  # manifest rows
        "read_labels",  # label rows
        "read_url_list",  # URLs
        "read_tasks",  # Label Studio tasks
        "checked_jobs",  # dedup's files, as jobs
        "_csv_entries",  # label rows (inside the label reader)
        "_json_entries",
        "load_bench_set",  # bench rows
    }
)
"""Functions whose results are user-supplied items. A generator that loops over one and yields is
an item source too (found by `unguarded_item_loops`, to a fixed point, within its module)."""

BOUNDARY_CALLS = frozenset({"item_boundary", "guarded"})
"""Calls that put an item inside `vhd.boundary`."""

MAP_CALLS = frozenset({"thread_map", "imap", "map_unordered"})
"""Calls that run a function over items: ``MAP(fn, items, ...)``."""


def _called_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
    return None


def _calls(node: ast.AST) -> set[str]:
    return {name for sub in ast.walk(node) if (name := _called_name(sub)) is not None}


def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _enclosing(tree: ast.AST) -> dict[ast.AST, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Each loop's innermost enclosing function."""
    out: dict[ast.AST, ast.FunctionDef | ast.AsyncFunctionDef] = {}

    def visit(node: ast.AST, fn: ast.FunctionDef | ast.AsyncFunctionDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else fn
            if isinstance(child, ast.For | ast.AsyncFor) and fn is not None:
                out[child] = fn
            visit(child, inner)

    visit(tree, None)
    return out


def _bound_from(fn: ast.AST, sources: set[str]) -> set[str]:
    """Names a function assigns (``x = source(...)``) from an item source."""
    names = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign | ast.withitem):
            value = node.value if isinstance(node, ast.Assign) else node.context_expr
            targets = node.targets if isinstance(node, ast.Assign) else [node.optional_vars]
            if _calls(value) & sources:
                names |= {n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


BOOKKEEPING = frozenset({"append", "extend", "add", "isinstance", "len"})
"""Calls that only collect items: a loop making no other call needs no boundary."""


def _iterated_names(node: ast.expr) -> set[str]:
    """Names iterated as such: ``x``, ``enumerate(x)``, ``zip(x, ...)`` (an attribute ``x.a`` is not ``x``)."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Call) and _called_name(node) in ("enumerate", "zip", "sorted", "list", "reversed", "chain"):
        return {name for arg in node.args for name in _iterated_names(arg)}
    return set()


def _guards(node: ast.AST, functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]) -> bool:
    """Whether code calls the boundary, itself or through a function of its module (one level)."""
    calls = _calls(node)
    if calls & BOUNDARY_CALLS:
        return True
    return any(name in functions and _calls(functions[name]) & BOUNDARY_CALLS for name in calls)


def _mapped_guarded(
    node: ast.AST, sources: set[str], functions: dict[str, Any], names: frozenset[str] = frozenset()
) -> bool | None:
    """For ``MAP(fn, items)`` over a source: whether ``fn`` is guarded; None when no such call."""
    found = None
    for sub in ast.walk(node):
        if _called_name(sub) in MAP_CALLS and isinstance(sub, ast.Call):
            args = sub.args
            fn_arg, items = (args[1], args[2:]) if _called_name(sub) == "map_unordered" else (args[0], args[1:])
            if not any(_calls(a) & sources or _iterated_names(a) & names for a in items):
                continue
            name = fn_arg.id if isinstance(fn_arg, ast.Name) else getattr(fn_arg, "attr", None)
            ok = name in BOUNDARY_CALLS or (name in functions and _guards(functions[name], functions))
            found = bool(ok) if found is None else found and bool(ok)
    return found


def unguarded_item_loops(root: Path = ROOT) -> list[str]:
    """Loops over user-supplied items whose body does not run the item inside `vhd.boundary`.

    A loop counts when it iterates over a call to an item source (`ITEM_SOURCES`, or a generator
    of the same module that wraps one), or a name assigned from one. It passes when its body calls
    ``item_boundary`` or ``guarded`` (or a function of its module that does), when it only passes
    items on (its body yields: the consumer is checked), or when it iterates ``MAP(fn, items)``
    (`MAP_CALLS`) with ``fn`` guarded. ``MAP(fn, items)`` calls over a source are checked the same
    way wherever they stand.

    Returns:
        ``module:line`` of each loop or map call that fails.
    """
    bad: list[str] = []
    for path in sorted((root / "src" / PACKAGE).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = _functions(tree)
        enclosing = _enclosing(tree)
        sources = set(ITEM_SOURCES)
        while True:  # generators that wrap a source are sources
            grown = {
                fn.name
                for loop, fn in enclosing.items()
                if _calls(loop.iter) & sources and any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(loop))
            } | {
                fn.name
                for fn in functions.values()
                if any(isinstance(n, ast.YieldFrom) and _calls(n) & sources for n in ast.walk(fn))
            }
            if grown <= sources:
                break
            sources |= grown
        rel = path.relative_to(root / "src").as_posix()
        for loop, fn in enclosing.items():
            names = _bound_from(fn, sources)
            if not (_calls(loop.iter) & sources or _iterated_names(loop.iter) & names):
                continue
            if not _calls(ast.Module(body=loop.body, type_ignores=[])) - BOOKKEEPING:
                continue  # only collects the items: nothing there can fail on one
            if any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(loop)):
                continue  # passes items on
            mapped = _mapped_guarded(loop.iter, sources, functions, frozenset(names))
            if mapped or (mapped is None and _guards(ast.Module(body=loop.body, type_ignores=[]), functions)):
                continue
            bad.append(f"{rel}:{loop.lineno}")
        for fn in functions.values():
            names = frozenset(_bound_from(fn, sources))
            for node in ast.walk(fn):
                mapped = isinstance(node, ast.Call) and _called_name(node) in MAP_CALLS
                if mapped and _mapped_guarded(node, sources, functions, names) is False:
                    bad.append(f"{rel}:{node.lineno}")
    return sorted(set(bad))


def main() -> int:
    """Print each unguarded loop; exit 1 when there is one."""
    bad = unguarded_item_loops()
    for where in bad:
        print(f"{where}: a loop over user items outside vhd.boundary (item_boundary / guarded)")
    print(f"{len(bad)} unguarded loop(s) over user items")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
