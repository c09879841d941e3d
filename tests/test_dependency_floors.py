"""The declared lower bounds of pyproject.toml are real.

`constraints/minimum.txt` pins each direct dependency at its declared minimum; README's
Development section runs the tests in such an environment. Here: that file keeps up with
pyproject.toml, and no numpy API newer than the floor (``numpy>=1.24``) slips in.

`tests/data/numpy_1_24_names.txt` lists the public names of numpy 1.24 (``numpy.X``,
``numpy.random.X``, ``numpy.linalg.X``). Regenerate it in an environment with that numpy::

    python -m tests.test_dependency_floors > tests/data/numpy_1_24_names.txt

The scan below reads every ``np.X`` / ``numpy.X`` in the source; the shim test runs the code
that used numpy 2 only names with those names removed, as numpy 1.x has them.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import numpy
import pytest

ROOT = Path(__file__).resolve().parents[1]
NAMES = ROOT / "tests" / "data" / "numpy_1_24_names.txt"
NUMPY_2_ONLY = ("trapezoid", "bitwise_count", "concat", "unstack", "cumulative_sum", "isdtype", "vecdot", "astype")


MINIMUM = ROOT / "constraints" / "minimum.txt"
CHECKED_EXTRAS = ("bench", "plot", "parquet")
"""Extras whose floors the minimum environment pins too (beside the core dependencies)."""


def _floors(reqs: list[str]) -> dict[str, str]:
    out = {}
    for r in reqs:
        m = re.match(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?>=([\d.]+)", r.replace(" ", ""))
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def _version(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def declared_floors() -> set[str]:
    """Every ``numpy>=X`` lower bound in pyproject.toml (core dependencies and extras)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"]) + [r for v in project["optional-dependencies"].values() for r in v]
    return {m.group(1) for r in reqs if (m := re.match(r"numpy>=([\d.]+)", r.replace(" ", "")))}


def test_minimum_environment_pins_every_declared_floor() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _floors(list(project["dependencies"]))
    for extra in CHECKED_EXTRAS:
        wanted |= _floors(list(project["optional-dependencies"][extra]))
    pinned = {}
    for line in MINIMUM.read_text().splitlines():
        name, eq, version = line.split("#", 1)[0].strip().partition("==")
        if eq:
            pinned[name.lower()] = version
    assert set(wanted) <= set(pinned), f"pin these in {MINIMUM.name}: {sorted(set(wanted) - set(pinned))}"
    for name, floor in wanted.items():
        assert _version(pinned[name]) == _version(floor), f"{name}: declared >={floor}, pinned {pinned[name]}"


def numpy_uses() -> dict[str, list[str]]:
    """``attribute path -> [file:line]`` for every ``np.X`` / ``numpy.X`` (and ``np.random.X``) in src/."""
    uses: dict[str, list[str]] = {}
    for path in sorted((ROOT / "src").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
                continue
            if node.value.id not in ("np", "numpy"):
                continue
            name = node.attr
            parent = next((p for p in ast.walk(tree) if isinstance(p, ast.Attribute) and p.value is node), None)
            if name in ("random", "linalg") and parent is not None:
                name = f"{name}.{parent.attr}"
            uses.setdefault(name, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return uses


def test_declared_numpy_floor_is_the_one_checked() -> None:
    assert declared_floors() == {"1.24"}, "update tests/data/numpy_1_24_names.txt with the new floor"
    assert "numpy 1.24" in NAMES.read_text().splitlines()[0]


def test_no_numpy_api_newer_than_the_declared_floor() -> None:
    known = {ln.strip() for ln in NAMES.read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    uses = numpy_uses()
    assert "asarray" in uses  # the scan sees the code
    newer = {name: where for name, where in uses.items() if name not in known}
    assert not newer, f"numpy API missing from numpy 1.24 (the declared floor): {newer}"


def test_metrics_and_blocklist_work_without_numpy_2_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in NUMPY_2_ONLY:
        monkeypatch.delattr(numpy, name, raising=False)
    from vhd.bench.metrics import BinaryMetrics, roc_auc
    from vhd.collect.blocklist import BlockList

    assert roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75)
    res = BinaryMetrics(resamples=20).update([0, 1, 1, 0], [0, 1, 0, 1], [0.2, 0.9, 0.4, 0.6]).compute()
    assert res.values["roc_auc"].value == pytest.approx(0.75)
    listed = "ab" * 32
    blocks = BlockList.parse(f"pdq:{listed}\n")
    near = "ab" * 31 + "aa"  # one hex digit off: b -> a is one bit
    hit = blocks.match_pdq(near)
    assert hit is not None and hit.distance == 1
    assert blocks.match_pdq("54" * 32) is None  # every bit flipped
    from vhd.curate.hashindex import pairs_within, popcount64

    codes = numpy.array([0b1011, 0, 2**64 - 1, 0b1010], dtype=numpy.uint64)
    assert popcount64(codes).tolist() == [3, 0, 64, 2]
    found = {tuple(sorted(p)) for i, j in pairs_within(codes, 1) for p in zip(i.tolist(), j.tolist(), strict=True)}
    assert found == {(0, 3)}


if __name__ == "__main__":  # the names file, from the numpy installed
    import numpy.linalg
    import numpy.random

    names = {n for n in dir(numpy) if not n.startswith("__")}
    for sub in ("random", "linalg"):
        names |= {f"{sub}.{n}" for n in dir(getattr(numpy, sub)) if not n.startswith("_")}
    print(f"# Public names of numpy {numpy.__version__} (numpy.X, numpy.random.X, numpy.linalg.X).")
    print("# Regenerate: python -m tests.test_dependency_floors > tests/data/numpy_1_24_names.txt (with numpy 1.24).")
    print("\n".join(sorted(names)))


def test_local_transformers_floor_is_the_first_pillow_only_idefics3_release() -> None:
    """5.17 cannot build SmolVLM's processor without torchvision, 5.18 can (tools/transformers_floor.py)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for reqs in (extras["local"], extras["tune"], extras["test"]):
        assert _floors(reqs)["transformers"] == "5.18"
    import transformers

    assert _version(transformers.__version__.split(".dev")[0]) >= (5, 18, 0)
    assert hasattr(transformers.models.idefics3, "Idefics3ImageProcessorPil")
