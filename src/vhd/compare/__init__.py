"""What the debate buys: `vhd compare` (and its ``--injection`` and ``--cascade`` rows), `vhd review-queue`.

`compare` (`vhd.compare.runner`) sets single calls, self-consistency and debates of several round
counts side by side on a labelled set, with cost and agreement (`vhd.compare.single`,
`vhd.compare.result`, `vhd.compare.report`); `vhd.compare.cascade` and `vhd.compare.cascade_run`
replay a detector cascade on the debate's verdicts and choose its thresholds; `injection`
(`vhd.compare.injection`) measures how often text drawn into an image steers the verdict;
`build_queue` (`vhd.compare.review_queue`) ranks the samples where the judge, other configurations
and detectors disagree, for a person to look at first. The review queue lives here because it is
a comparison (of the judge against everything else in the store and a bench report).

Example:
    >>> from vhd.compare import compare
    >>> result = compare("validation", store="run.db", out="compare/")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.compare.cascade import pick_thresholds
    from vhd.compare.injection import InjectionResult, injection
    from vhd.compare.result import CompareResult, ConfigResult
    from vhd.compare.review_queue import ReviewQueue, build_queue
    from vhd.compare.runner import compare

_LAZY = {
    "compare": "vhd.compare.runner",
    "CompareResult": "vhd.compare.result",
    "ConfigResult": "vhd.compare.result",
    "injection": "vhd.compare.injection",
    "InjectionResult": "vhd.compare.injection",
    "build_queue": "vhd.compare.review_queue",
    "ReviewQueue": "vhd.compare.review_queue",
    "pick_thresholds": "vhd.compare.cascade",
}

__all__ = [
    "CompareResult",
    "ConfigResult",
    "InjectionResult",
    "ReviewQueue",
    "build_queue",
    "compare",
    "injection",
    "pick_thresholds",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
