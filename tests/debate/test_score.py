import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vhd.debate.score import yes_probability


def test_sums_variants_of_yes_and_no() -> None:
    lp = {
        "Yes": math.log(0.5),
        " yes": math.log(0.1),
        "**Yes": math.log(0.1),
        "No": math.log(0.2),
        "▁no": math.log(0.1),
    }
    assert yes_probability(lp) == pytest.approx(0.7 / 1.0)


def test_none_without_yes_or_no() -> None:
    assert yes_probability(None) is None
    assert yes_probability({}) is None
    assert yes_probability({"The": -0.1, "Maybe": -2.0}) is None


def test_ignores_non_finite() -> None:
    assert yes_probability({"Yes": float("-inf"), "No": -0.1}) == 0.0


@given(st.floats(-30, 0), st.floats(-30, 0))
def test_property_matches_softmax_of_two(y: float, n: float) -> None:
    p = yes_probability({"Yes": y, "No": n, "Other": -0.01})
    assert p is not None
    assert p == pytest.approx(1 / (1 + math.exp(n - y)), rel=1e-9, abs=1e-12)
    assert 0.0 <= p <= 1.0
