"""Previews the review app sends: shape hidden by default, made once, decoded at a bounded cost.

**What a preview shows.** By default a preview hides shape, not only texture: the image is
shrunk to a few dozen pixels, blurred, its contrast lowered and (unless the reviewer chose
colour) turned gray, then scaled back up smoothly. A dark silhouette on white becomes a soft gray
smudge. The rule, checked by the tests on photos, silhouettes and line art: at 128 px the
preview's edge energy (`edge_energy`, mean absolute gradient) is at most a quarter of the
original's. Stronger levels (`LEVELS`) hide more; nothing weaker than level 1 is offered. The
clear image is made only when the caller asks for it (a deliberate click per sample in the app,
and never under ``--no-reveal``).

**What it costs.** A request never decodes an image at full size unless it has to: a JPEG is
decoded already scaled down (draft mode), any other image is decoded once and shrunk by an
integer factor at once (`vhd.media.image.open_image_reduced`). Decodes wait for room in a memory
budget (`MemoryBudget`, sized by ``--preview-memory``): what each one needs is read from the
file's header first, so many large images requested at once are decoded a few at a time, not all
together. The `vhd serve` process (its CLI entry, never this library) also has large blocks mapped
on their own (`map_large_allocations`) so that what a decode freed is not kept by the thread that
made it; a process that builds `PreviewCache` itself keeps its allocator's settings. Every
preview is made once: the first request writes it to a disk cache (`PreviewCache`,
content-addressed by sample id, which is the media's SHA-256, and look; atomic writes), and later
requests, from any browser or a later run of the app, read the file. After a burst of decodes
the process hands freed memory back to the system (``malloc_trim`` on glibc).

Media are found through the store only (`vhd.records.Sample`): no request ever names a file.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import shutil
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vhd.errors import MediaError
from vhd.fileio import atomic_write, path_within, regular_file_problem
from vhd.media.budget import MemoryBudget
from vhd.media.discover import frame_folder_frames
from vhd.media.image import decode_cost, open_image_bytes, open_image_reduced, open_untrusted, read_image_bytes
from vhd.media.video import DEFAULT_FRAMES, frame_indices, read_frames
from vhd.records import Kind, Sample

if TYPE_CHECKING:
    from PIL import Image

THUMB_SIDE = 256
"""Longest side of a preview, in pixels."""

CLEAR_SIDE = 768
"""Longest side of a revealed (clear) image: the base every look of a sample is drawn from."""

CHECK_SIDE = 128
"""The size at which `edge_energy` is compared (the safety check of the previews)."""

MAX_EDGE_RATIO = 0.25
"""The most edge energy a preview may keep of its original's (the tests check every look)."""

VERSION = "2"
"""Part of every cache key: changing how previews are drawn changes it, so old files are not served."""


@dataclass(frozen=True)
class Level:
    """How strongly a preview hides its image.

    Attributes:
        side: Longest side the image is shrunk to before being scaled back up.
        blur: Gaussian radius at that small size, in its pixels.
        contrast: Contrast kept (1 unchanged, 0 a flat gray).
    """

    side: int
    blur: float
    contrast: float


LEVELS = {1: Level(16, 1.5, 0.3), 2: Level(12, 1.6, 0.25), 3: Level(8, 1.8, 0.2)}
"""Preview levels; 1 is the default and the weakest offered."""

DEFAULT_LEVEL = 1


@dataclass(frozen=True)
class Look:
    """How a preview is drawn.

    Attributes:
        level: How strongly shape is hidden (a key of `LEVELS`); ignored when ``clear``.
        gray: Grayscale (the default; a reviewer may choose colour).
        clear: The clear image (only after a click, never under ``--no-reveal``).
    """

    level: int = DEFAULT_LEVEL
    gray: bool = True
    clear: bool = False

    @property
    def key(self) -> str:
        """The look's part of a cache file name."""
        return "clear" if self.clear else f"l{self.level}{'g' if self.gray else 'c'}"


def media_path(sample: Sample) -> Path:
    """The sample's media as the app may read it: its recorded path, unless a link leads it elsewhere.

    Ingest refuses a symbolic link that leads out of the scanned folder, but the file can be swapped
    for one later. The app reads the recorded path only while it (symbolic links resolved) stays in
    the folder the path names, and only a regular file or a frame folder: a link to a file elsewhere
    on disk, a FIFO or a device is never opened, previewed or sent.

    Raises:
        MediaError: The path leads out of its folder, or is not a regular file or folder.
    """
    path = Path(sample.path)
    if not path_within(path, [path.parent]):
        raise MediaError("the media's path leads out of its folder (a symbolic link); it is not shown")
    if not (path.is_file() or path.is_dir()):
        problem = regular_file_problem(path)
        raise MediaError(f"the media is {problem}" if problem else "the media file is gone")
    return path


def sample_frames(sample: Sample, n: int = DEFAULT_FRAMES, side: int | None = None) -> list[Image.Image]:
    """The images a sample is shown as: one for an image, ``n`` evenly spaced frames for a video.

    Args:
        sample: The sample.
        n: Frames of a video.
        side: Decode images no larger than needed for this longest side (`open_image_reduced`);
            None: at full size.

    Raises:
        MediaError: The media is missing, unreadable or damaged.
    """
    from vhd.media.image import open_image

    def still(file: Path) -> Image.Image:
        return open_image(file) if side is None else open_image_reduced(read_image_bytes(file), side)

    path = media_path(sample)
    if sample.kind is Kind.IMAGE:
        return [still(path)]
    if path.is_dir():
        frames = frame_folder_frames(path)
        if frames is None:
            raise MediaError("the frame folder is gone or changed")
        chosen = [frames[i] for i in frame_indices(len(frames), n)]
        if not all(path_within(frame, [path]) for frame in chosen):
            raise MediaError("a frame leads out of its frame folder (a symbolic link); it is not shown")
        return [still(frame) for frame in chosen]
    if not path.is_file():
        raise MediaError("the video file is gone")
    return list(read_frames(path, n).images)


def hide(image: Image.Image, level: Level, gray: bool = True) -> Image.Image:
    """The preview of an image: shrunk to a few dozen pixels, blurred, flattened and scaled back up smoothly."""
    from PIL import Image as PILImage
    from PIL import ImageEnhance, ImageFilter, ImageOps

    out = image.convert("RGB")
    if gray:
        out = ImageOps.grayscale(out)
    big = out.copy()
    big.thumbnail((THUMB_SIDE, THUMB_SIDE))
    size = big.size
    out.thumbnail((level.side, level.side), PILImage.Resampling.BOX)
    out = out.filter(ImageFilter.GaussianBlur(level.blur))
    out = ImageEnhance.Contrast(out).enhance(level.contrast)
    out = out.resize(size, PILImage.Resampling.BICUBIC)
    # the bicubic steps between the small pixels are themselves edges: smooth them away
    out = out.filter(ImageFilter.GaussianBlur(max(size) / level.side / 2))
    return out.convert("RGB")


def render(image: Image.Image, look: Look) -> Image.Image:
    """One image as the app sends it: the clear view scaled to `CLEAR_SIDE`, else its hidden preview."""
    if look.clear:
        out = image.convert("RGB")
        out.thumbnail((CLEAR_SIDE, CLEAR_SIDE))
        return out
    return hide(image, LEVELS.get(look.level, LEVELS[DEFAULT_LEVEL]), look.gray)


def jpeg(image: Image.Image, quality: int = 85) -> bytes:
    """Encode as JPEG (no metadata)."""
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def edge_energy(image: Image.Image, side: int = CHECK_SIDE) -> float:
    """Mean absolute gradient (0 to 1) of the grayscale image scaled to ``side`` px (longest side).

    The gradient is the difference between neighbouring pixels across and down, averaged over the
    image. A preview must keep at most `MAX_EDGE_RATIO` of its original's (`vhd serve`'s rule).
    """
    from PIL import ImageChops, ImageOps, ImageStat

    gray = ImageOps.grayscale(image.convert("RGB"))
    gray.thumbnail((side, side))
    w, h = gray.size
    if w < 2 or h < 2:
        return 0.0
    across = ImageChops.difference(gray.crop((1, 0, w, h)), gray.crop((0, 0, w - 1, h)))
    down = ImageChops.difference(gray.crop((0, 1, w, h)), gray.crop((0, 0, w, h - 1)))
    return (ImageStat.Stat(across).mean[0] + ImageStat.Stat(down).mean[0]) / 2 / 255


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (macOS, musl...): the allocator's defaults stay
        return None


def _malloc_trim() -> None:
    """Hand freed heap memory back to the system (glibc only; elsewhere nothing happens)."""
    libc = _libc()
    if libc is not None:
        with contextlib.suppress(AttributeError):
            libc.malloc_trim(0)


M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter: allocations this large or larger are mapped, and unmapped when freed."""


def map_large_allocations(threshold: int = 2**20) -> bool:
    """Have glibc map every allocation of ``threshold`` bytes or more on its own (process-wide).

    Only the `vhd serve` command calls it, in its own process: it changes every allocation of the
    whole process for good (a CPU torch loop ran about 20% slower with it), so a library building
    the review app must not.

    Pillow keeps a decoded image in blocks of up to 16 MiB. glibc's default raises its mapping
    threshold as such blocks are freed, after which they come from per-thread heaps, where the
    small allocations that follow pin them: each thread that decoded once kept its image's worth
    of memory (2.6 GB resident for 12 threads decoding 8000x8000 PNGs two at a time, 0.53 GB with
    this set). A fixed threshold keeps image blocks mapped, so their memory goes back to the system
    as soon as they are freed.

    Returns:
        Whether it was set (False off glibc).
    """
    libc = _libc()
    if libc is None:
        return False
    with contextlib.suppress(AttributeError):
        return bool(libc.mallopt(M_MMAP_THRESHOLD, threshold))
    return False


VIDEO_COST = 5 * 1920 * 1080 * 3 * 2
"""Budget a video's frames are decoded under (its size is not known before it is opened)."""


def _cost(sample: Sample) -> int:
    """What decoding a sample for its previews needs, from the file's header only."""
    if sample.kind is not Kind.IMAGE:
        return VIDEO_COST
    try:
        with open_untrusted(media_path(sample)) as img:  # the header only
            return decode_cost(img, CLEAR_SIDE)
    except (OSError, MediaError):
        return 2**20  # the decode itself will say what is wrong


class PreviewCache:
    """Previews made once and kept: on disk (when ``folder`` is given) and the newest few in memory.

    A preview's file is ``<folder>/<id[:2]>/<id>/<frame>-<look>-v<VERSION>.jpg`` (the id is the
    media's SHA-256); the clear view of each frame (``<frame>-clear-v<VERSION>.jpg``) is the base
    the other looks are drawn from, so the original media is decoded once per sample, under the
    memory budget. Files are written atomically; two requests for the same sample at once decode
    it once.

    Args:
        folder: Where previews are kept (created when needed); None: memory only.
        memory: The decode budget in bytes (`MemoryBudget`).
        size: Previews kept in memory.
    """

    def __init__(
        self, folder: str | os.PathLike[str] | None = None, memory: int = 768 * 2**20, size: int = 256
    ) -> None:
        self.folder = Path(folder) if folder is not None else None
        self.budget = MemoryBudget(memory, on_idle=_malloc_trim)
        self.size = size
        self._items: OrderedDict[tuple[str, int, Look], bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._making: dict[str, threading.Lock] = {}
        self.decodes = 0

    def _file(self, sample_id: str, frame: int, look: Look) -> Path | None:
        if self.folder is None:
            return None
        return self.folder / sample_id[:2] / sample_id / f"{frame}-{look.key}-v{VERSION}.jpg"

    def _remember(self, sample_id: str, frame: int, look: Look, data: bytes) -> None:
        with self._lock:
            self._items[(sample_id, frame, look)] = data
            self._items.move_to_end((sample_id, frame, look))
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def _read(self, sample_id: str, frame: int, look: Look) -> bytes | None:
        with self._lock:
            if (sample_id, frame, look) in self._items:
                self._items.move_to_end((sample_id, frame, look))
                return self._items[(sample_id, frame, look)]
        file = self._file(sample_id, frame, look)
        if file is None:
            return None
        try:
            data = file.read_bytes()
        except OSError:
            return None
        self._remember(sample_id, frame, look, data)
        return data

    def _write(self, sample_id: str, frame: int, look: Look, data: bytes) -> None:
        self._remember(sample_id, frame, look, data)
        file = self._file(sample_id, frame, look)
        if file is not None:
            with contextlib.suppress(Exception):  # a full or read-only disk costs speed, not the preview
                atomic_write(file, data)

    def _bases(self, sample: Sample) -> list[bytes]:
        """The clear view of every frame of a sample, decoded from the media under the budget."""
        with self.budget.hold(_cost(sample)):
            images = sample_frames(sample, side=CLEAR_SIDE)
            self.decodes += 1
            bases = [jpeg(render(image, Look(clear=True)), quality=90) for image in images]
            for image in images:
                image.close()
            del images
        for k, data in enumerate(bases):
            self._write(sample.id, k, Look(clear=True), data)
        return bases

    def get(self, sample: Sample, frame: int, look: Look) -> bytes:
        """The preview's JPEG bytes, made on first use.

        Raises:
            MediaError: The media cannot be read, or the frame does not exist.
        """
        found = self._read(sample.id, frame, look)
        if found is not None:
            return found
        with self._lock:
            making = self._making.setdefault(sample.id, threading.Lock())
        try:
            with making:  # one decode per sample, however many ask at once
                return self._make(sample, frame, look)
        finally:
            with self._lock:
                self._making.pop(sample.id, None)

    def _make(self, sample: Sample, frame: int, look: Look) -> bytes:
        found = self._read(sample.id, frame, look)
        if found is not None:
            return found
        base = self._read(sample.id, frame, Look(clear=True))
        if base is None:
            bases = self._bases(sample)
            if not 0 <= frame < len(bases):
                raise MediaError(f"sample {sample.id[:12]} has {len(bases)} frame(s), not {frame + 1}")
            base = bases[frame]
        if look.clear:
            return base
        data = jpeg(render(open_image_bytes(base), look))  # checked like any file: the cache is on disk
        self._write(sample.id, frame, look, data)
        return data

    def forget(self, sample_id: str) -> None:
        """Drop every preview of a sample, in memory and on disk (after a takedown)."""
        with self._lock:
            for key in [k for k in self._items if k[0] == sample_id]:
                del self._items[key]
        if self.folder is not None:
            shutil.rmtree(self.folder / sample_id[:2] / sample_id, ignore_errors=True)
