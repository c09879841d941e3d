"""NudeNet 3 as a harmfulness detector, with the ONNX weights its wheel ships (``vhd[nudenet]``).

NudeNet finds 18 body-part classes. As in the paper's appendix E.1, an image is harmful when
any class of a harmful subset is detected; the default subset is the four the paper chose
(exposed female breast, female genitalia, anus, male genitalia). Videos are judged frame by
frame. NudeNet is AGPL-3.0 licensed, hence an optional extra.

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    labels: Harmful classes (a list, or a comma-separated string; any case).
    threshold: Lowest confidence that counts (default 0: any detection NudeNet reports;
        NudeNet itself drops boxes under 0.2).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vhd.detectors.base import Detector, Prediction, best_scores, judge_one_image
from vhd.detectors.vlm import parse_options
from vhd.errors import ConfigError, MissingDependencyError, require
from vhd.media.encoded import EncodedImage
from vhd.records import Kind

NUDENET_LABELS: tuple[str, ...] = (
    "FEMALE_GENITALIA_COVERED",
    "FACE_FEMALE",
    "BUTTOCKS_EXPOSED",
    "FEMALE_BREAST_EXPOSED",
    "FEMALE_GENITALIA_EXPOSED",
    "MALE_BREAST_EXPOSED",
    "ANUS_EXPOSED",
    "FEET_EXPOSED",
    "BELLY_COVERED",
    "FEET_COVERED",
    "ARMPITS_COVERED",
    "ARMPITS_EXPOSED",
    "FACE_MALE",
    "BELLY_EXPOSED",
    "MALE_GENITALIA_EXPOSED",
    "ANUS_COVERED",
    "FEMALE_BREAST_COVERED",
    "BUTTOCKS_COVERED",
)
"""The 18 classes of NudeNet 3's detector."""

HARMFUL_LABELS: tuple[str, ...] = (
    "FEMALE_BREAST_EXPOSED",
    "FEMALE_GENITALIA_EXPOSED",
    "ANUS_EXPOSED",
    "MALE_GENITALIA_EXPOSED",
)
"""The harmful subset of the paper's appendix E.1, in NudeNet 3's spelling."""

EXPLICIT_CATEGORY = "F"
"""The taxonomy code NudeNet's harmful classes fall under (Explicit and Sexual Content)."""

_PIP = "pip install 'vhd[nudenet]'"


class NudeNetOptions(BaseModel):
    """Options of the ``nudenet`` detector."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    labels: tuple[str, ...] = HARMFUL_LABELS
    threshold: float = Field(default=0.0, ge=0.0, le=1.0)

    @field_validator("labels", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        if isinstance(value, list | tuple):
            names = [str(v).strip().upper() for v in value]
            unknown = [n for n in names if n not in NUDENET_LABELS]
            if unknown:
                raise ValueError(f"unknown NudeNet class {unknown[0]!r}; valid: {', '.join(NUDENET_LABELS)}")
            if not names:
                raise ValueError("needs at least one class")
            return tuple(dict.fromkeys(names))
        return value


class NudeNetDetector(Detector):
    """NudeNet's body-part detector; harmful when a harmful class is found.

    The score is the highest confidence among harmful detections (0 when there is none);
    ``labels`` holds every detected class with its highest confidence.
    """

    name = "nudenet"
    wants_original = True
    video_native = False
    multiclass = False

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model, options)
        if model:
            raise ConfigError(f"detector {label}: nudenet takes no model (write `nudenet`, not `nudenet:{model}`)")
        self.opts: NudeNetOptions = parse_options(label, self.options, NudeNetOptions)
        self._detector: Any = None
        self._lock = threading.Lock()

    def identity(self) -> dict[str, Any]:
        """Name, harmful classes and threshold (the packaged weights are fixed by the version)."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            nudenet_version = version("nudenet")
        except PackageNotFoundError:
            nudenet_version = None
        return {
            "name": self.name,
            "labels": sorted(self.opts.labels),
            "threshold": self.opts.threshold,
            "nudenet": nudenet_version,
        }

    def _load(self) -> Any:
        with self._lock:
            if self._detector is None:
                nudenet: Any = require("nudenet", "nudenet")
                self._detector = nudenet.NudeDetector()
            return self._detector

    async def check(self) -> None:
        """Load the ONNX session (fails with the pip line when the extra is missing)."""
        await asyncio.to_thread(self._load)

    async def aclose(self) -> None:
        """Drop the ONNX session."""
        self._detector = None

    def _detect(self, image: EncodedImage) -> list[dict[str, Any]]:
        import numpy as np

        cv2: Any = require("cv2", "nudenet", "opencv-python-headless")
        detector = self._load()
        # What NudeNet's own detect(path) does with cv2.imread: a 3-channel BGR array.
        mat = cv2.imdecode(np.frombuffer(image.data, np.uint8), cv2.IMREAD_COLOR)
        if mat is None:
            raise ValueError(f"cannot decode the {image.mime} image")
        return list(detector.detect(mat))

    def judge(self, detections: Sequence[Mapping[str, Any]]) -> Prediction:
        """Turn NudeNet's detections (``{"class", "score", "box"}``) into a prediction."""
        labels = best_scores(detections, "class")
        harmful_scores = [s for n, s in labels.items() if n in self.opts.labels and s >= self.opts.threshold]
        score = max(harmful_scores, default=0.0)
        harmful = bool(harmful_scores)
        return Prediction(
            harmful=harmful,
            score=score,
            labels=labels,
            categories=[EXPLICIT_CATEGORY] if harmful else [],
        )

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Judge one image (videos arrive frame by frame through `Detector.predict`)."""
        return await judge_one_image("nudenet", images, self._detect, self.judge, fatal=(MissingDependencyError,))
