"""Open, validate and encode still images for vision-language models.

Every image that reaches a model passes through here. Untrusted files are checked before any
pixel is decoded (size on disk, a format vhd accepts found by content, declared pixel count),
decoded completely (so truncated files fail here and not inside a model backend), checked for
concealed damage (JPEG, with PyAV: `jpeg_damage`), turned upright (EXIF orientation), flattened
to RGB and re-encoded at a bounded size. Every other part of vhd that opens an image file uses
`open_untrusted` (defined in `vhd.media.untrusted`, where the accepted formats are decided).

All failures raise `vhd.errors.MediaError` with a one-line reason. The module is long (over 450
lines) on purpose: every way an untrusted image is decoded (whole, or reduced for a preview by
`open_image_reduced`) shares the same checks, which stay private to this one file.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from PIL import ExifTags, Image, ImageOps

from vhd.errors import ConfigError, MediaError
from vhd.media.encoded import EncodedImage
from vhd.media.untrusted import ACCEPTED, DEFAULT_MAX_FRAME_PIXELS, frame_pixels_refusal, jpeg_damage, open_untrusted

__all__ = [
    "ACCEPTED",
    "FORMATS",
    "ImageLimits",
    "decode_image_bytes",
    "encode_image",
    "encode_image_bytes",
    "fit_image",
    "jpeg_damage",
    "load_image_encoded",
    "open_image",
    "open_image_bytes",
    "open_untrusted",
    "read_image_bytes",
    "to_rgb",
]

FORMATS: Final[dict[str, str]] = {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp"}
"""Encodings `encode_image` can produce, with their MIME types."""

_ALPHA_MODES: Final = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})
_WHITE: Final = (255, 255, 255)


@dataclass(frozen=True)
class ImageLimits:
    """Limits that protect the process from oversized or malicious image files.

    Attributes:
        max_pixels: Largest accepted width x height, checked from the header before decoding.
            Pillow's own process-wide ceiling (``PIL.Image.MAX_IMAGE_PIXELS``, about 89
            megapixels by default) also applies: an image Pillow would only warn about is
            rejected here too, so the effective limit is the smaller of the two.
        max_bytes: Largest accepted file size in bytes.
        max_frame_pixels: Largest accepted width x height of one frame of a video or an animated
            GIF/WebP/PNG (the still-image limit applies too, whichever is smaller). A few small
            kilobytes of video or animation can declare an 8192 x 8192 picture and decoders hold
            several frames at once, so it is lower than ``max_pixels``: 8K UHD (7680 x 4320), the
            largest standard video frame. Checked from the header before any frame is decoded.
    """

    max_pixels: int = 64_000_000
    max_bytes: int = 50 * 1024 * 1024
    max_frame_pixels: int = DEFAULT_MAX_FRAME_PIXELS

    def __post_init__(self) -> None:
        if self.max_pixels < 1:
            raise ConfigError(f"max_pixels must be at least 1, got {self.max_pixels}")
        if self.max_frame_pixels < 1:
            raise ConfigError(f"max_frame_pixels must be at least 1, got {self.max_frame_pixels}")
        if self.max_bytes < 1:
            raise ConfigError(f"max_bytes must be at least 1, got {self.max_bytes}")

    @property
    def effective_max_pixels(self) -> int:
        """The pixel limit actually enforced: ``max_pixels`` capped by Pillow's ceiling."""
        pillow = Image.MAX_IMAGE_PIXELS
        return self.max_pixels if pillow is None else min(self.max_pixels, int(pillow))

    @property
    def effective_max_frame_pixels(self) -> int:
        """The pixel limit of a video or animation frame: ``max_frame_pixels``, never above `effective_max_pixels`."""
        return min(self.max_frame_pixels, self.effective_max_pixels)


def _reason(exc: BaseException) -> str:
    """Format an exception as ``Type: message`` on one line."""
    text = " ".join(str(exc).split()) or "no details"
    return f"{type(exc).__name__}: {text}"


def read_image_bytes(path: str | Path, limits: ImageLimits | None = None) -> bytes:
    """Read an image file after checking its size on disk.

    Args:
        path: The image file.
        limits: Size limits; defaults to `ImageLimits()`.

    Returns:
        The file's bytes.

    Raises:
        MediaError: The file is missing, unreadable, empty or larger than ``limits.max_bytes``.
    """
    limits = limits or ImageLimits()
    try:
        size = Path(path).stat().st_size
        if size == 0:
            raise MediaError("empty file (0 bytes)")
        if size > limits.max_bytes:
            raise MediaError(
                f"file is {size / 2**20:.1f} MiB, over the {limits.max_bytes / 2**20:.1f} MiB "
                "limit (raise max_bytes to accept it)"
            )
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise MediaError(f"cannot read file ({_reason(exc)})") from exc


def _check_pixels(size: tuple[int, int], limits: ImageLimits, *, animated: bool = False) -> None:
    width, height = size
    if width < 1 or height < 1:
        raise MediaError(f"image declares an empty size {width}x{height}")
    pixels = width * height
    if animated and pixels > limits.effective_max_frame_pixels:
        raise MediaError(frame_pixels_refusal("animated image", width, height, limits.effective_max_frame_pixels))
    limit = limits.effective_max_pixels
    if pixels > limit:
        raise MediaError(
            f"image is {width}x{height} = {pixels:,} pixels, over the limit of {limit:,} "
            "(possible decompression bomb; raise max_pixels to accept it)"
        )


ANIMATED_FORMATS: Final = frozenset({"GIF", "PNG", "WEBP"})
"""Formats whose animations are held to the frame limit (`ImageLimits.max_frame_pixels`)."""


def is_animated(img: Image.Image) -> bool:
    """Whether an opened image has more than one frame (read from its header, without counting them)."""
    return bool(getattr(img, "is_animated", False))


def _draft_size(size: tuple[int, int], max_side: int) -> tuple[int, int]:
    """Smallest size with the image's aspect whose longest side is ``max_side``."""
    width, height = size
    longest = max(width, height)
    return (
        max(1, math.ceil(width * max_side / longest)),
        max(1, math.ceil(height * max_side / longest)),
    )


def _sent_as_is(img: Image.Image, declared: tuple[int, int], max_side: int) -> bool:
    """Whether a JPEG goes to a model as its own bytes: RGB, upright and ``declared`` within ``max_side``.

    Everything it reads is in the header (``declared`` is the size the file declares, before any
    draft scaling), so it gives the same answer before and after decoding.
    """
    return img.format == "JPEG" and img.mode == "RGB" and max(declared) <= max_side and _orientation(img) == 1


def _open_loaded(
    data: bytes, limits: ImageLimits, draft_side: int | None = None, as_is_side: int | None = None
) -> tuple[Image.Image, tuple[int, int]]:
    """Open image bytes, check the declared size and decode the first frame completely.

    Args:
        data: Encoded image bytes.
        limits: Pixel limits (byte limits are checked by the caller).
        draft_side: For JPEGs larger than this, let the decoder scale down by a power of two
            while keeping the longest side at least this long (much faster for large photos).
        as_is_side: When given, a JPEG that `_sent_as_is` will send unchanged (its pixels are
            never used) is decoded at 1/8 scale: the decoder still reads every marker and every
            byte of entropy-coded data, so a truncated or broken file fails as in a full decode,
            at about half the cost (no full-size inverse DCT, upsampling or colour conversion).

    Returns:
        The decoded image in its original mode, not yet turned upright, and the size the file
        declares (before any draft scaling).
    """
    if not data:
        raise MediaError("empty file (0 bytes)")
    img = open_untrusted(data)
    declared = img.size
    several = is_animated(img)  # a GIF's frames are not all counted (`n_frames` would walk them)
    # an animation composes every frame on its whole canvas; a multi-picture JPEG's pictures are separate
    _check_pixels(declared, limits, animated=several and img.format in ANIMATED_FORMATS)
    try:
        if several:
            img.seek(0)
        if as_is_side is not None and _sent_as_is(img, declared, as_is_side):
            img.draft(None, (1, 1))  # the smallest scale the decoder offers (1/8): a check, not pixels
        elif draft_side is not None and img.format == "JPEG" and max(img.size) > draft_side and not several:
            img.draft(None, _draft_size(img.size, draft_side))
        img.load()
    except MediaError:
        raise
    except Exception as exc:
        raise MediaError(f"truncated or corrupt image ({_reason(exc)})") from exc
    if img.format in ("JPEG", "MPO"):
        damage = jpeg_damage(data)
        if damage is not None:
            raise MediaError(damage)
    return img, declared


def _orientation(img: Image.Image) -> int:
    try:
        value = img.getexif().get(ExifTags.Base.Orientation, 1)
    except Exception:  # unreadable EXIF: treat as upright
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _upright(img: Image.Image) -> Image.Image:
    """Apply the EXIF orientation tag, if any."""
    if _orientation(img) == 1:
        return img
    try:
        return ImageOps.exif_transpose(img)
    except Exception as exc:
        raise MediaError(f"cannot apply EXIF orientation ({_reason(exc)})") from exc


def to_rgb(img: Image.Image) -> Image.Image:
    """Convert any Pillow image to RGB, compositing transparency onto white.

    16-bit and 32-bit grayscale images are scaled to 8 bits instead of being clipped.

    Args:
        img: A decoded image in any mode.

    Returns:
        An RGB image (``img`` itself when it already is RGB).

    Raises:
        MediaError: The mode cannot be converted.
    """
    if img.mode == "RGB":
        return img
    try:
        if img.mode == "P":
            img = img.convert("RGBA" if "transparency" in img.info else "RGB")
            if img.mode == "RGB":
                return img
        if img.mode in _ALPHA_MODES:
            rgba = img.convert("RGBA")
            background = Image.new("RGB", rgba.size, _WHITE)
            background.paste(rgba, mask=rgba.getchannel("A"))
            return background
        if img.mode.startswith("I;16"):
            return img.convert("I").point(lambda v: v / 257).convert("L").convert("RGB")
        if img.mode in ("I", "F"):
            first, last = img.getextrema()
            low = float(first) if isinstance(first, int | float) else 0.0
            high = float(last) if isinstance(last, int | float) else 255.0
            span = high - low or 1.0
            scaled = img.convert("F").point(lambda v: (v - low) * 255.0 / span)
            return scaled.convert("L").convert("RGB")
        return img.convert("RGB")
    except Exception as exc:
        raise MediaError(f"cannot convert {img.mode} image to RGB ({_reason(exc)})") from exc


def open_image_bytes(data: bytes, limits: ImageLimits | None = None) -> Image.Image:
    """Decode and validate in-memory image bytes; see `open_image`."""
    limits = limits or ImageLimits()
    if len(data) > limits.max_bytes:
        raise MediaError(
            f"image is {len(data) / 2**20:.1f} MiB, over the {limits.max_bytes / 2**20:.1f} MiB "
            "limit (raise max_bytes to accept it)"
        )
    img, _ = _open_loaded(data, limits)
    return to_rgb(_upright(img))


def open_image(path: str | Path, limits: ImageLimits | None = None) -> Image.Image:
    """Open an image file safely and return it upright in RGB.

    The file is refused when it is empty, over ``limits.max_bytes``, not an image, declares
    more than ``limits.max_pixels`` pixels (checked before decoding) or is truncated (the
    image is fully decoded here). An animated GIF/WebP/PNG gives its first frame. The EXIF
    orientation is applied and transparency is composited onto white.

    Args:
        path: The image file.
        limits: Size limits; defaults to `ImageLimits()`.

    Returns:
        A loaded RGB image.

    Raises:
        MediaError: With a one-line reason, for any of the problems above.
    """
    limits = limits or ImageLimits()
    return open_image_bytes(read_image_bytes(path, limits), limits)


def _check_format(fmt: str, quality: int, max_side: int) -> str:
    key = fmt.lower()
    if key == "jpg":
        key = "jpeg"
    if key not in FORMATS:
        raise ConfigError(f"unknown image format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if not 1 <= quality <= 100:
        raise ConfigError(f"image quality must be between 1 and 100, got {quality}")
    if max_side < 1:
        raise ConfigError(f"max_side must be at least 1, got {max_side}")
    return key


def fit_image(img: Image.Image, max_side: int) -> Image.Image:
    """An image in RGB, downscaled so its longest side is at most ``max_side`` (never enlarged).

    These are the pixels `encode_image` encodes; callers that want pixels, not bytes, use this
    and skip the encode-decode round trip.

    Raises:
        MediaError: The image cannot be converted to RGB.
    """
    rgb = to_rgb(img)
    width, height = rgb.size
    longest = max(width, height)
    if longest > max_side:
        scale = max_side / longest
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        # Antialiased bilinear (a triangle filter widened by the scale factor) after an integer
        # box reduction: for downscaling it stays close to Lanczos (mean difference under 6/255
        # in the tests) and costs half as much, and resizing is most of the client's CPU per
        # large image (BENCHMARKS.md).
        rgb = rgb.resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0)
    return rgb


def _open_bounded(data: bytes, limits: ImageLimits, max_side: int) -> Image.Image:
    """Refuse bytes over ``limits.max_bytes``, then open and load them (large JPEGs drafted down)."""
    if len(data) > limits.max_bytes:
        raise MediaError(
            f"image is {len(data) / 2**20:.1f} MiB, over the {limits.max_bytes / 2**20:.1f} MiB "
            "limit (raise max_bytes to accept it)"
        )
    img, _ = _open_loaded(data, limits, draft_side=max_side)
    return img


def decode_image_bytes(data: bytes, max_side: int = 1024, limits: ImageLimits | None = None) -> Image.Image:
    """Validate encoded image bytes and decode them to the pixels `encode_image_bytes` would encode.

    Upright, RGB, longest side at most ``max_side`` (large JPEGs decoded at a reduced scale
    first), with every check of `encode_image_bytes`, and no re-encoding.

    Raises:
        MediaError: The bytes are not a usable image (see `open_image`).
    """
    img = _open_bounded(data, limits or ImageLimits(), max_side)
    return fit_image(to_rgb(_upright(img)), max_side)


def encode_image(img: Image.Image, max_side: int = 1024, fmt: str = "jpeg", quality: int = 90) -> EncodedImage:
    """Downscale an image so its longest side is at most ``max_side`` and encode it.

    Args:
        img: A decoded image (converted to RGB if it is not).
        max_side: Longest side in pixels after scaling; smaller images are not enlarged.
        fmt: ``jpeg``, ``png`` or ``webp``.
        quality: Encoder quality for JPEG and WebP (1-100); ignored for PNG.

    Returns:
        The encoded image.

    Raises:
        ConfigError: Unknown format or out-of-range quality/max_side.
        MediaError: The image cannot be converted or encoded.
    """
    key = _check_format(fmt, quality, max_side)
    rgb = fit_image(img, max_side)
    buf = io.BytesIO()
    try:
        if key == "jpeg":
            rgb.save(buf, format="JPEG", quality=quality)
        elif key == "png":
            rgb.save(buf, format="PNG", compress_level=6)
        else:
            rgb.save(buf, format="WEBP", quality=quality, method=4)
    except Exception as exc:
        raise MediaError(f"cannot encode image as {key} ({_reason(exc)})") from exc
    return EncodedImage(buf.getvalue(), FORMATS[key], rgb.width, rgb.height)


def encode_image_bytes(
    data: bytes,
    max_side: int = 1024,
    limits: ImageLimits | None = None,
    fmt: str = "jpeg",
    quality: int = 90,
) -> EncodedImage:
    """Validate encoded image bytes and re-encode them for a model.

    Large JPEGs are decoded at a reduced scale (``draft``) before the final resize. A JPEG
    that is already RGB, upright (no EXIF rotation) and within ``max_side`` is sent as its
    original bytes, unchanged, after a decode at 1/8 scale (every byte of the file read, as in a
    full decode) and the damage check have proved it intact.

    Args:
        data: The file's bytes.
        max_side: Longest side in pixels of the result.
        limits: Size limits; defaults to `ImageLimits()`.
        fmt: ``jpeg``, ``png`` or ``webp``.
        quality: Encoder quality for JPEG and WebP.

    Returns:
        The encoded image.

    Raises:
        MediaError: The bytes are not a usable image (see `open_image`).
        ConfigError: Bad ``fmt``, ``quality`` or ``max_side``.
    """
    limits = limits or ImageLimits()
    key = _check_format(fmt, quality, max_side)
    if len(data) > limits.max_bytes:
        raise MediaError(
            f"image is {len(data) / 2**20:.1f} MiB, over the {limits.max_bytes / 2**20:.1f} MiB "
            "limit (raise max_bytes to accept it)"
        )
    as_is = max_side if key == "jpeg" else None
    img, declared = _open_loaded(data, limits, draft_side=max_side, as_is_side=as_is)
    if as_is is not None and _sent_as_is(img, declared, max_side):  # decoded at 1/8 scale: only checked
        width, height = declared
        return EncodedImage(data, FORMATS["jpeg"], width, height)
    return encode_image(to_rgb(_upright(img)), max_side=max_side, fmt=key, quality=quality)


def load_image_encoded(
    path: str | Path,
    max_side: int = 1024,
    limits: ImageLimits | None = None,
    fmt: str = "jpeg",
    quality: int = 90,
) -> EncodedImage:
    """Read, validate and encode an image file in one step (see `encode_image_bytes`).

    Args:
        path: The image file.
        max_side: Longest side in pixels of the result.
        limits: Size limits; defaults to `ImageLimits()`.
        fmt: ``jpeg``, ``png`` or ``webp``.
        quality: Encoder quality for JPEG and WebP.

    Returns:
        The encoded image.

    Raises:
        MediaError: The file is not a usable image.
    """
    limits = limits or ImageLimits()
    return encode_image_bytes(
        read_image_bytes(path, limits), max_side=max_side, limits=limits, fmt=fmt, quality=quality
    )


_TRANSPOSE: Final = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_REDUCIBLE: Final = frozenset({"L", "LA", "La", "RGB", "RGBA", "RGBa", "RGBX", "CMYK", "YCbCr", "I", "F"})


def _jpeg_scale(size: tuple[int, int], max_side: int) -> int:
    """The power of two (1 to 8) a JPEG decoder may scale down by and keep ``max_side``."""
    scale = 1
    while scale < 8 and max(size) // (scale * 2) >= max_side:
        scale *= 2
    return scale


def decode_cost(img: Image.Image, max_side: int) -> int:
    """Bytes that `open_image_reduced` needs to decode an image opened lazily (header read only).

    A JPEG is counted at the size its decoder scales down to; any other format at full size
    (Pillow keeps 4 bytes a pixel for every mode but the 8-bit and 16-bit single-band ones), plus
    a converted copy when its mode cannot be reduced directly (palette, bilevel).
    """
    width, height = img.size
    if img.format in ("JPEG", "MPO"):
        scale = _jpeg_scale(img.size, max_side)
        width, height = math.ceil(width / scale), math.ceil(height / scale)
    per_pixel = 1 if img.mode in ("1", "L", "P") else 2 if img.mode.startswith("I;16") else 4
    extra = 0 if img.mode in _REDUCIBLE else 4
    return width * height * (per_pixel + extra) + 2**20


def open_image_reduced(data: bytes, max_side: int, limits: ImageLimits | None = None) -> Image.Image:
    """Decode image bytes straight to a small RGB image whose longest side is ``max_side`` or a little more.

    What a preview needs, at a bounded cost (`decode_cost`): a JPEG is decoded already scaled
    down (its decoder's draft mode), other formats are decoded once and shrunk by an integer
    factor (``Image.reduce``, a box filter) before anything else is done with them. The same
    checks as `open_image_bytes` apply (size, accepted format, pixel limit, truncation, JPEG
    damage) and the EXIF orientation is applied to the small image.

    Args:
        data: Encoded image bytes.
        max_side: The longest side wanted (the result is at least this long unless the image is smaller).
        limits: Size limits; defaults to `ImageLimits()`.

    Raises:
        MediaError: With a one-line reason, as `open_image_bytes`.
    """
    img = _open_bounded(data, limits or ImageLimits(), max_side)
    orientation = _orientation(img)
    factor = max(1, max(img.size) // max(1, max_side))
    if factor > 1:
        try:
            small = (img if img.mode in _REDUCIBLE else to_rgb(img)).reduce(factor)
        except Exception as exc:
            raise MediaError(f"cannot scale the image down ({_reason(exc)})") from exc
        img.close()
        img = small
    out = to_rgb(img)
    return out.transpose(_TRANSPOSE[orientation]) if orientation in _TRANSPOSE else out
