"""The gate every untrusted media file passes: what its content is, which decoder may see it, damage.

Pillow has a plugin for dozens of formats (TIFF, TGA, DDS, PSD, FITS, ...) and hands EPS files to
Ghostscript; FFmpeg has demuxers for hundreds of containers. Each is attack surface, so vhd lets
only the formats docs/commands/annotate.md lists reach a decoder, decided by the file's content (magic bytes),
never its name:

- images: `open_untrusted` opens with Pillow's JPEG, PNG, WebP, BMP and GIF plugins only
  (`ACCEPTED`); no other plugin's parser ever sees the bytes. A refused file gets a one-line reason
  naming what it is (`describe`) and the accepted formats.
- videos: `video_demuxer` names the one FFmpeg demuxer a file may be opened with (MP4/MOV, WebM/MKV
  or AVI); anything else is refused before FFmpeg probes it.
- damage: Pillow decodes a JPEG with corrupted entropy-coded data without a word (libjpeg conceals
  the errors), and a model would judge the garbled pixels. `jpeg_damage` decodes the JPEG once more
  with FFmpeg's strict error detection (``err_detect=explode``, at 1/8 scale: the entropy decoding,
  where damage shows, is complete) when PyAV (the ``vhd[video]`` extra) is installed; without PyAV
  the check is off, and `damage_check_note` says so. Video streams get the same strict detection in
  `vhd.media.video`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
from typing import TYPE_CHECKING, Any, Final

from vhd.errors import MediaError, pip_install

if TYPE_CHECKING:
    from PIL import Image

ACCEPTED: Final[tuple[str, ...]] = ("JPEG", "PNG", "WEBP", "BMP", "GIF")
"""Pillow formats decoded from files (docs/commands/annotate.md's list). MPO (a JPEG holding several pictures, as
phone cameras write) comes through Pillow's JPEG plugin and counts as JPEG."""

ACCEPTED_TEXT: Final = "JPEG, PNG, WebP, BMP, GIF"
"""`ACCEPTED` as a reason names them."""

VIDEO_TEXT: Final = "MP4, MOV, WebM, MKV, AVI"
"""The video containers vhd reads, as a reason names them."""

_log = logging.getLogger(__name__)

_PREFIXES: Final[tuple[tuple[bytes, str], ...]] = (
    (b"\xff\xd8\xff", "JPEG"),
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"BM", "BMP"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
    (b"II+\x00", "BigTIFF"),
    (b"MM\x00+", "BigTIFF"),
    (b"8BPS", "PSD (Photoshop)"),
    (b"%!PS", "EPS/PostScript"),
    (b"\xc5\xd0\xd3\xc6", "EPS (DOS binary)"),
    (b"%PDF", "PDF"),
    (b"DDS ", "DDS (DirectDraw)"),
    (b"SIMPLE  =", "FITS"),
    (b"icns", "ICNS"),
    (b"\x00\x00\x01\x00", "ICO"),
    (b"\x00\x00\x02\x00", "CUR"),
    (b"\x00\x00\x00\x0cjP  \r\n\x87\n", "JPEG 2000"),
    (b"\xff\x4f\xff\x51", "JPEG 2000"),
    (b"\x00\x00\x00\x0cJXL \r\n\x87\n", "JPEG XL"),
    (b"\xff\x0a", "JPEG XL"),
    (b"qoif", "QOI"),
    (b"gimp xcf", "XCF (GIMP)"),
    (b"\x59\xa6\x6a\x95", "Sun raster"),
    (b"\x76\x2f\x31\x01", "OpenEXR"),
    (b"BLP1", "BLP"),
    (b"BLP2", "BLP"),
    (b"FORM", "IFF"),
    (b"\x01\xda", "SGI"),
    (b"/* XPM */", "XPM"),
    (b"#define", "XBM"),
    (b"<svg", "SVG"),
    (b"<?xml", "XML (SVG?)"),
    (b"\x1a\x45\xdf\xa3", "WebM/MKV video"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"\x1f\x8b", "gzip data"),
    (b"\x7fELF", "executable"),
    (b"MZ", "executable"),
)
_HEIF_BRANDS: Final = frozenset({b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1"})
_AVIF_BRANDS: Final = frozenset({b"avif", b"avis"})
_QUICKTIME_ATOMS: Final = frozenset({b"moov", b"mdat", b"wide", b"free", b"skip", b"pnot"})
_TGA_FOOTER: Final = b"TRUEVISION-XFILE.\x00"
HEAD_BYTES: Final = 64
"""Bytes of the start of a file that `describe` and `video_demuxer` look at."""


def describe(head: bytes, tail: bytes = b"") -> str | None:
    """Name the format of a file from its first bytes (and last 26, for TGA), or None.

    Args:
        head: The file's first `HEAD_BYTES` bytes (fewer when it is shorter).
        tail: Its last 26 bytes, where a TGA 2.0 file keeps its signature.

    Returns:
        A short name (``JPEG``, ``TIFF``, ``MP4/MOV video``, ...), one of `ACCEPTED` for those.
    """
    if tail.endswith(_TGA_FOOTER):  # before the prefixes: a TGA header can look like an icon's
        return "TGA"
    if head[:4] == b"RIFF" and len(head) >= 12:
        return {b"WEBP": "WEBP", b"AVI ": "AVI video", b"WAVE": "WAV audio"}.get(head[8:12], "RIFF data")
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in _HEIF_BRANDS:
            return "HEIF"
        if brand in _AVIF_BRANDS:
            return "AVIF"
        return "MP4/MOV video"
    for prefix, name in _PREFIXES:
        if head.startswith(prefix):
            return name
    if len(head) >= 3 and head[:1] == b"P" and head[1:2] in b"1234567" and head[2:3].isspace():
        return "PNM (PPM/PGM/PBM)"
    if len(head) >= 3 and head[0] == 0x0A and head[1] in (0, 2, 3, 4, 5) and head[2] == 1:
        return "PCX"
    return None


def refusal(name: str | None) -> str:
    """The one-line reason an image file is not decoded."""
    if name is None:
        return f"not a recognised image format (vhd reads {ACCEPTED_TEXT}; convert the file to one of them)"
    if name in ACCEPTED:
        return f"corrupt {name} header (the file starts like a {name} but cannot be read; re-download or re-export it)"
    return f"{name} file: not an accepted image format (vhd reads {ACCEPTED_TEXT}; convert it to one of them)"


def _ends(source: bytes | str | os.PathLike[str]) -> tuple[bytes, bytes]:
    if isinstance(source, bytes):
        return source[:HEAD_BYTES], source[-26:]
    try:
        with open(source, "rb") as fh:
            head = fh.read(HEAD_BYTES)
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - 26))
            return head, fh.read()
    except OSError:
        return b"", b""


@functools.cache
def _register_plugins() -> None:
    """Load the accepted formats' plugins (WebP is not among Pillow's preloaded ones).

    With every format of `ACCEPTED` registered, `PIL.Image.open` never needs to load the others.
    """
    from PIL import Image

    Image.preinit()
    with contextlib.suppress(ImportError):  # a Pillow without WebP: WebP files are then unreadable
        from PIL import WebPImagePlugin  # noqa: F401


def open_untrusted(source: bytes | str | os.PathLike[str]) -> Image.Image:
    """Open an untrusted image lazily with the accepted formats' plugins only (nothing decoded yet).

    Which plugin reads the file is decided by its content, never its name; a TIFF, TGA, PSD, DDS,
    EPS (Ghostscript) or any other format is refused before any parser of that format runs.

    Args:
        source: The file's bytes or its path.

    Returns:
        The opened image (``format`` is one of `ACCEPTED`, or ``MPO`` for a multi-picture JPEG).
        Use it as a context manager, or call ``load()``, to release a file opened by path.

    Raises:
        MediaError: One line naming the format found and the accepted ones; or the file cannot be
            read, or declares a size Pillow refuses as a decompression bomb.
    """
    from PIL import Image, UnidentifiedImageError

    _register_plugins()
    try:
        return Image.open(io.BytesIO(source) if isinstance(source, bytes) else source, formats=ACCEPTED)
    except UnidentifiedImageError as exc:
        raise MediaError(refusal(describe(*_ends(source)))) from exc
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise MediaError(f"image too large, possible decompression bomb ({_reason(exc)})") from exc
    except OSError as exc:
        if not isinstance(source, bytes):
            raise MediaError(f"cannot read file ({_reason(exc)})") from exc
        raise MediaError(f"corrupt image header ({_reason(exc)})") from exc
    except Exception as exc:
        raise MediaError(f"corrupt image header ({_reason(exc)})") from exc


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "no details"
    return f"{type(exc).__name__}: {text}"


# --- videos ------------------------------------------------------------------------------


def video_demuxer(head: bytes) -> str | None:
    """The FFmpeg demuxer a video may be opened with, from its first bytes; None when refused.

    Returns:
        ``mov`` (MP4, MOV, M4V), ``matroska`` (WebM, MKV) or ``avi``.
    """
    if head[4:8] == b"ftyp":
        return None if head[8:12] in _HEIF_BRANDS | _AVIF_BRANDS else "mov"
    if head[4:8] in _QUICKTIME_ATOMS and int.from_bytes(head[:4], "big") >= 8:
        return "mov"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "matroska"
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        return "avi"
    return None


DEFAULT_MAX_FRAME_PIXELS: Final = 7680 * 4320
"""Default pixel limit of one video or animation frame: 8K UHD, the largest standard video frame."""


def frame_pixels_refusal(what: str, width: int, height: int, limit: int, *, decoded: bool = False) -> str:
    """The one-line reason a video or an animation is refused for its frame size.

    ``decoded``: the size is that of a frame already decoded (the refusal says so, not "before decoding").
    """
    when = "refused at the first such frame decoded" if decoded else "refused before decoding"
    return (
        f"{what} frames are {width}x{height} = {width * height:,} pixels, over the frame limit of {limit:,} "
        f"(possible decompression bomb; {when}; raise max_frame_pixels to accept it)"
    )


def video_refusal(head: bytes) -> str:
    """The one-line reason a file is not opened as a video."""
    name = describe(head)
    what = "not a recognised video format" if name is None else f"{name} file: not an accepted video format"
    return f"{what} (vhd reads {VIDEO_TEXT}; convert it to one of them)"


# --- damage --------------------------------------------------------------------------------

STRICT: Final[dict[str, str]] = {"err_detect": "explode"}
"""FFmpeg decoder options that turn concealed decoding errors into errors."""

_OFF: Final = f"JPEG damage check is off: PyAV is not installed ({pip_install(repr('vhd[video]'))} to turn it on)"


def _pyav() -> Any | None:
    try:
        import av
    except ImportError:
        _warn_once(_OFF)
        return None
    return av


@functools.cache
def _warn_once(message: str) -> None:
    _log.warning(message)


def damage_check_note() -> str | None:
    """Why JPEG damage is not checked (PyAV missing), or None when it is."""
    try:
        import av  # noqa: F401
    except ImportError:
        return _OFF
    return None


def _mjpeg(av: Any, data: bytes, options: dict[str, str]) -> int:
    """Decode one JPEG with FFmpeg's MJPEG decoder at 1/8 scale; the number of pictures."""
    ctx = av.CodecContext.create("mjpeg", "r")
    ctx.thread_count = 1
    ctx.options = {**options, "lowres": "3"}
    frames = ctx.decode(av.Packet(data))
    frames += ctx.decode(None)
    return len(frames)


def jpeg_damage(data: bytes) -> str | None:
    """Check a JPEG for corrupted data that decoders conceal; the reason when damaged, else None.

    The bytes are decoded by FFmpeg with ``err_detect=explode``. An error there is damage when
    FFmpeg decodes the same bytes without the strict check (it concealed something); when it
    cannot decode them at all (a JPEG feature it lacks, such as arithmetic coding), nothing is
    concluded. Without PyAV nothing is checked (see `damage_check_note`).

    Args:
        data: A JPEG file's bytes (already decoded by Pillow without error).

    Returns:
        ``damaged: ...`` (one line, with what to do), or None.
    """
    av = _pyav()
    if av is None:
        return None
    try:
        _mjpeg(av, data, STRICT)
        return None
    except av.error.FFmpegError:
        pass
    try:
        if _mjpeg(av, data, {}) == 0:
            return None
    except av.error.FFmpegError:  # FFmpeg cannot read this JPEG at all: no conclusion
        return None
    return (
        "damaged: JPEG data has decoding errors (found by FFmpeg's strict check); its pixels would be "
        "partly garbage, so it is skipped (re-download or re-export it)"
    )
