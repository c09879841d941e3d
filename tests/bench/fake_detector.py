"""A tiny real detector for the bench tests: judges an image by its mean red channel."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

from vhd.detectors.base import Detector, Prediction
from vhd.media.encoded import EncodedImage
from vhd.records import Kind


class RedDetector(Detector):
    """Harmful when the mean red share is at least `threshold`; fails on pure-green images."""

    name: ClassVar[str] = "red"
    multiclass: ClassVar[bool] = True
    calls: ClassVar[int] = 0
    active: ClassVar[int] = 0
    peak: ClassVar[int] = 0

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        cls = type(self)
        cls.calls += 1
        cls.active += 1
        cls.peak = max(cls.peak, cls.active)
        try:
            await asyncio.sleep(float(self.options.get("delay", 0)))
            r, g, _b = images[0].to_pil().convert("RGB").resize((8, 8)).getpixel((4, 4))  # type: ignore[misc]
            if g > 200 and r < 50:
                raise RuntimeError("green confuses me")
            score = r / 255
            harmful = score >= float(self.options.get("threshold", 0.5))
            cats = [str(self.options.get("category", "A"))] if harmful else []
            if "trace" in self.options:  # one line per finished call, for tests that watch a child process
                with open(str(self.options["trace"]), "a") as fh:
                    fh.write("done\n")
            severity = None
            if harmful and "levels" in self.options:  # "low,high": the second level from a score of 0.9
                low, high = str(self.options["levels"]).split(",")
                severity = high if score >= 0.9 else low
            return Prediction(harmful, score=score, categories=cats, severity=severity)
        finally:
            cls.active -= 1


class LabelDetector(Detector):
    """Fires a Hive label on bright images (multi-class through the crosswalk); no scores."""

    name: ClassVar[str] = "hive"

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        px: Any = images[0].to_pil().convert("L").resize((4, 4)).getpixel((2, 2))
        if px > 100:
            return Prediction(True, labels={"yes_pills": 0.9, "very_bloody": 0.6})
        return Prediction(False)


class OriginalDetector(Detector):
    """Asks for original file bytes and remembers what it was given (mime, size, sha256)."""

    name: ClassVar[str] = "original"
    wants_original: ClassVar[bool] = True
    seen: ClassVar[list[tuple[str, int, int, str]]] = []

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        img = images[0]
        type(self).seen.append((img.mime, img.width, img.height, img.sha256))
        return Prediction(False, score=0.0)
