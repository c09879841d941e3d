"""`open_image_reduced` and `decode_cost`: a preview's decode at a bounded, predictable cost."""

from __future__ import annotations

import io

import pytest
from PIL import Image, ImageDraw

from vhd.errors import MediaError
from vhd.media.image import decode_cost, open_image_bytes, open_image_reduced, open_untrusted


def _encoded(image: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt, **kw)
    return buf.getvalue()


def _drawing(size: tuple[int, int] = (4000, 3000), mode: str = "RGB") -> Image.Image:
    image = Image.new("RGB", size, "white")
    ImageDraw.Draw(image).ellipse([size[0] // 8, size[1] // 6, size[0] * 7 // 8, size[1] * 5 // 6], fill="black")
    return image.convert(mode)


def test_large_png_is_decoded_reduced_and_costed_from_its_header() -> None:
    png, jpg = _encoded(_drawing(), "PNG"), _encoded(_drawing(), "JPEG")
    small = open_image_reduced(png, 768)
    assert small.mode == "RGB" and 768 <= max(small.size) < 1536
    assert open_image_reduced(jpg, 768).size[0] < 1536  # the JPEG decoder's draft mode
    png_cost, jpg_cost = decode_cost(open_untrusted(png), 768), decode_cost(open_untrusted(jpg), 768)
    assert png_cost >= 4000 * 3000 * 4 and jpg_cost < png_cost / 10  # Pillow keeps RGB in 4 bytes a pixel
    gray = decode_cost(open_untrusted(_encoded(_drawing(mode="L"), "PNG")), 768)
    palette = decode_cost(open_untrusted(_encoded(_drawing(mode="P"), "PNG")), 768)
    assert gray < png_cost / 3 and palette > gray  # a palette image is converted before it is reduced


@pytest.mark.parametrize("mode", ["P", "LA", "RGBA", "1", "I;16"])
def test_every_mode_comes_out_rgb_and_small(mode: str) -> None:
    out = open_image_reduced(_encoded(_drawing((1600, 1200), mode), "PNG"), 256)
    assert out.mode == "RGB" and 256 <= max(out.size) < 512


def test_orientation_is_applied_to_the_small_image() -> None:
    image = _drawing((1200, 400))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise when shown
    data = _encoded(image, "JPEG", exif=exif.tobytes())
    small, full = open_image_reduced(data, 100), open_image_bytes(data)
    assert full.size == (400, 1200) and small.size[1] > small.size[0]  # upright, as the full decode


def test_same_checks_as_a_full_decode() -> None:
    png = _encoded(_drawing((800, 600)), "PNG")
    with pytest.raises(MediaError, match="truncated or corrupt"):
        open_image_reduced(png[: len(png) // 2], 128)
    with pytest.raises(MediaError):
        open_image_reduced(b"GIF89a" + b"\x00" * 10, 128)
