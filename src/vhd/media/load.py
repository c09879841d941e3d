"""Turn a discovered media item into a sample record plus the encoded images a model sees."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.config import MediaConfig
from vhd.errors import ConfigError, MediaError
from vhd.fileio import display_path
from vhd.media.budget import decode_budget, video_file_cost
from vhd.media.clip import ClipLimits, cut_clip
from vhd.media.discover import frame_folder_frames
from vhd.media.encoded import EncodedImage, EncodedVideo
from vhd.media.hashing import combine_hashes, is_sha256_hex, sha256_bytes, sha256_file
from vhd.media.image import (
    FORMATS,
    ImageLimits,
    decode_cost,
    encode_image,
    encode_image_bytes,
    read_image_bytes,
)
from vhd.media.video import DEFAULT_FIRST, DEFAULT_FRAMES, frame_indices, read_frames
from vhd.records import Kind, MediaItem, Sample

PIPELINE_VERSION = 1
"""Bumped whenever decoding or encoding changes what a model is shown for the same settings."""


@dataclass(frozen=True)
class MediaSettings:
    """How media is prepared for the models.

    Attributes:
        max_side: Longest side in pixels of every image sent.
        fmt: Encoding sent to the models: ``jpeg``, ``png`` or ``webp``.
        quality: JPEG/WebP quality (1-100).
        n_frames: Frames shown per video.
        first_frames: Only the first this-many frames of a video are sampled.
        limits: Size limits for image files, and the frame size limit of videos and animations.
        decode_memory: Bytes every `load_sample` of the process may hold decoding at once, shared
            by all its threads (`vhd.media.budget`); None: `vhd.media.budget.DEFAULT_DECODE_MEMORY`.
        clip: With native video input, the bounds of the clip a video file is also shown as (its
            first ``clip.seconds`` seconds); None: frames only.
    """

    max_side: int = 1024
    fmt: str = "jpeg"
    quality: int = 90
    n_frames: int = DEFAULT_FRAMES
    first_frames: int = DEFAULT_FIRST
    limits: ImageLimits = field(default_factory=ImageLimits)
    decode_memory: int | None = None
    clip: ClipLimits | None = None

    def __post_init__(self) -> None:
        fmt = self.fmt.lower()
        if fmt == "jpg":
            fmt = "jpeg"
        if fmt not in FORMATS:
            raise ConfigError(f"unknown image format {self.fmt!r}; choose one of {', '.join(FORMATS)}")
        object.__setattr__(self, "fmt", fmt)
        if self.max_side < 16:
            raise ConfigError(f"max_side must be at least 16 pixels, got {self.max_side}")
        if not 1 <= self.quality <= 100:
            raise ConfigError(f"image quality must be between 1 and 100, got {self.quality}")
        if self.n_frames < 1:
            raise ConfigError(f"frames per video must be at least 1, got {self.n_frames}")
        if self.first_frames < 1:
            raise ConfigError(f"first_frames must be at least 1, got {self.first_frames}")
        if self.decode_memory is not None and self.decode_memory < 1:
            raise ConfigError(f"decode_memory must be at least 1 byte, got {self.decode_memory}")

    def identity(self) -> dict[str, Any]:
        """Return the settings that change what a model is shown (for configuration hashes).

        Limits are left out: they decide whether a file is accepted, not how it looks.
        """
        clip = {} if self.clip is None else self.clip.identity()
        return clip | {
            "media_pipeline": PIPELINE_VERSION,
            "max_side": self.max_side,
            "fmt": self.fmt,
            "quality": self.quality,
            "n_frames": self.n_frames,
            "first_frames": self.first_frames,
        }


def clip_limits(m: MediaConfig) -> ClipLimits:
    """The clip bounds of native video input from the configuration's ``[media]`` table."""
    return ClipLimits(
        seconds=m.clip_seconds,
        fps=m.clip_fps,
        max_side=m.clip_max_side,
        max_bytes=int(m.clip_max_mb * 2**20),
        max_pixels=m.max_frame_pixels,
    )


def media_settings(m: MediaConfig, *, native: bool = False) -> MediaSettings:
    """`MediaSettings` from the configuration's ``[media]`` table (``native``: video files get a clip too)."""
    limits = ImageLimits(
        max_pixels=m.max_pixels, max_bytes=int(m.max_file_mb * 1024 * 1024), max_frame_pixels=m.max_frame_pixels
    )
    return MediaSettings(
        max_side=m.max_side,
        fmt=m.format,
        quality=m.quality,
        n_frames=m.frames,
        first_frames=m.first_frames,
        limits=limits,
        decode_memory=int(m.decode_memory_mb * 2**20),
        clip=clip_limits(m) if native else None,
    )


@dataclass
class LoadedSample:
    """A sample ready for annotation.

    Attributes:
        sample: The record (content-hash id, kind, path, frames, manifest fields).
        images: What the models see: one image, or a video's frames in chronological order.
        clip: With native video input (`MediaSettings.clip`), a video file's first seconds as one
            clip (`vhd.media.clip.cut_clip`); None otherwise and for images and frame folders.
    """

    sample: Sample
    images: list[EncodedImage]
    clip: EncodedVideo | None = None


def _encode_image_file(item: MediaItem, settings: MediaSettings) -> tuple[str, EncodedImage]:
    data = read_image_bytes(item.path, settings.limits)
    encoded = encode_image_bytes(
        data,
        max_side=settings.max_side,
        limits=settings.limits,
        fmt=settings.fmt,
        quality=settings.quality,
    )
    return sha256_bytes(data), encoded


def _load_frame_folder(item: MediaItem, settings: MediaSettings) -> tuple[str, list[int], list[EncodedImage]]:
    frames = frame_folder_frames(item.path)
    if frames is None:
        raise MediaError("folder is not (or no longer) a frame folder of <stem>_<k:04d> images")
    chosen = set(frame_indices(len(frames), settings.n_frames, settings.first_frames))
    hashes: list[str] = []
    images: list[EncodedImage] = []
    for k, frame in enumerate(frames):
        try:
            if k in chosen:
                data = read_image_bytes(frame, settings.limits)
                hashes.append(sha256_bytes(data))
                images.append(
                    encode_image_bytes(
                        data,
                        max_side=settings.max_side,
                        limits=settings.limits,
                        fmt=settings.fmt,
                        quality=settings.quality,
                    )
                )
            else:
                hashes.append(sha256_file(frame))
        except MediaError as exc:
            raise MediaError(f"frame {frame.name}: {exc}") from exc
        except OSError as exc:
            raise MediaError(f"frame {frame.name}: cannot read file ({exc.strerror})") from exc
    return combine_hashes(hashes), sorted(chosen), images


def _load_clip(item: MediaItem, limits: ClipLimits) -> EncodedVideo:
    return cut_clip(
        item.path,
        0.0,
        limits.seconds,
        max_side=limits.max_side,
        fps=limits.fps,
        max_bytes=limits.max_bytes,
        max_pixels=limits.max_pixels,
    )


def _load_video_file(item: MediaItem, settings: MediaSettings) -> tuple[str, list[int], list[EncodedImage]]:
    frames = read_frames(
        item.path, settings.n_frames, settings.first_frames, max_pixels=settings.limits.effective_max_frame_pixels
    )
    images = [
        encode_image(img, max_side=settings.max_side, fmt=settings.fmt, quality=settings.quality)
        for img in frames.images
    ]
    try:
        digest = sha256_file(item.path)
    except OSError as exc:
        raise MediaError(f"cannot read file ({exc.strerror})") from exc
    return digest, frames.indices, images


def _decode_cost(item: MediaItem, folder: bool, settings: MediaSettings) -> int:
    """What decoding an item may hold, from its header only.

    1 MiB when the header cannot be read: the decode itself then says what is wrong.
    """
    from vhd.media.untrusted import open_untrusted

    if item.kind is not Kind.IMAGE and not folder:
        return video_file_cost(item.path, settings.n_frames)
    try:
        first = frame_folder_frames(item.path) if folder else [Path(item.path)]
        if not first:
            return 2**20
        with open_untrusted(first[0]) as img:  # the header only
            return decode_cost(img, settings.max_side)
    except (OSError, MediaError):
        return 2**20


def sample_id(item: MediaItem) -> str:
    """Return an item's content-hash id without decoding it (cheap: hashing only).

    This is the id `load_sample` gives the sample: the sha256 of the file's bytes, or for a
    frame folder the sha256 of its frames' hex digests concatenated in frame order. A
    manifest's sha256 ``id`` is not checked here (`load_sample` does that).

    Args:
        item: An item from `vhd.media.discover.discover`.

    Returns:
        The 64-character hex id.

    Raises:
        MediaError: The file or a frame cannot be read, or the folder is no longer a frame
            folder.
    """
    path = Path(item.path)
    if item.is_frame_folder or path.is_dir():
        frames = frame_folder_frames(path)
        if frames is None:
            raise MediaError("folder is not (or no longer) a frame folder of <stem>_<k:04d> images")
        try:
            return combine_hashes(sha256_file(frame) for frame in frames)
        except OSError as exc:
            raise MediaError(f"cannot read frame ({exc.strerror})") from exc
    try:
        return sha256_file(path)
    except OSError as exc:
        raise MediaError(f"cannot read file ({exc.strerror})") from exc


def load_sample(item: MediaItem, settings: MediaSettings | None = None) -> LoadedSample:
    """Read, validate, hash and encode one item.

    Safe to call from several threads at once (no shared state).

    Args:
        item: An item from `vhd.media.discover.discover`.
        settings: How to prepare the media; defaults to `MediaSettings()`.

    Returns:
        The sample record and its encoded images.

    Raises:
        MediaError: The media is unreadable, corrupt, over a limit, or its content hash
            differs from the sha256 id its manifest gives.
        MissingDependencyError: A video needs PyAV and it is not installed.
    """
    settings = settings or MediaSettings()
    path = Path(item.path)
    frames: list[int] = []
    clip: EncodedVideo | None = None
    folder = item.kind is not Kind.IMAGE and (item.is_frame_folder or path.is_dir())
    with decode_budget(settings.decode_memory).hold(_decode_cost(item, folder, settings)):
        if item.kind is Kind.IMAGE:
            digest, encoded = _encode_image_file(item, settings)
            images = [encoded]
        elif folder:
            digest, frames, images = _load_frame_folder(item, settings)
        else:
            digest, frames, images = _load_video_file(item, settings)
            if settings.clip is not None:
                clip = _load_clip(item, settings.clip)

    return LoadedSample(sample=_record(item, path, digest, frames), images=images, clip=clip)


def describe_sample(item: MediaItem) -> Sample:
    """The sample record of a video file without decoding it: hashed, its manifest id checked, no frames.

    For a video judged segment by segment (``[video] segments``), whose one decode is the segment
    pass: the whole-video protocol's frames (`load_sample`) are only read when that pass fails,
    so ``frames`` is left empty (unknown; a store keeps frames it already has).

    Raises:
        MediaError: The file cannot be read, or its content hash differs from its manifest's id.
    """
    path = Path(item.path)
    try:
        digest = sha256_file(path)
    except OSError as exc:
        raise MediaError(f"cannot read file ({exc.strerror})") from exc
    return _record(item, path, digest, [])


def _record(item: MediaItem, path: Path, digest: str, frames: list[int]) -> Sample:
    """The sample record of an item whose content hash is ``digest`` (the manifest's id checked)."""
    meta: dict[str, Any] = dict(item.meta)
    if item.id is not None:
        if is_sha256_hex(item.id):
            if item.id.lower() != digest:
                raise MediaError(
                    f"content hash {digest[:12]}... differs from the manifest id "
                    f"{item.id[:12]}...; the file changed or the manifest is wrong"
                )
        else:
            meta["id"] = item.id
    return Sample(
        id=digest,
        kind=item.kind,
        path=display_path(path),
        source=item.source,
        keyword=item.keyword,
        generator=item.generator,
        split=item.split,
        harmful=item.harmful,
        frames=frames,
        meta=meta,
    )
