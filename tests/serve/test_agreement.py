"""Fleiss' kappa for harmful / not-harmful reviews."""

from __future__ import annotations

import pytest

from vhd.serve.agreement import fleiss_kappa


def test_hand_computed_kappa() -> None:
    # three samples, two reviewers each: agree yes, agree no, split -> P = 2/3, chance 1/2, kappa 1/3
    report = fleiss_kappa({(2, 2): 1, (0, 2): 1, (1, 2): 1})
    assert report.samples == 3 and report.reviews == 6 and report.unanimous == 2
    assert report.observed == pytest.approx(2 / 3)
    assert report.kappa == pytest.approx(1 / 3)


def test_matches_the_textbook_formula_with_three_reviewers() -> None:
    counts = {(3, 3): 4, (0, 3): 3, (2, 3): 2, (1, 3): 1}
    rows = [(y, 3 - y) for (y, _), c in counts.items() for _ in range(c)]
    n, N = 3, len(rows)
    p_bar = sum((y * (y - 1) + m * (m - 1)) / (n * (n - 1)) for y, m in rows) / N
    p_yes = sum(y for y, _ in rows) / (n * N)
    p_e = p_yes**2 + (1 - p_yes) ** 2
    assert fleiss_kappa(counts).kappa == pytest.approx((p_bar - p_e) / (1 - p_e))


def test_undefined_cases() -> None:
    assert fleiss_kappa({}).kappa is None
    assert fleiss_kappa({(1, 1): 5}).samples == 0  # single reviews do not count
    assert fleiss_kappa({(2, 2): 3}).kappa is None  # everyone always said harmful: chance agreement is 1
