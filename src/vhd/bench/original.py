"""Original image bytes for detectors that read files themselves (``wants_original``).

`vhd.media.load.load_sample` re-encodes every image to a bounded JPEG, which is what a
vision-language model should be sent. A local detector that decodes files on its own (NudeNet
reads a path with OpenCV) is better served by the file as it is: no decode and re-encode in
between, and the detector sees exactly what it would see run by hand. The file is still checked
before it is handed on: size on disk, an accepted image format (by content, see
`vhd.media.image.open_untrusted`), and the declared pixel count, all from the header (Pillow
decodes no pixel here; a truncated file fails inside the detector, as a per-sample error); a JPEG
is also checked for concealed damage (`vhd.media.image.jpeg_damage`, with PyAV).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vhd.errors import MediaError
from vhd.media.encoded import EncodedImage
from vhd.media.image import ImageLimits, jpeg_damage, open_untrusted, read_image_bytes

_MIME = {
    "JPEG": "image/jpeg",
    "MPO": "image/jpeg",  # a JPEG with more pictures after the first (phone cameras)
    "PNG": "image/png",
    "WEBP": "image/webp",
    "GIF": "image/gif",
    "BMP": "image/bmp",
}


def wants_original(detector: Any) -> bool:
    """Whether a detector asked for original image bytes (class attribute ``wants_original = True``)."""
    return bool(getattr(detector, "wants_original", False))


def original_identity() -> dict[str, Any]:
    """What replaces the media settings in the cache key of an image judged on its original bytes."""
    return {"images": "original"}


def load_original(path: str | Path, limits: ImageLimits | None = None) -> EncodedImage:
    """An image file's own bytes as an `EncodedImage`, after header checks.

    Args:
        path: The image file.
        limits: Size limits (bytes on disk, declared pixels); defaults to `ImageLimits()`.

    Returns:
        The unchanged bytes with their MIME type and declared size.

    Raises:
        MediaError: Unreadable, empty, oversized, not an accepted image format, over the pixel
            limit, or a damaged JPEG.
    """
    import warnings

    from PIL import Image

    limits = limits or ImageLimits()
    data = read_image_bytes(path, limits)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with open_untrusted(data) as img:
                fmt, (width, height) = str(img.format), img.size
    except MediaError as exc:  # a refused format, an unreadable header, a decompression bomb
        raise MediaError(f"not a usable image: {exc}") from exc
    if width < 1 or height < 1:
        raise MediaError(f"image declares an empty size {width}x{height}")
    limit = limits.effective_max_pixels
    if width * height > limit:
        raise MediaError(
            f"image is {width}x{height} = {width * height:,} pixels, over the limit of {limit:,} "
            "(possible decompression bomb; raise max_pixels to accept it)"
        )
    damage = jpeg_damage(data) if fmt in ("JPEG", "MPO") else None
    if damage is not None:
        raise MediaError(damage)
    return EncodedImage(data, _MIME.get(fmt, f"image/{fmt.lower()}"), width, height)
