"""Previews the review app sends: blurred on the server by default, a video as its 5 frames.

What leaves the server by default is a small, Gaussian-blurred JPEG: at 128 px its edge energy
(`edge_energy`) is at most half the original's, for every sample (the tests check it on the
example media). Stronger blur and grayscale are reviewer-comfort settings; nothing weaker than the
default is offered. The clear image is made only when the caller asks for it (a click per sample
in the app, and never under ``--no-reveal``).

Media are found through the store only (`vhd.records.Sample`): no request ever names a file.
Recently made previews are kept in a small bounded cache (memory does not grow with the store).
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vhd.errors import MediaError
from vhd.media.discover import frame_folder_frames
from vhd.media.image import open_image
from vhd.media.video import DEFAULT_FRAMES, frame_indices, read_frames
from vhd.records import Kind, Sample

if TYPE_CHECKING:
    from PIL import Image

THUMB_SIDE = 256
"""Longest side of a blurred preview, in pixels."""

CLEAR_SIDE = 768
"""Longest side of a revealed (clear) image."""

BLUR_RADII = {1: 8.0, 2: 12.0, 3: 18.0}
"""Gaussian radius (pixels at `THUMB_SIDE`) per blur strength; 1 is the default and the weakest."""

CHECK_SIDE = 128
"""The size at which `edge_energy` is compared (the safety check of the previews)."""


@dataclass(frozen=True)
class Look:
    """How a preview is drawn.

    Attributes:
        blur: Blur strength (a key of `BLUR_RADII`); ignored when ``clear``.
        gray: Grayscale.
        clear: The unblurred image (only after a click, never under ``--no-reveal``).
    """

    blur: int = 1
    gray: bool = False
    clear: bool = False


def sample_frames(sample: Sample, n: int = DEFAULT_FRAMES) -> list[Image.Image]:
    """The images a sample is shown as: one for an image, ``n`` evenly spaced frames for a video.

    Raises:
        MediaError: The media is missing, unreadable or damaged.
    """
    path = Path(sample.path)
    if sample.kind is Kind.IMAGE:
        return [open_image(path)]
    if path.is_dir():
        frames = frame_folder_frames(path)
        if frames is None:
            raise MediaError("the frame folder is gone or changed")
        return [open_image(frames[i]) for i in frame_indices(len(frames), n)]
    if not path.is_file():
        raise MediaError("the video file is gone")
    return list(read_frames(path, n).images)


def render(image: Image.Image, look: Look) -> Image.Image:
    """Scale and (unless clear) blur one image as the app sends it."""
    from PIL import ImageFilter, ImageOps

    out = image.convert("RGB")
    out.thumbnail((CLEAR_SIDE, CLEAR_SIDE) if look.clear else (THUMB_SIDE, THUMB_SIDE))
    if not look.clear:
        out = out.filter(ImageFilter.GaussianBlur(BLUR_RADII.get(look.blur, BLUR_RADII[1])))
    if look.gray:
        out = ImageOps.grayscale(out).convert("RGB")
    return out


def jpeg(image: Image.Image) -> bytes:
    """Encode as JPEG (no metadata)."""
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def edge_energy(image: Image.Image, side: int = CHECK_SIDE) -> float:
    """Mean squared response of an edge filter on the grayscale image scaled to ``side`` px (longest side).

    A blurred preview must keep at most half of the original's (`vhd serve`'s safety rule).
    """
    from PIL import ImageFilter, ImageOps, ImageStat

    gray = ImageOps.grayscale(image.convert("RGB"))
    gray.thumbnail((side, side))
    edges = gray.filter(ImageFilter.FIND_EDGES)
    # drop the outer pixel ring: FIND_EDGES reads outside the image there
    w, h = edges.size
    if w > 2 and h > 2:
        edges = edges.crop((1, 1, w - 1, h - 1))
    return float(sum(ImageStat.Stat(edges).sum2) / max(1, edges.size[0] * edges.size[1]))


class PreviewCache:
    """The last ``size`` previews made, keyed by sample, frame and look (thread-safe, bounded)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, int, Look], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, sample: Sample, frame: int, look: Look) -> bytes:
        """The preview's JPEG bytes, made on first use.

        Raises:
            MediaError: The media cannot be read, or the frame does not exist.
        """
        key = (sample.id, frame, look)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        images = sample_frames(sample)  # a video is decoded once for all its frames
        if not 0 <= frame < len(images):
            raise MediaError(f"sample {sample.id[:12]} has {len(images)} frame(s), not {frame + 1}")
        made = {k: jpeg(render(image, look)) for k, image in enumerate(images)}
        with self._lock:
            for k, data in made.items():
                self._items[(sample.id, k, look)] = data
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return made[frame]
