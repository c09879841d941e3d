"""Encoding generated frames: PNG, WebP and H.264 MP4 with embedded provenance, and the invisible watermark.

Images become PNG with the provenance JSON in a ``tEXt`` chunk (zlib level 1 by default:
``--png-level``; the level changes the file's bytes, never its pixels), or lossless WebP
(``--image-format webp``, method 0, the JSON in an XMP packet); videos become H.264 MP4
(yuv420p, written with PyAV, one encoder thread so equal frames give equal bytes) with the JSON in
the container's ``comment`` tag. Files are named by the sha256 of their bytes, like every other
sample, and written atomically. The watermark is the one the SDXL pipelines apply
(``invisible-watermark``'s DWT-DCT with Stability AI's 48-bit message), applied to every frame of
every generator.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError, MissingDependencyError, pip_install
from vhd.fileio import atomic_write

WATERMARK_MESSAGE = 0b101100111110110010010000011110111011000110011110
"""The 48-bit message the SDXL pipelines embed (Stability AI's generative-models)."""

WATERMARK_MIN_SIDE = 256
"""DWT-DCT cannot carry the message in smaller images; they are left unmarked (``skipped``)."""


class Watermarker:
    """The invisible watermark of the SDXL pipelines, for uint8 RGB frames of any generator.

    Raises:
        MissingDependencyError: ``invisible-watermark`` is not installed (the message also names
            ``--no-watermark``).
    """

    def __init__(self) -> None:
        try:
            from imwatermark import WatermarkEncoder
        except ImportError as exc:
            raise ConfigError(
                f"the invisible watermark needs invisible-watermark: run `{pip_install(repr('vhd[watermark]'))}` "
                f"(or `{pip_install('invisible-watermark')}`), or pass --no-watermark"
            ) from exc
        self.encoder = WatermarkEncoder()
        self.encoder.set_watermark("bits", [int(bit) for bit in bin(WATERMARK_MESSAGE)[2:]])
        self.bits = [int(bit) for bit in bin(WATERMARK_MESSAGE)[2:]]

    @staticmethod
    def applies(width: int, height: int) -> bool:
        """Whether frames of this size can carry the watermark."""
        return min(width, height) >= WATERMARK_MIN_SIDE

    def apply(self, frames: Any) -> Any:
        """Watermark uint8 RGB frames (``N x H x W x 3``); too-small frames come back unchanged.

        The pixels are exactly those of ``invisible-watermark``'s ``dwtDct`` encoder (its
        per-block Python loop is done here as whole-array numpy: about 0.6 s less per 1024x1024
        frame, and no GIL held meanwhile by a Python loop).
        """
        import numpy as np

        if not self.applies(frames.shape[2], frames.shape[1]):
            return frames
        marked = [embed_dwt_dct(np.ascontiguousarray(f[:, :, ::-1]), self.bits)[:, :, ::-1] for f in frames]
        return np.ascontiguousarray(np.stack(marked).clip(0, 255).astype(np.uint8))


DWT_DCT_SCALE = 36
"""``invisible-watermark``'s ``dwtDct`` step on the U channel (its default scales ``[0, 36, 36]``:
Y is skipped and only the first two channels are visited, so V is never marked)."""


def embed_dwt_dct(bgr: Any, bits: Sequence[int], scale: int = DWT_DCT_SCALE) -> Any:
    """``invisible-watermark``'s ``dwtDct`` encoding of one BGR uint8 frame, vectorised, the same pixels.

    The library takes the Haar DWT of the U channel, walks the 4x4 blocks of its approximation
    band row by row, and in each moves the largest non-DC coefficient (first one on ties) to
    ``(|v| // scale + 0.25 + 0.5 * bit) * scale`` with v's sign, ``bit`` cycling through the
    message; then the inverse DWT (with its horizontal and vertical details swapped, as the
    library does) goes back into the uint8 channel. Every step here is that arithmetic, done on
    all blocks at once.
    """
    import cv2
    import numpy as np
    import pywt  # type: ignore[import-untyped]

    rows, cols = bgr.shape[:2]
    rows4, cols4 = rows // 4 * 4, cols // 4 * 4
    yuv = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV)
    band, (horizontal, vertical, diagonal) = pywt.dwt2(yuv[:rows4, :cols4, 1], "haar")
    br, bc = band.shape[0] // 4, band.shape[1] // 4
    blocks = band[: br * 4, : bc * 4].reshape(br, 4, bc, 4).transpose(0, 2, 1, 3).reshape(br, bc, 16)
    where = np.abs(blocks[..., 1:]).argmax(axis=-1)[..., None] + 1
    value = np.take_along_axis(blocks, where, axis=-1)
    bit = np.asarray(bits, dtype=np.int64)[np.arange(br * bc) % len(bits)].reshape(br, bc, 1)
    magnitude = np.where(value >= 0.0, value, np.abs(value))
    moved = (magnitude // scale + 0.25 + 0.5 * bit) * scale
    np.put_along_axis(blocks, where, np.where(value >= 0.0, moved, -1.0 * moved), axis=-1)
    band[: br * 4, : bc * 4] = blocks.reshape(br, bc, 4, 4).transpose(0, 2, 1, 3).reshape(br * 4, bc * 4)
    yuv[:rows4, :cols4, 1] = pywt.idwt2((band, (vertical, horizontal, diagonal)), "haar")
    return cv2.cvtColor(yuv, cv2.COLOR_YUV2BGR)


def to_uint8(frames: Any) -> Any:
    """Float frames in [0, 1] (diffusers' ``output_type="np"``) to uint8, rounded as diffusers does."""
    import numpy as np

    return (np.clip(frames, 0.0, 1.0) * 255).round().astype(np.uint8)


IMAGE_FORMATS = ("png", "webp")
"""Image formats `vhd generate` writes (both lossless)."""

DEFAULT_PNG_LEVEL = 1
"""zlib level of generated PNGs: level 1 encodes several times faster than Pillow's default 6 on
smooth, photograph-like images; the files are larger, the pixels are the same."""

X264_THREADS = 4
"""Encoder threads of a generated MP4. A fixed number, not one per CPU: x264's output depends on
its thread count, so a fixed count gives the same bytes for the same seed on every machine. Four
cut the time of a clip's encode, which nothing overlaps for a run's last clip, on the many-core
hosts of a GPU (16 frames at 1024 px: several seconds on one thread)."""


def encoding_name(fmt: str, png_level: int = DEFAULT_PNG_LEVEL) -> str:
    """How an image is encoded, as provenance records it: ``png:<level>`` or ``webp-lossless:0``.

    Raises:
        ConfigError: Unknown format, or a PNG level outside 0-9.
    """
    if fmt == "png":
        if not 0 <= png_level <= 9:
            raise ConfigError(f"--png-level {png_level} must be 0 (no compression, fastest) to 9 (smallest)")
        return f"png:{png_level}"
    if fmt == "webp":
        return "webp-lossless:0"
    raise ConfigError(f"--image-format {fmt!r}: choose {' or '.join(IMAGE_FORMATS)}")


def image_suffix(fmt: str) -> str:
    """The file suffix of an image format (``.png``, ``.webp``)."""
    return ".webp" if fmt == "webp" else ".png"


def encode_png(frame: Any, provenance_json: str, level: int = DEFAULT_PNG_LEVEL) -> bytes:
    """One ``H x W x 3`` uint8 frame as PNG bytes (zlib ``level``) carrying the provenance text chunk."""
    from PIL import Image, PngImagePlugin

    from vhd.synth.provenance import PNG_KEY

    info = PngImagePlugin.PngInfo()
    info.add_text(PNG_KEY, provenance_json)
    buf = io.BytesIO()
    Image.fromarray(frame, "RGB").save(buf, format="PNG", pnginfo=info, compress_level=level)
    return buf.getvalue()


def encode_webp(frame: Any, provenance_json: str) -> bytes:
    """One ``H x W x 3`` uint8 frame as lossless WebP (fastest method) with the provenance in its XMP packet."""
    from PIL import Image

    from vhd.synth.provenance import xmp_packet

    buf = io.BytesIO()
    Image.fromarray(frame, "RGB").save(
        buf, format="WEBP", lossless=True, method=0, quality=0, exact=True, xmp=xmp_packet(provenance_json)
    )
    return buf.getvalue()


def encode_image(frame: Any, provenance_json: str, fmt: str = "png", png_level: int = DEFAULT_PNG_LEVEL) -> bytes:
    """One frame in the chosen image format (`IMAGE_FORMATS`), carrying the provenance."""
    return encode_webp(frame, provenance_json) if fmt == "webp" else encode_png(frame, provenance_json, png_level)


def encode_mp4(frames: Any, fps: int, provenance_json: str) -> bytes:
    """``N x H x W x 3`` uint8 frames as H.264 MP4 bytes (yuv420p) carrying the provenance comment.

    Raises:
        MissingDependencyError: PyAV is not installed.
        ConfigError: Odd width or height (yuv420p needs even sides).
    """
    try:
        import av
    except ImportError as exc:
        raise MissingDependencyError("av", "video") from exc
    n, height, width = frames.shape[:3]
    if width % 2 or height % 2:
        raise ConfigError(f"video size {width}x{height} must be even for H.264; pass --size with even sides")
    fd, tmp = tempfile.mkstemp(suffix=".mp4")
    os.close(fd)
    try:
        with av.open(tmp, mode="w", format="mp4") as container:
            container.metadata["comment"] = provenance_json
            stream = container.add_stream("libx264", rate=fps)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.thread_count = X264_THREADS
            stream.options = {"crf": "18", "preset": "medium"}
            for k in range(n):
                frame = av.VideoFrame.from_ndarray(frames[k], format="rgb24")
                container.mux(stream.encode(frame))
            container.mux(stream.encode())
        return Path(tmp).read_bytes()
    finally:
        Path(tmp).unlink(missing_ok=True)


def content_name(data: bytes, suffix: str) -> str:
    """``<sha256 of the bytes><suffix>``: the file name of a generated sample."""
    return hashlib.sha256(data).hexdigest() + suffix


def write_output(out_dir: str | os.PathLike[str], data: bytes, suffix: str, *, sha256: str | None = None) -> Path:
    """Write bytes under their content name (atomically; an existing file with that name is kept).

    ``sha256`` is the hex digest of ``data`` when the caller has it (it names the file).
    """
    target = Path(out_dir) / ((sha256 + suffix) if sha256 else content_name(data, suffix))
    if not target.exists():
        atomic_write(target, data)
    return target


def write_frames(folder: str | os.PathLike[str], stem: str, frames: Sequence[Any] | Any) -> list[Path]:
    """Write ``folder/<stem>/<stem>_<k:04d>.png`` for each frame (``--keep-frames``)."""
    from PIL import Image

    written = []
    for k, frame in enumerate(frames):
        buf = io.BytesIO()
        Image.fromarray(frame, "RGB").save(buf, format="PNG")
        written.append(atomic_write(Path(folder) / stem / f"{stem}_{k:04d}.png", buf.getvalue()))
    return written
