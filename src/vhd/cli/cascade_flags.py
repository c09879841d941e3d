"""``--cascade`` flags made into a `vhd.annotate.cascade.Cascade` (``vhd annotate`` and ``vhd compare``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vhd.annotate.cascade import Cascade


def cascade_from_flags(
    specs: Sequence[str],
    thresholds: Sequence[str],
    *,
    calibration: str | os.PathLike[str] | None = None,
    sets: Sequence[str] = (),
    config: str | os.PathLike[str] | None = None,
) -> Cascade:
    """The cascade of ``--cascade SPEC`` stages with their ``--cascade-thresholds LOW:HIGH``.

    Args:
        specs: Detector specs ``[LABEL=]NAME[:MODEL]``, in stage order.
        thresholds: One ``LOW:HIGH`` per spec, same order.
        calibration: A ``vhd bench --calibrate`` calibration file; stages found in it (by label)
            use calibrated scores.
        sets: Detector options ``LABEL.key=value``.
        config: A TOML file whose ``[detectors.LABEL]`` tables hold detector options.

    Raises:
        ConfigError: Bad specs, thresholds or options; unknown detectors (the message lists them).
    """
    from vhd.annotate.cascade import build_cascade
    from vhd.bench.calibration import load_calibrations
    from vhd.bench.pipeline import build_detectors

    detectors = build_detectors(list(specs), sets=sets, config=config)
    calibrations = load_calibrations(calibration) if calibration is not None else None
    return build_cascade(detectors, list(thresholds), calibrations)
