"""An image already encoded for sending to a model, encoded once and reused by every call."""

from __future__ import annotations

import base64
import hashlib
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image


class EncodedImage:
    """Compressed image bytes plus what backends need from them.

    The base64 data URL is computed on first use and cached, so a sample's image is encoded
    once per sample and an in-context example once per run, however many calls send it.

    Attributes:
        data: The encoded bytes (JPEG or PNG).
        mime: MIME type of ``data``.
        width: Pixel width.
        height: Pixel height.
    """

    __slots__ = ("__dict__", "data", "height", "mime", "width")

    def __init__(self, data: bytes, mime: str, width: int, height: int) -> None:
        self.data = data
        self.mime = mime
        self.width = width
        self.height = height

    def __repr__(self) -> str:
        return f"EncodedImage({self.mime}, {self.width}x{self.height}, {len(self.data)} bytes)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EncodedImage) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.sha256)

    @cached_property
    def sha256(self) -> str:
        """Hex sha256 of the encoded bytes."""
        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def data_url(self) -> str:
        """``data:<mime>;base64,...`` as OpenAI-compatible APIs take it."""
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"

    def to_pil(self) -> Image.Image:
        """Decode to an RGB Pillow image (for local backends)."""
        from vhd.media.untrusted import open_untrusted

        with open_untrusted(self.data) as im:
            return im.convert("RGB")
