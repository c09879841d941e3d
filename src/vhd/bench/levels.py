"""The severity levels of a labelled set, checked against a scale: `apply_scale`.

Labels may give each harmful row a ``severity`` level (`vhd.labels.files`). Before a benchmark
compares them with a detector's levels, each is read on the policy's scale (``--severity-scale``,
``--policy``, or one inferred from the levels, `vhd.bench.metrics.infer_scale`).
"""

from __future__ import annotations

from vhd.bench.data import BenchSet, Problem
from vhd.bench.metrics.severity import SeverityScale, infer_scale


def apply_scale(bench: BenchSet, scale: SeverityScale | None) -> SeverityScale | None:
    """Check the items' severity levels against a scale (inferred from them when None); the scale used.

    Each level is rewritten as the scale's name (``HIGH`` or ``3`` -> ``high``). A level the
    scale lacks is dropped from its item and reported in `BenchSet.problems` (the row kept).

    Args:
        bench: The labelled set (changed in place).
        scale: The policy's severity scale (``--severity-scale``), or None to infer it from the
            levels the labels use (`vhd.bench.metrics.infer_scale`).

    Returns:
        The scale (its level names are also set as ``bench.severity``); None when neither a
        scale is given nor any label carries a level.

    Raises:
        ConfigError: No scale given and the labels' levels have no order vhd can tell.
    """
    given = [i.severity for i in bench.items if i.severity is not None]
    if scale is None:
        scale = infer_scale(given)
    if scale is None:
        return None
    for item in bench.items:
        if item.severity is None:
            continue
        name = scale.find(item.severity)
        if name is None:
            levels = ", ".join(scale.levels)
            bench.problems.append(
                Problem(item.line, f"severity {item.severity!r} is not on the scale ({levels}): dropped", used=True)
            )
        item.severity = name
    bench.problems.sort(key=lambda p: p.line)
    bench.severity = scale.levels
    return scale
