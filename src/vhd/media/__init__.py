"""Media: find, validate, hash and encode images and videos for the models.

The public names below load their modules on first use, so importing `vhd.media` (or
`vhd.media.encoded`, which every backend does) stays cheap; PyAV is imported only when a video
is actually read.

Example:
    >>> from vhd.media import discover, load_sample
    >>> found = discover(["photos/", "labels.csv"])  # doctest: +SKIP
    >>> loaded = [load_sample(item) for item in found.items]  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhd.lazy import lazy_exports

if TYPE_CHECKING:
    from vhd.media.discover import Discovery, Skipped, discover, frame_folder_frames, iter_discover
    from vhd.media.encoded import EncodedImage
    from vhd.media.hashing import sha256_file
    from vhd.media.image import (
        ImageLimits,
        encode_image,
        encode_image_bytes,
        load_image_encoded,
        open_image,
        open_untrusted,
    )
    from vhd.media.load import LoadedSample, MediaSettings, load_sample, sample_id
    from vhd.media.video import VideoFrames, frame_indices, read_frames, write_frames
    from vhd.records import MediaItem

_EXPORTS = {
    "Discovery": "vhd.media.discover",
    "MediaItem": "vhd.records",
    "Skipped": "vhd.media.discover",
    "discover": "vhd.media.discover",
    "frame_folder_frames": "vhd.media.discover",
    "iter_discover": "vhd.media.discover",
    "EncodedImage": "vhd.media.encoded",
    "sha256_file": "vhd.media.hashing",
    "ImageLimits": "vhd.media.image",
    "encode_image": "vhd.media.image",
    "encode_image_bytes": "vhd.media.image",
    "load_image_encoded": "vhd.media.image",
    "open_image": "vhd.media.image",
    "open_untrusted": "vhd.media.image",
    "LoadedSample": "vhd.media.load",
    "MediaSettings": "vhd.media.load",
    "load_sample": "vhd.media.load",
    "sample_id": "vhd.media.load",
    "VideoFrames": "vhd.media.video",
    "frame_indices": "vhd.media.video",
    "read_frames": "vhd.media.video",
    "write_frames": "vhd.media.video",
}

__all__ = [
    "Discovery",
    "EncodedImage",
    "ImageLimits",
    "LoadedSample",
    "MediaItem",
    "MediaSettings",
    "Skipped",
    "VideoFrames",
    "discover",
    "encode_image",
    "encode_image_bytes",
    "frame_folder_frames",
    "frame_indices",
    "iter_discover",
    "load_image_encoded",
    "load_sample",
    "open_image",
    "open_untrusted",
    "read_frames",
    "sample_id",
    "sha256_file",
    "write_frames",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
