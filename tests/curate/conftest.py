"""Media for the curation tests, made in code: scikit-image photos, altered copies, drawn videos."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageEnhance

from vhd.records import Annotation, Kind, Sample, Verdict

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "camera", "moon")


def photo(name: str, size: tuple[int, int] | None = None) -> Image.Image:
    """A scikit-image sample photo as RGB, optionally resized."""
    from skimage import data

    img = Image.fromarray(getattr(data, name)()).convert("RGB")
    return img.resize(size, Image.Resampling.BICUBIC) if size else img


def save(img: Image.Image, path: Path, **kw: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, **kw)
    return path


def jpeg(img: Image.Image, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def brighter(img: Image.Image, factor: float = 1.2) -> Image.Image:
    return ImageEnhance.Brightness(img).enhance(factor)


def crop(img: Image.Image, fraction: float) -> Image.Image:
    """Cut ``fraction`` of the width and height off (half on each side)."""
    dx, dy = int(img.width * fraction / 2), int(img.height * fraction / 2)
    return img.crop((dx, dy, img.width - dx, img.height - dy))


def noise_image(seed: int, size: tuple[int, int] = (96, 96)) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8))


@pytest.fixture
def photos(tmp_path: Path) -> dict[str, Path]:
    """Distinct photos plus planted copies: exact (other format), near (resized, re-encoded,
    brighter, cropped 4%), and known misses (flipped, cropped 30%)."""
    folder = tmp_path / "photos"
    a = photo("astronaut", (320, 320))
    c = photo("coffee", (300, 200))
    out = {
        "a": save(a, folder / "a.png"),
        "a_exact": save(a, folder / "a_exact.webp", lossless=True),
        "a_small": save(a.resize((200, 200)), folder / "a_small.jpg", quality=85),
        "a_q40": save(a, folder / "a_q40.jpg", quality=40),
        "a_bright": save(brighter(a), folder / "a_bright.jpg", quality=92),
        "a_crop": save(crop(a, 0.04), folder / "a_crop.jpg", quality=90),
        "a_flip": save(a.transpose(Image.Transpose.FLIP_LEFT_RIGHT), folder / "a_flip.png"),
        "a_bigcrop": save(crop(a, 0.3), folder / "a_bigcrop.png"),
        "c": save(c, folder / "c.jpg", quality=90),
        "chelsea": save(photo("chelsea", (300, 200)), folder / "chelsea.jpg"),
        "rocket": save(photo("rocket", (300, 200)), folder / "rocket.jpg"),
    }
    return out


def annotate(store: object, sample: Sample, harmful: bool | None, run_id: str) -> None:
    """Save a minimal annotation with a decision (or none)."""
    ann = Annotation(
        sample_id=sample.id,
        run_id=run_id,
        config_hash="cfg",
        verdict=Verdict(harmful=harmful, reason="r"),
    )
    store.save_annotation(ann, sample)  # type: ignore[attr-defined]


def fake_sample(n: int | str, root: Path, **kw: object) -> Sample:
    fields: dict[str, object] = {"id": hashlib.sha256(f"s{n}".encode()).hexdigest(), "path": str(root / f"{n}.png")}
    fields.update(kw)
    return Sample(kind=Kind.IMAGE, **fields)  # type: ignore[arg-type]


@pytest.fixture
def write() -> Callable[[Path, bytes], Path]:
    def _write(path: Path, data: bytes) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    return _write
