"""Harmfulness detectors behind one interface (`Detector.predict`), registered by name."""

from vhd.detectors.base import Detector, Prediction, combine_frames
from vhd.detectors.registry import DetectorSpec, available, create_detector

__all__ = ["Detector", "DetectorSpec", "Prediction", "available", "combine_frames", "create_detector"]
