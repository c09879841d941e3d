"""Tell images and videos apart from everything else by their first bytes (magic numbers).

A downloaded file's type is never taken from its ``Content-Type`` header or its URL's extension:
both are set by whoever serves it. `sniff` reads the signature at the start of the content and
names the container, the media kind and the extension vhd stores it under. Only the formats
that the rest of vhd reads are accepted; other recognisable formats get a name in the rejection
reason (`describe`) so a report says what was actually served.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from vhd.records import Kind

SNIFF_BYTES: Final = 64
"""Bytes `sniff` needs to decide (fewer are accepted when the content is shorter)."""


@dataclass(frozen=True)
class MediaType:
    """A recognised media container.

    Attributes:
        kind: Image or video.
        name: Short format name (``jpeg``, ``png``, ``mp4``...).
        ext: File extension vhd stores it under, with the dot.
        mime: The MIME type it is known by.
    """

    kind: Kind
    name: str
    ext: str
    mime: str


JPEG: Final = MediaType(Kind.IMAGE, "jpeg", ".jpg", "image/jpeg")
PNG: Final = MediaType(Kind.IMAGE, "png", ".png", "image/png")
GIF: Final = MediaType(Kind.IMAGE, "gif", ".gif", "image/gif")
WEBP: Final = MediaType(Kind.IMAGE, "webp", ".webp", "image/webp")
BMP: Final = MediaType(Kind.IMAGE, "bmp", ".bmp", "image/bmp")
MP4: Final = MediaType(Kind.VIDEO, "mp4", ".mp4", "video/mp4")
MOV: Final = MediaType(Kind.VIDEO, "mov", ".mov", "video/quicktime")
WEBM: Final = MediaType(Kind.VIDEO, "webm", ".webm", "video/webm")
MKV: Final = MediaType(Kind.VIDEO, "mkv", ".mkv", "video/x-matroska")
AVI: Final = MediaType(Kind.VIDEO, "avi", ".avi", "video/x-msvideo")

_IMAGE_BRANDS: Final = frozenset(
    {b"avif", b"avis", b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1"}
)
_QUICKTIME_ATOMS: Final = frozenset({b"moov", b"mdat", b"wide", b"free", b"skip", b"pnot"})
_OTHER: Final[tuple[tuple[bytes, str], ...]] = (
    (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"II*\x00", "a TIFF image (not supported)"),
    (b"MM\x00*", "a TIFF image (not supported)"),
    (b"\x00\x00\x01\x00", "an ICO icon (not supported)"),
    (b"ID3", "MP3 audio"),
    (b"OggS", "an Ogg stream (not supported)"),
    (b"fLaC", "FLAC audio"),
    (b"\x7fELF", "an executable"),
    (b"MZ", "an executable"),
)


def _iso_bmff(head: bytes) -> MediaType | None:
    """MP4 and QuickTime: a box size, then ``ftyp`` and a major brand (or a bare QuickTime atom)."""
    box = head[4:8]
    if box == b"ftyp":
        brand = head[8:12]
        if brand in _IMAGE_BRANDS:
            return None
        return MOV if brand == b"qt  " else MP4
    if box in _QUICKTIME_ATOMS and int.from_bytes(head[:4], "big") >= 8:
        return MOV
    return None


def _matroska(head: bytes) -> MediaType | None:
    if not head.startswith(b"\x1a\x45\xdf\xa3"):
        return None
    return WEBM if b"webm" in head[:SNIFF_BYTES] else MKV


def _bmp(head: bytes) -> MediaType | None:
    """BMP is only two letters of magic: also check the declared header size and reserved bytes."""
    if len(head) < 18 or not head.startswith(b"BM") or head[6:10] != b"\x00\x00\x00\x00":
        return None
    header_size = int.from_bytes(head[14:18], "little")
    return BMP if header_size in (12, 40, 52, 56, 64, 108, 124) else None


def sniff(head: bytes) -> MediaType | None:
    r"""Return the media type the content starts like, or None when it is not a supported one.

    Args:
        head: The first bytes of the content (`SNIFF_BYTES` are enough; fewer work when the
            content is shorter).

    Returns:
        The recognised image or video container, or None.

    Example:
        >>> sniff(b"\x89PNG\r\n\x1a\n" + bytes(8)).name
        'png'
    """
    if head.startswith(b"\xff\xd8\xff"):
        return JPEG
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if head.startswith((b"GIF87a", b"GIF89a")):
        return GIF
    if head.startswith(b"RIFF") and len(head) >= 12:
        if head[8:12] == b"WEBP":
            return WEBP
        if head[8:12] == b"AVI ":
            return AVI
        return None
    return _iso_bmff(head) or _matroska(head) or _bmp(head)


def describe(head: bytes) -> str:
    """Say in a few words what unsupported content looks like, for rejection reasons.

    Args:
        head: The first bytes of the content.

    Returns:
        A phrase such as ``"an HTML page"``, ``"empty content"`` or ``"unrecognised binary data"``.
    """
    if not head:
        return "empty content"
    if head[4:8] == b"ftyp" and head[8:12] in _IMAGE_BRANDS:
        return f"an {head[8:12].decode('ascii').strip().upper()} image (not supported)"
    for magic, what in _OTHER:
        if head.startswith(magic):
            return what
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<!--")):
        return "an HTML page"
    if text.startswith(b"<?xml") or text.startswith(b"<svg"):
        return "XML or SVG text (not a supported image)"
    if text.startswith((b"{", b"[")):
        return "JSON text"
    if all(32 <= b < 127 or b in (9, 10, 13) for b in head[:SNIFF_BYTES]):
        return "plain text"
    return "unrecognised binary data"
