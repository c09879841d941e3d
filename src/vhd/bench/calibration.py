"""Calibration of detector scores: ECE, reliability bins, and fitted temperature or Platt scaling.

`fit_calibration` fits, on a labelled split, a map from a detector's score p to a calibrated
one — temperature scaling ``sigmoid(logit(p) / T)`` or Platt scaling ``sigmoid(a * logit(p) + b)``,
both by Newton's method on the log loss — and the decision threshold on the calibrated score
that maximises balanced accuracy. Methods are fitting functions registered by name in
`CALIBRATION_METHODS` (third-party packages add more through the ``vhd.calibration_methods``
entry-point group). `save_calibrations` writes them as JSON; `apply_calibration` re-decides
predictions with a saved one.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError
from vhd.registry import Registry

BINS = 10
"""Equal-width confidence bins for ECE and reliability diagrams."""

Fitter = Callable[[list[float], list[int]], tuple[float, float]]
"""A calibration method: ``(logits of the scores, 0/1 labels) -> (a, b)`` of ``sigmoid(a * logit + b)``."""

CALIBRATION_METHODS: Registry[Fitter] = Registry("calibration method", "vhd.calibration_methods")
"""Every calibration method: built-ins below, plugins from the ``vhd.calibration_methods`` entry-point group."""

CALIBRATION_METHODS.add("temperature", "vhd.bench.calibration:fit_temperature", summary="sigmoid(logit(p) / T)")
CALIBRATION_METHODS.add("platt", "vhd.bench.calibration:fit_platt", summary="sigmoid(a * logit(p) + b)")

METHODS = CALIBRATION_METHODS
"""Calibration methods (the registry is also the collection of their names)."""

_EPS = 1e-6


@dataclass(frozen=True)
class Reliability:
    """Reliability-diagram data and expected calibration error.

    Attributes:
        ece: Expected calibration error: the count-weighted mean |mean score - harmful rate| over bins.
        bins: One entry per non-empty bin: ``lo``, ``hi``, ``count``, ``mean_score``, ``harmful_rate``.
    """

    ece: float
    bins: list[dict[str, float]]

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {"ece": self.ece, "bins": self.bins}


def reliability(y_true: Sequence[bool | int], scores: Sequence[float], *, bins: int = BINS) -> Reliability:
    """Bin scores into equal-width bins and compare each bin's mean score with its harmful rate."""
    groups: list[list[tuple[float, int]]] = [[] for _ in range(bins)]
    for y, s in zip(y_true, scores, strict=True):
        k = min(int(float(s) * bins), bins - 1)
        groups[max(k, 0)].append((float(s), int(bool(y))))
    n = sum(len(g) for g in groups)
    out: list[dict[str, float]] = []
    ece = 0.0
    for k, g in enumerate(groups):
        if not g:
            continue
        mean_s = sum(s for s, _ in g) / len(g)
        rate = sum(y for _, y in g) / len(g)
        ece += len(g) / n * abs(mean_s - rate)
        out.append({"lo": k / bins, "hi": (k + 1) / bins, "count": len(g), "mean_score": mean_s, "harmful_rate": rate})
    return Reliability(ece=ece, bins=out)


def _logit(p: float) -> float:
    p = min(max(p, _EPS), 1 - _EPS)
    return math.log(p / (1 - p))


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


@dataclass(frozen=True)
class Calibration:
    """A fitted calibration of one detector.

    Attributes:
        method: ``temperature`` or ``platt``.
        a: Slope on the logit (temperature: 1 / T).
        b: Intercept (0 for temperature scaling).
        threshold: Calibrated score at or above which a sample is harmful.
        detector_key: The prediction-cache key of the detector it was fitted for.
        n: Samples it was fitted on.
    """

    method: str
    a: float
    b: float
    threshold: float
    detector_key: str = ""
    n: int = 0

    def __call__(self, score: float) -> float:
        """The calibrated score."""
        return _sigmoid(self.a * _logit(score) + self.b)

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "method": self.method,
            "a": self.a,
            "b": self.b,
            "temperature": 1 / self.a if self.method == "temperature" and self.a else None,
            "threshold": self.threshold,
            "detector_key": self.detector_key,
            "n": self.n,
        }


def _newton(x: list[float], y: list[int], fit_b: bool) -> tuple[float, float]:
    a, b = 1.0, 0.0
    for _ in range(100):
        ga = gb = haa = hab = hbb = 0.0
        for xi, yi in zip(x, y, strict=True):
            p = _sigmoid(a * xi + b)
            r, w = p - yi, max(p * (1 - p), 1e-12)
            ga, gb = ga + r * xi, gb + r
            haa, hab, hbb = haa + w * xi * xi, hab + w * xi, hbb + w
        haa += 1e-9
        if fit_b:
            det = haa * (hbb + 1e-9) - hab * hab
            if abs(det) < 1e-15:
                break
            da, db = ((hbb + 1e-9) * ga - hab * gb) / det, (haa * gb - hab * ga) / det
        else:
            da, db = ga / haa, 0.0
        a, b = a - da, b - db
        if abs(da) < 1e-10 and abs(db) < 1e-10:
            break
    return a, b


def fit_temperature(logits: list[float], labels: list[int]) -> tuple[float, float]:
    """Temperature scaling: the slope ``a = 1 / T`` on the logit, no intercept."""
    return _newton(logits, labels, fit_b=False)


def fit_platt(logits: list[float], labels: list[int]) -> tuple[float, float]:
    """Platt scaling: slope and intercept on the logit."""
    return _newton(logits, labels, fit_b=True)


def best_threshold(y_true: Sequence[bool | int], scores: Sequence[float]) -> float:
    """The score threshold (harmful when score >= it) with the highest balanced accuracy on the data."""
    pos = sum(1 for y in y_true if y)
    neg = len(y_true) - pos
    if not pos or not neg:
        return 0.5
    pairs = sorted(zip(scores, y_true, strict=True), key=lambda t: -t[0])
    best, best_t, tp, fp = -1.0, 0.5, 0, 0
    for i, (s, y) in enumerate(pairs):
        tp, fp = tp + bool(y), fp + (not y)
        if i + 1 < len(pairs) and pairs[i + 1][0] == s:
            continue
        bal = (tp / pos + (neg - fp) / neg) / 2
        if bal > best:
            best, best_t = bal, s
    return best_t


def fit_calibration(
    y_true: Sequence[bool | int], scores: Sequence[float], *, method: str = "temperature", detector_key: str = ""
) -> Calibration:
    """Fit temperature or Platt scaling (or a plugin's method) and a threshold on labelled scores.

    Raises:
        ConfigError: Unknown method, or the split lacks harmful or unharmful samples.
    """
    fit = CALIBRATION_METHODS.load(method)
    ys = [int(bool(y)) for y in y_true]
    if not ys or all(ys) or not any(ys):
        raise ConfigError("the calibration split needs both harmful and unharmful samples with scores")
    x = [_logit(float(s)) for s in scores]
    a, b = fit(x, ys)
    cal = Calibration(method, a, b, 0.5, detector_key, len(ys))
    return replace(cal, threshold=best_threshold(ys, [cal(float(s)) for s in scores]))


def save_calibrations(path: str | os.PathLike[str], calibrations: Mapping[str, Calibration]) -> Path:
    """Write calibrations, by detector label, as JSON (atomically)."""
    from vhd.fileio import atomic_write

    data = {"version": 1, "detectors": {k: c.to_dict() for k, c in calibrations.items()}}
    return atomic_write(path, json.dumps(data, indent=2) + "\n")


def load_calibrations(path: str | os.PathLike[str]) -> dict[str, Calibration]:
    """Read calibrations written by `save_calibrations`.

    Raises:
        ConfigError: Unreadable or malformed file.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return {
            label: Calibration(
                d["method"],
                float(d["a"]),
                float(d["b"]),
                float(d["threshold"]),
                d.get("detector_key", ""),
                int(d.get("n", 0)),
            )
            for label, d in data["detectors"].items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:  # any malformed content
        raise ConfigError(f"cannot read calibration file {path} ({exc}); re-create it with --calibrate") from exc
