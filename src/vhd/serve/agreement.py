"""Agreement between reviewers when several review each sample (``--reviews-per-sample K``).

Fleiss' kappa for two categories (harmful / not harmful), in the form that allows samples to have
different numbers of reviews: each sample's agreement ``P_i = (y(y-1) + n'(n'-1)) / (n(n-1))``
(``y`` harmful votes, ``n'`` not harmful, ``n`` reviews), their mean against the agreement
expected by chance from the pooled shares. It reads `vhd.store.Store.agreement_counts`, a handful
of numbers whatever the store's size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class AgreementReport:
    """Reviewer agreement over the samples with two reviews or more.

    Attributes:
        samples: Samples counted.
        reviews: Reviews counted.
        unanimous: Samples whose reviewers all agree.
        observed: Mean pairwise agreement (0-1); None without samples.
        kappa: Fleiss' kappa; None when undefined (no samples, or every review the same answer).
    """

    samples: int
    reviews: int
    unanimous: int
    observed: float | None
    kappa: float | None


def fleiss_kappa(counts: Mapping[tuple[int, int], int]) -> AgreementReport:
    """Fleiss' kappa from ``{(harmful votes, reviews): samples}``; samples with fewer than 2 reviews are ignored."""
    samples = reviews = yes_total = unanimous = 0
    agreement = 0.0
    for (yes, n), count in counts.items():
        if n < 2 or count <= 0:
            continue
        no = n - yes
        samples += count
        reviews += n * count
        yes_total += yes * count
        unanimous += count if yes in (0, n) else 0
        agreement += count * (yes * (yes - 1) + no * (no - 1)) / (n * (n - 1))
    if not samples:
        return AgreementReport(0, 0, 0, None, None)
    observed = agreement / samples
    p = yes_total / reviews
    expected = p * p + (1 - p) * (1 - p)
    kappa = None if expected >= 1 else (observed - expected) / (1 - expected)
    return AgreementReport(samples, reviews, unanimous, observed, kappa)
