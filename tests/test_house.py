"""The house's figures (tools/house.py): no import circles, no upward imports, at most 11 floors."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def house() -> ModuleType:
    spec = importlib.util.spec_from_file_location("house", ROOT / "tools" / "house.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["house"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def figures(house: ModuleType) -> dict[str, object]:
    return house.report(ROOT)  # type: ignore[no-any-return]


def test_no_import_circles_between_files(figures: dict[str, object]) -> None:
    assert figures["circles"] == []


def test_rooms_form_no_cycle_and_nothing_imports_upwards(figures: dict[str, object]) -> None:
    assert figures["room_cycles"] == []
    assert figures["upward_imports"] == []


def test_at_most_eleven_floors(figures: dict[str, object]) -> None:
    assert 0 < figures["floors"] <= 11, figures["longest_chain"]  # type: ignore[operator]


def test_long_modules_are_on_the_commented_allow_list(figures: dict[str, object]) -> None:
    assert [m for m in figures["long_modules"] if not m[2]] == []  # type: ignore[attr-defined]


def test_the_allow_list_names_only_modules_that_are_long(house: ModuleType, figures: dict[str, object]) -> None:
    long = {name for name, _, _ in figures["long_modules"]}  # type: ignore[attr-defined]
    stale = set(house.allowed_long_modules(ROOT)) - long
    assert stale == set(), "drop these from [tool.vhd.house.long-modules]: they are gone or short now"


def test_every_room_has_a_floor_in_the_layers_contract(house: ModuleType) -> None:
    layered = {room for layer in house.declared_layers(ROOT) for room in layer}
    rooms = {room for room in house.measure(ROOT).rooms.values() if room.startswith("vhd.")}
    assert rooms <= layered, sorted(rooms - layered)


def test_the_measure_sees_circles_of_every_kind(house: ModuleType, tmp_path: Path) -> None:
    """A circle through a TYPE_CHECKING import and one through a function-level import both count."""
    pkg = tmp_path / "src" / "vhd"
    (pkg / "room").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "room" / "__init__.py").write_text("")
    type_checking = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from vhd.room.b import B\n"
    (pkg / "room" / "a.py").write_text(type_checking)
    (pkg / "room" / "b.py").write_text("def f():\n    from vhd.room import a\n")
    (pkg / "low.py").write_text("from . import high\n")
    (pkg / "high.py").write_text("import vhd.low\n")
    figures = house.report(tmp_path)
    assert ["vhd.room.a", "vhd.room.b"] in figures["circles"]
    assert ["vhd.high", "vhd.low"] in figures["circles"]
    assert figures["room_cycles"] == [["vhd.high", "vhd.low"]]


def test_no_private_names_cross_modules(figures: dict[str, object]) -> None:
    assert figures["private_imports"] == []


@pytest.fixture(scope="module")
def item_loops() -> ModuleType:
    spec = importlib.util.spec_from_file_location("item_loops", ROOT / "tools" / "item_loops.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_loop_over_user_items_runs_them_in_the_item_boundary(item_loops: ModuleType) -> None:
    assert item_loops.unguarded_item_loops(ROOT) == []


def test_the_item_boundary_check_finds_unguarded_loops(item_loops: ModuleType, tmp_path: Path) -> None:
    """Direct loops, loops over a wrapping generator or a name, and mapped functions are all checked."""
    pkg = tmp_path / "src" / "vhd"
    pkg.mkdir(parents=True)
    (pkg / "bad.py").write_text(
        "def walk(x):\n"
        "    for f in iter_discover(x):\n"
        "        yield f\n"
        "def direct(x):\n"
        "    for f in iter_discover(x):\n"  # line 5
        "        load(f)\n"
        "def wrapped(x):\n"
        "    for f in walk(x):\n"  # line 8: a generator over a source is a source
        "        load(f)\n"
        "def named(p):\n"
        "    rows = read_labels(p)\n"
        "    for i, r in enumerate(rows):\n"  # line 12
        "        load(r)\n"
        "def mapped(x):\n"
        "    return list(thread_map(load, walk(x), 2))\n"  # line 15
    )
    (pkg / "good.py").write_text(
        "def one(f):\n"
        "    with item_boundary(f) as b:\n"
        "        load(f)\n"
        "def direct(x):\n"
        "    for f in iter_discover(x):\n"
        "        one(f)\n"
        "def inline(x):\n"
        "    for f in iter_discover(x):\n"
        "        r = guarded(load, f)\n"
        "def collect(x):\n"
        "    out = []\n"
        "    for f in iter_discover(x):\n"
        "        out.append(f)\n"
        "def mapped(x):\n"
        "    for r in thread_map(one, iter_discover(x), 2):\n"
        "        print(r)\n"
    )
    assert item_loops.unguarded_item_loops(tmp_path) == [
        "vhd/bad.py:12",
        "vhd/bad.py:15",
        "vhd/bad.py:5",
        "vhd/bad.py:8",
    ]
