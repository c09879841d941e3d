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


class EncodedVideo:
    """A bounded video clip encoded for sending to a model (MP4, H.264, yuv420p).

    Made by `vhd.media.clip.cut_clip`; like `EncodedImage` its base64 data URL is computed once
    and cached, so a clip shown to every role of a debate is encoded once.

    Attributes:
        data: The MP4 bytes.
        mime: ``video/mp4``.
        width: Pixel width of the clip's frames.
        height: Pixel height.
        start_s: Start of the span the clip shows, in seconds from the video's first decoded frame.
        end_s: End of that span (the requested end, or earlier when the clip was capped).
        frames: Frames in the clip.
        fps: The frame rate the clip was re-encoded at (at most; a sparse source gives fewer).
        capped: The requested span was longer than the clip's duration cap and was cut short.
    """

    __slots__ = ("__dict__", "capped", "data", "end_s", "fps", "frames", "height", "mime", "start_s", "width")

    def __init__(
        self,
        data: bytes,
        *,
        width: int,
        height: int,
        start_s: float,
        end_s: float,
        frames: int,
        fps: float,
        capped: bool = False,
        mime: str = "video/mp4",
    ) -> None:
        self.data = data
        self.mime = mime
        self.width = width
        self.height = height
        self.start_s = start_s
        self.end_s = end_s
        self.frames = frames
        self.fps = fps
        self.capped = capped

    def __repr__(self) -> str:
        return (
            f"EncodedVideo({self.mime}, {self.width}x{self.height}, {self.start_s:.2f}-{self.end_s:.2f} s, "
            f"{self.frames} frames, {len(self.data)} bytes)"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EncodedVideo) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.sha256)

    @property
    def duration_s(self) -> float:
        """Seconds of the source the clip spans."""
        return self.end_s - self.start_s

    @cached_property
    def sha256(self) -> str:
        """Hex sha256 of the encoded bytes."""
        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def data_url(self) -> str:
        """``data:video/mp4;base64,...`` as vLLM's ``video_url`` part takes it."""
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"

    def to_frames(self) -> list[Image.Image]:
        """Decode the clip's frames to RGB Pillow images, in order (for local backends)."""
        return decode_clip(self.data)


def decode_clip(data: bytes) -> list[Image.Image]:
    """Decode an MP4 clip (`EncodedVideo.data`) into RGB Pillow images, in order, strictly.

    Raises:
        MediaError: The bytes are not a decodable clip.
        MissingDependencyError: PyAV is not installed.
    """
    import io

    from vhd.errors import MediaError, MissingDependencyError
    from vhd.media.videoframes import decode_strictly, strict

    try:
        import av
    except ImportError as exc:
        raise MissingDependencyError("av", "video") from exc
    try:
        with av.open(io.BytesIO(data), format="mov") as container:
            stream = container.streams.video[0]
            strict(stream)
            return [frame.to_image() for frame in decode_strictly(container, stream)]
    except MediaError:
        raise
    except (av.error.FFmpegError, OSError, ValueError, IndexError, EOFError) as exc:
        raise MediaError(f"cannot decode the clip ({type(exc).__name__}: {exc})") from exc
