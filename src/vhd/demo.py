"""Write a small set of benign example media for demos, docs and smoke tests.

The photos come from scikit-image's bundled sample data (no download) and the video is drawn
by code and encoded with PyAV, so the set can be made anywhere, offline. Every item is benign;
a few keywords sound borderline on purpose ("photo shoot", "launch"), which is the kind of
case the debate is meant to settle.

Example:
    >>> from pathlib import Path
    >>> from vhd.demo import write_examples
    >>> paths = write_examples(Path("examples"))  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from vhd.errors import MediaError, require
from vhd.fileio import atomic_write, escape_cell

VIDEO_SIZE = (160, 120)
"""Width and height of the example video."""

VIDEO_FRAMES = 48
"""Frames in the example video (2 seconds at 24 fps)."""

VIDEO_FPS = 24


@dataclass(frozen=True)
class _Photo:
    name: str
    loader: str
    keyword: str


_PHOTOS = (
    _Photo("astronaut.jpg", "astronaut", "astronaut portrait"),
    _Photo("coffee.jpg", "coffee", "cup of coffee"),
    _Photo("chelsea.png", "chelsea", "pet cat"),
    _Photo("rocket.jpg", "rocket", "rocket launch"),
    _Photo("camera.png", "camera", "photo shoot"),
    _Photo("moon.png", "moon", "moon surface"),
)

MANIFEST_NAME = "manifest.csv"
VIDEO_NAME = "bouncing_shapes.mp4"


def skimage_data() -> Any:
    """``skimage.data`` (the packaged sample photos), or the extra to install."""
    skimage: Any = require("skimage", "examples", "scikit-image")
    return skimage.data  # `from skimage import data`: skimage loads its submodules on first use


def _photo_bytes(photo: _Photo, skdata: Any) -> bytes:
    from PIL import Image

    array = getattr(skdata, photo.loader)()
    image = Image.fromarray(array).convert("RGB")
    buf = io.BytesIO()
    if photo.name.endswith(".png"):
        image.save(buf, format="PNG", compress_level=9)
    else:
        image.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def draw_frame(index: int, size: tuple[int, int] = VIDEO_SIZE) -> Any:
    """Draw frame ``index`` of the example video: a ball and a square moving over a sky.

    Args:
        index: Frame number.
        size: Width and height.

    Returns:
        An RGB Pillow image.
    """
    from PIL import Image, ImageDraw

    width, height = size
    image = Image.new("RGB", size)
    draw = ImageDraw.Draw(image)
    for y in range(height):
        shade = 150 + (y * 90) // max(1, height - 1)
        draw.line([(0, y), (width, y)], fill=(shade // 2, shade * 3 // 4, shade))
    draw.rectangle([0, height * 4 // 5, width, height], fill=(70, 150, 60))
    t = index / VIDEO_FRAMES
    radius = height // 8
    ball_x = radius + (width - 2 * radius) * t
    ball_y = height * 4 // 5 - radius - abs(math.sin(t * 3 * math.pi)) * height // 2
    draw.ellipse(
        [ball_x - radius, ball_y - radius, ball_x + radius, ball_y + radius],
        fill=(230, 80, 60),
    )
    side = height // 6
    box_x = (width - side) * (1 - t)
    draw.rectangle(
        [box_x, height // 8, box_x + side, height // 8 + side],
        fill=(250, 210, 60),
    )
    return image


def _video_bytes(av: Any, frames: int = VIDEO_FRAMES) -> bytes:
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=VIDEO_FPS)
        stream.width, stream.height = VIDEO_SIZE
        stream.pix_fmt = "yuv420p"
        # One thread and no macroblock-tree rate control: with mbtree on, x264's output
        # varied from run to run at this frame size, and the examples should be byte-stable.
        stream.codec_context.options = {
            "crf": "23",
            "preset": "medium",
            "threads": "1",
            "x264-params": "no-mbtree=1",
        }
        for index in range(frames):
            frame = av.VideoFrame.from_image(draw_frame(index)).reformat(format="yuv420p")
            frame.pts = index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buf.getvalue()


def write_examples(out_dir: str | Path) -> list[Path]:
    """Write the example photos, a short drawn H.264 video and a manifest listing them.

    The photos are real photographs from scikit-image (``source=real``); the video is drawn by
    code (``source=synthetic``). Running it twice with the same library versions writes the
    same bytes.

    Args:
        out_dir: Folder to write into (created if needed); existing example files are replaced.

    Returns:
        The written files: six photos, the video, then ``manifest.csv``.

    Raises:
        MissingDependencyError: scikit-image (extra ``examples``) or PyAV (extra ``video``) is
            not installed.
        MediaError: The files cannot be written.
    """
    skdata = skimage_data()
    av: Any = require("av", "video")
    folder = Path(out_dir)
    rows: list[dict[str, str]] = []
    written: list[Path] = []
    jobs: list[tuple[Path, Callable[[], bytes], dict[str, str]]] = [
        (
            folder / photo.name,
            partial(_photo_bytes, photo, skdata),
            {"kind": "image", "source": "real", "keyword": photo.keyword, "generator": ""},
        )
        for photo in _PHOTOS
    ]
    jobs.append(
        (
            folder / VIDEO_NAME,
            partial(_video_bytes, av),
            {
                "kind": "video",
                "source": "synthetic",
                "keyword": "bouncing toy ball",
                "generator": "vhd.examples",
            },
        )
    )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path, make, meta in jobs:
            atomic_write(path, make())
            written.append(path)
            rows.append({"path": path.name, **meta})
        text = io.StringIO()
        writer = csv.DictWriter(
            text, fieldnames=["path", "kind", "source", "keyword", "generator"], lineterminator="\n"
        )
        writer.writeheader()
        writer.writerows({k: escape_cell(v) for k, v in row.items()} for row in rows)
        manifest = folder / MANIFEST_NAME
        atomic_write(manifest, text.getvalue().encode("utf-8"))
        written.append(manifest)
    except OSError as exc:
        raise MediaError(f"cannot write examples to {folder} ({exc.strerror})") from exc
    return written


def _shape_canvas(size: tuple[int, int] = (512, 512)) -> tuple[Any, Any]:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, (255, 255, 255))
    return image, ImageDraw.Draw(image)


def _figure_silhouette() -> Any:
    """A standing figure in black on white (head, body, arms, legs): shape is all it has."""
    image, draw = _shape_canvas()
    draw.ellipse([226, 40, 286, 100], fill=(0, 0, 0))
    draw.rounded_rectangle([206, 110, 306, 290], radius=20, fill=(0, 0, 0))
    draw.line([(210, 125), (130, 250)], fill=(0, 0, 0), width=26)
    draw.line([(302, 125), (382, 250)], fill=(0, 0, 0), width=26)
    draw.line([(230, 285), (200, 470)], fill=(0, 0, 0), width=34)
    draw.line([(282, 285), (312, 470)], fill=(0, 0, 0), width=34)
    return image


def _hand_silhouette() -> Any:
    """An open hand in black on white: five fingers and a palm."""
    image, draw = _shape_canvas()
    draw.ellipse([150, 240, 370, 470], fill=(0, 0, 0))
    for k, (x, top) in enumerate(((165, 170), (215, 70), (265, 50), (315, 80), (355, 150))):
        width = 44 if k else 50
        draw.rounded_rectangle([x - width // 2, top, x + width // 2, 330], radius=width // 2, fill=(0, 0, 0))
    return image


def _line_art() -> Any:
    """Text and line drawing in black on white: thin strokes, the hardest case for a blur."""
    from PIL import ImageFont

    image, draw = _shape_canvas()
    font = ImageFont.load_default(size=64)
    draw.text((40, 40), "WARNING", fill=(0, 0, 0), font=font)
    draw.text((40, 130), "line art", fill=(0, 0, 0), font=font)
    for k in range(8):
        draw.line([(40 + 55 * k, 260), (90 + 55 * k, 470)], fill=(0, 0, 0), width=4)
    draw.rectangle([30, 240, 480, 490], outline=(0, 0, 0), width=6)
    return image


def _checkers() -> Any:
    """A black and white checkerboard of large squares: the strongest edges a picture can have."""
    image, draw = _shape_canvas()
    for y in range(0, 512, 64):
        for x in range(0, 512, 64):
            if (x + y) // 64 % 2:
                draw.rectangle([x, y, x + 63, y + 63], fill=(0, 0, 0))
    return image


def write_shape_examples(out_dir: str | Path) -> list[Path]:
    """Write high-contrast silhouettes and line art: the hard cases for a preview that should hide shape.

    scikit-image's horse (a dark shape on white) and four drawings made by code: a standing
    figure, an open hand, text with line art, and a checkerboard. All are benign PNGs.

    Args:
        out_dir: Folder to write into (created if needed).

    Returns:
        The written files.

    Raises:
        MissingDependencyError: scikit-image (extra ``examples``) is not installed.
        MediaError: The files cannot be written.
    """
    from PIL import Image

    skdata = skimage_data()
    horse = Image.fromarray(skdata.horse().astype("uint8") * 255).convert("RGB")
    drawings = {
        "horse.png": horse,
        "figure_silhouette.png": _figure_silhouette(),
        "hand_silhouette.png": _hand_silhouette(),
        "line_art.png": _line_art(),
        "checkers.png": _checkers(),
    }
    folder = Path(out_dir)
    written = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, image in drawings.items():
            buf = io.BytesIO()
            image.save(buf, format="PNG")
            written.append(atomic_write(folder / name, buf.getvalue()))
    except OSError as exc:
        raise MediaError(f"cannot write examples to {folder} ({exc.strerror})") from exc
    return written


# Planted-event videos: drawn test videos with visible events at known times, for segment tests
# and benchmarks (`vhd annotate --segments`). The event is a large saturated red disk, which a
# rule (`red_visible`) or a loopback server can see in the pixels; background colour changes at
# known cut times give shot detection real hard cuts.

EVENT_COLOUR = (230, 20, 20)
"""The planted event's colour: a saturated red no shot background uses."""

_SHOT_COLOURS = (
    (40, 90, 200),
    (60, 170, 70),
    (200, 200, 60),
    (120, 120, 120),
    (30, 160, 170),
    (150, 90, 200),
    (240, 240, 240),
    (20, 40, 60),
)
"""Shot backgrounds: far apart from each other and from the event's red."""


@dataclass(frozen=True)
class PlantedVideo:
    """What a planted-event video shows, and when (the ground truth of a segment test).

    Attributes:
        duration_s: Length in seconds.
        events: ``(start_s, end_s)`` spans during which the red disk is drawn.
        cuts: Times in seconds where the background changes (hard cuts), ascending.
        fps: Frames per second (constant).
        size: Width and height in pixels.
    """

    duration_s: float
    events: tuple[tuple[float, float], ...] = ()
    cuts: tuple[float, ...] = ()
    fps: int = 10
    size: tuple[int, int] = (96, 72)

    def __post_init__(self) -> None:
        if self.duration_s <= 0 or self.fps < 1:
            raise MediaError(f"a planted video needs a positive duration and fps, got {self.duration_s}, {self.fps}")
        for start, end in self.events:
            if not 0 <= start < end:
                raise MediaError(f"event span ({start}, {end}) must satisfy 0 <= start < end")

    @property
    def frame_count(self) -> int:
        """Frames in the video."""
        return max(1, round(self.duration_s * self.fps))

    def event_at(self, t: float) -> bool:
        """Whether the red disk is drawn at time ``t`` (seconds)."""
        return any(start <= t < end for start, end in self.events)

    def shot_at(self, t: float) -> int:
        """The shot number at time ``t``: how many cuts lie at or before it."""
        return sum(1 for c in self.cuts if c <= t)


def draw_event_frame(video: PlantedVideo, index: int) -> Any:
    """Draw frame ``index`` of a planted-event video.

    The background is the shot's colour with a slow gradient, a small white square moves
    across it (so frames of one shot differ a little), and during an event a red disk covering
    about a third of the frame is drawn in the middle.

    Args:
        video: What the video shows.
        index: Frame number (time ``index / fps``).

    Returns:
        An RGB Pillow image.
    """
    from PIL import Image, ImageDraw

    width, height = video.size
    t = index / video.fps
    r, g, b = _SHOT_COLOURS[video.shot_at(t) % len(_SHOT_COLOURS)]
    image = Image.new("RGB", video.size, (r, g, b))
    draw = ImageDraw.Draw(image)
    for y in range(0, height, 4):
        shade = (y * 24) // max(1, height)
        draw.rectangle([0, y, width, y + 3], fill=(max(0, r - shade), max(0, g - shade), max(0, b - shade)))
    side = max(2, height // 8)
    x = int((t * 7) % max(1, width - side))
    draw.rectangle([x, height - 2 * side, x + side, height - side], fill=(255, 255, 255))
    if video.event_at(t):
        radius = int(min(width, height) * 0.42)
        cx, cy = width // 2, height // 2
        draw.ellipse([cx - radius, cy - radius, cx + radius, cy + radius], fill=EVENT_COLOUR)
    return image


def write_event_video(path: str | Path, video: PlantedVideo) -> Path:
    """Encode a planted-event video as H.264 (yuv420p) MP4, streaming frame by frame.

    Memory stays flat in the video's length: each frame is drawn, encoded and dropped. Frame
    ``k`` has the timestamp ``k / fps`` exactly.

    Args:
        path: The MP4 file to write (its folder must exist); replaced if it exists.
        video: What the video shows.

    Returns:
        The path written.

    Raises:
        MissingDependencyError: PyAV (extra ``video``) is not installed.
        MediaError: The file cannot be written.
    """
    from fractions import Fraction

    av: Any = require("av", "video")
    target = Path(path)
    partial = target.with_name(f".{target.name}.part")
    try:
        with av.open(str(partial), mode="w", format="mp4") as container:
            stream = container.add_stream("libx264", rate=video.fps)
            stream.width, stream.height = video.size
            stream.pix_fmt = "yuv420p"
            stream.time_base = Fraction(1, video.fps)
            stream.codec_context.options = {"crf": "20", "preset": "veryfast", "threads": "1"}
            for index in range(video.frame_count):
                frame = av.VideoFrame.from_image(draw_event_frame(video, index)).reformat(format="yuv420p")
                frame.pts = index
                frame.time_base = Fraction(1, video.fps)
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
        partial.replace(target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise MediaError(f"cannot write {target} ({exc.strerror or exc})") from exc
    return target


def red_fraction(image: Any) -> float:
    """The share of an image's pixels that are the planted event's saturated red.

    Args:
        image: A Pillow image (any mode; converted to RGB).

    Returns:
        A fraction in ``[0, 1]``.
    """
    data = image.convert("RGB").resize((32, 24)).tobytes()
    red = sum(1 for k in range(0, len(data), 3) if data[k] > 150 and data[k + 1] < 90 and data[k + 2] < 90)
    return red / (len(data) // 3)


def red_visible(image: Any, threshold: float = 0.05) -> bool:
    """Whether the planted event (the red disk) is visible in an image: the rule tests and benchmarks judge by."""
    return red_fraction(image) >= threshold
