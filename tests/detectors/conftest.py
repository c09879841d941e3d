"""Shared helpers for detector tests: photos from scikit-image and drawn images, encoded in memory."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable, Sequence

import pytest
from PIL import Image, ImageDraw

from vhd.detectors.base import Detector, Prediction
from vhd.media.encoded import EncodedImage
from vhd.records import Kind


def encode(image: Image.Image, fmt: str = "JPEG") -> EncodedImage:
    """Encode a Pillow image as the media loader would."""
    buf = io.BytesIO()
    image.convert("RGB").save(buf, fmt, quality=90)
    return EncodedImage(buf.getvalue(), f"image/{fmt.lower()}", image.width, image.height)


def drawn(color: str = "white", size: tuple[int, int] = (64, 48), text: str = "") -> EncodedImage:
    """A small drawn image (distinct per color/text)."""
    im = Image.new("RGB", size, color)
    draw = ImageDraw.Draw(im)
    draw.rectangle((4, 4, 20, 20), outline="black")
    if text:
        draw.text((2, 24), text, fill="black")
    return encode(im)


def predict_once(det: Detector, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
    """Check ``det``, judge one sample and close it, as a run does."""

    async def go() -> Prediction:
        await det.check()
        try:
            return await det.predict(kind, images)
        finally:
            await det.aclose()

    return asyncio.run(go())


@pytest.fixture(scope="session")
def photo() -> Callable[[str], EncodedImage]:
    """``photo("astronaut")``: a scikit-image sample photo as an `EncodedImage`."""
    from skimage import data

    cache: dict[str, EncodedImage] = {}

    def get(name: str) -> EncodedImage:
        if name not in cache:
            cache[name] = encode(Image.fromarray(getattr(data, name)()))
        return cache[name]

    return get
