"""`vhd compare`'s intervals: the bootstrap's unit is the sample, a sample's repeats resampled together."""

from __future__ import annotations

import pytest

from vhd.compare.result import ConfigResult
from vhd.compare.runner import score_config
from vhd.compare.single import SampleOutcome

TRUTH = [True, True, True, True, False, False, False, False, True, False, True, False]
ANSWERS: list[bool | None] = [True, True, False, None, False, True, False, False, True, False, False, None]


def _config(runs: list[list[bool | None]]) -> ConfigResult:
    return ConfigResult("c", "single", {}, [[SampleOutcome(a, None, 10, 2, 1) for a in run] for run in runs])


def test_identical_repeats_give_the_interval_of_one_run() -> None:
    one = score_config(_config([ANSWERS]), TRUTH, resamples=300)
    three = score_config(_config([ANSWERS, ANSWERS, ANSWERS]), TRUTH, resamples=300)
    for key in ("accuracy", "f1", "kappa", "tpr", "tnr", "coverage"):
        assert three.metrics[key] == one.metrics[key], key  # value, low, high and n (samples) alike
    assert three.metrics["accuracy"].n == len(TRUTH)
    assert (one.answered, one.asked, three.answered, three.asked) == (10, 12, 30, 36)
    assert three.unparsed == 6  # every repeat's unreadable answers


def test_every_repeat_counts() -> None:
    flipped = [None if a is None else not a for a in ANSWERS]
    both = score_config(_config([ANSWERS, flipped]), TRUTH, resamples=200)
    first = score_config(_config([ANSWERS]), TRUTH, resamples=0).metrics["accuracy"].value
    second = score_config(_config([flipped]), TRUTH, resamples=0).metrics["accuracy"].value
    assert first is not None and second is not None
    accuracy = both.metrics["accuracy"]
    assert accuracy.value == pytest.approx((first + second) / 2)  # pooled, not the first repeat alone
    assert accuracy.n == len(TRUTH)
    assert both.accuracy_runs == pytest.approx([first, second])
    assert accuracy.low is not None and accuracy.high is not None
    assert accuracy.low <= accuracy.value <= accuracy.high
