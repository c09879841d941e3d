"""Cut a span of a video into a small MP4 clip for models that take a video (native video input).

`cut_clip` decodes ``[start_s, end_s)`` of a video in one streaming pass (one frame in memory at a
time), keeps at most ``fps`` frames a second, shrinks them to ``max_side`` and re-encodes them as
H.264 (yuv420p) in an MP4 held in memory, refusing a clip over ``max_bytes``. Times are read from
the decoded frames, never from the container's header: second 0 is the video's first decoded frame,
a frame whose timestamp goes backwards (or is missing) is dropped, and a span the video does not
reach is refused with a one-line reason.

`span_frames` reads a span as still frames; `video_content` returns what a backend takes (frames,
a clip or both): the one call the whole-video annotate path and the segment pipeline make. The frame
reader's gate applies (`vhd.media.video`): accepted containers only, sizes checked, strict decoding.
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

from vhd.errors import ConfigError, MediaError, MissingDependencyError
from vhd.media.encoded import EncodedImage, EncodedVideo, decode_clip
from vhd.media.untrusted import DEFAULT_MAX_FRAME_PIXELS
from vhd.media.videoframes import checked_stream, decode_strictly, error_reason, upright
from vhd.media.videoopen import gate_video, open_gated

__all__ = ["MODES", "ClipLimits", "VideoContent", "cut_clip", "decode_clip", "span_frames", "video_content"]

MODES: Final[tuple[str, ...]] = ("frames", "native")
"""How a video is shown to a backend: ``frames`` (still frames, the VHD11K protocol) or ``native``
(one clip, `cut_clip`)."""

CRF: Final = 28  # x264 quality of a clip (lower: better and larger)

SEEK_SLACK_S: Final = 0.5  # a seek landing this far past the span's start is not trusted


@dataclass(frozen=True)
class ClipLimits:
    """Bounds of a clip sent to a model (the ``[media]`` ``clip_*`` keys).

    Attributes:
        seconds: Longest span a clip covers; a whole video in native mode is shown as its first
            ``seconds`` seconds, and a longer span is cut short (``EncodedVideo.capped``).
        fps: Most frames a second kept (the source's own rate when lower).
        max_side: Longest side of the clip's frames, in pixels (made even for yuv420p).
        max_bytes: Largest clip accepted; a clip over it is refused (lower ``fps`` or ``max_side``).
        max_pixels: Largest source frame decoded (width x height; None: no limit).
    """

    seconds: float = 30.0
    fps: float = 2.0
    max_side: int = 448
    max_bytes: int = 8 * 2**20
    max_pixels: int | None = field(default=DEFAULT_MAX_FRAME_PIXELS)

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise ConfigError(f"clip_seconds must be above 0, got {self.seconds}")
        if not 0 < self.fps <= 60:
            raise ConfigError(f"clip_fps must be above 0 and at most 60, got {self.fps}")
        if self.max_side < 16:
            raise ConfigError(f"clip_max_side must be at least 16 pixels, got {self.max_side}")
        if self.max_bytes < 1024:
            raise ConfigError(f"the clip byte cap must be at least 1 KiB, got {self.max_bytes}")

    def identity(self) -> dict[str, Any]:
        """What changes the clip a model is shown (for configuration hashes)."""
        return {"clip_seconds": self.seconds, "clip_fps": self.fps, "clip_max_side": self.max_side, "clip_crf": CRF}


def _import_av() -> Any:
    try:
        import av
    except ImportError as exc:
        raise MissingDependencyError("av", "video") from exc
    return av


def _check_span(start_s: float, end_s: float) -> None:
    if not (math.isfinite(start_s) and math.isfinite(end_s)) or start_s < 0 or end_s <= start_s:
        raise ConfigError(f"a video span needs 0 <= start_s < end_s, got [{start_s}, {end_s}]")


@dataclass
class _SpanStats:  # what a pass saw: the last frame's time, frames dropped for bad timestamps
    last_s: float | None = None
    dropped: int = 0


def _span(
    av: Any, path: Path, demuxer: str, start_s: float, end_s: float, max_pixels: int | None, stats: _SpanStats
) -> Iterator[tuple[float, Any]]:
    """Yield ``(t, frame)`` for the decoded frames with ``start_s <= t < end_s``, t from the first frame.

    The file is opened once to find the first frame's time (second 0), then, for a span that does
    not start at 0, seeked to the keyframe before the span; a seek that lands after the span's
    start is not trusted and the file is decoded from the start instead.
    """
    try:
        with open_gated(path, demuxer, max_pixels) as container:
            stream = checked_stream(container, max_pixels)
            frames = decode_strictly(container, stream, max_pixels)
            origin: float | None = None
            for frame in frames:
                if frame.time is not None:
                    origin = float(frame.time)
                    if start_s == 0:
                        yield from _window(itertools.chain([frame], frames), origin, start_s, end_s, stats)
                        return
                    break
                stats.dropped += 1
            if origin is None:
                raise MediaError("video has no decodable frames with a timestamp")
            target = origin + start_s
            seeked = True
            try:
                container.seek(round(target / stream.time_base), stream=stream, backward=True, any_frame=False)
            except (av.error.FFmpegError, OverflowError, ValueError):
                seeked = False
            if seeked:
                frames = decode_strictly(container, stream, max_pixels)
                first = next(frames, None)
                if first is None:
                    stats.last_s = None
                    return
                if first.time is not None and float(first.time) <= target + SEEK_SLACK_S:
                    yield from _window(itertools.chain([first], frames), origin, start_s, end_s, stats)
                    return
        # no seek, or one that overshot: decode from the start in a fresh container
        with open_gated(path, demuxer, max_pixels) as container:
            stream = checked_stream(container, max_pixels)
            yield from _window(decode_strictly(container, stream, max_pixels), origin, start_s, end_s, stats)
    except MediaError:
        raise
    except (av.error.FFmpegError, OSError, ValueError, EOFError, RuntimeError) as exc:
        raise MediaError(f"cannot decode video ({error_reason(exc)})") from exc


def _window(
    frames: Iterator[Any], origin: float, start_s: float, end_s: float, stats: _SpanStats
) -> Iterator[tuple[float, Any]]:
    last: float | None = None
    for frame in frames:
        if frame.time is None:
            stats.dropped += 1
            continue
        t = float(frame.time) - origin
        if last is not None and t <= last:  # backwards or repeated: not trusted
            stats.dropped += 1
            continue
        last = t
        stats.last_s = t
        if t < start_s:
            continue
        if t >= end_s:
            return
        yield t, frame


def _nothing_in(start_s: float, end_s: float, stats: _SpanStats, what: str) -> MediaError:
    ends = "no frame with a usable timestamp" if stats.last_s is None else f"its last frame at {stats.last_s:.2f} s"
    dropped = f"; {stats.dropped} frames dropped for missing or backwards timestamps" if stats.dropped else ""
    return MediaError(
        f"no {what} between {start_s:.2f} s and {end_s:.2f} s: the video has {ends} (timestamps as decoded){dropped}"
    )


def _even_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    scale = min(1.0, max_side / max(width, height))
    w, h = max(2, round(width * scale)), max(2, round(height * scale))
    return w - w % 2, h - h % 2


def cut_clip(
    path: str | Path,
    start_s: float,
    end_s: float,
    *,
    max_side: int = 448,
    fps: float = 2.0,
    max_bytes: int = 8 * 2**20,
    max_duration_s: float | None = None,
    max_pixels: int | None = DEFAULT_MAX_FRAME_PIXELS,
) -> EncodedVideo:
    """Cut ``[start_s, end_s)`` of a video into an MP4 clip (H.264, yuv420p), streaming.

    Args:
        path: The video file (MP4/MOV, WebM/MKV or AVI).
        start_s: Start of the span, in seconds from the video's first decoded frame.
        end_s: End of the span (exclusive); past the video's end, the clip stops at its last frame.
        max_side: Longest side of the clip's frames in pixels.
        fps: Most frames a second kept.
        max_bytes: Largest clip returned.
        max_duration_s: Longest span covered; a longer one is cut short (``capped`` is set).
        max_pixels: Largest source frame decoded (width x height; None: no limit).

    Returns:
        The clip, its span and frame count. Each kept frame's timestamp in the clip is its source
        timestamp minus ``start_s``.

    Raises:
        MediaError: One line: an unreadable, empty, corrupt or refused file; no frame in the span
            (the video ends before it); or a clip over ``max_bytes``.
        ConfigError: A bad span or bound.
        MissingDependencyError: PyAV is not installed.
    """
    _check_span(start_s, end_s)
    if not 0 < fps <= 60 or max_side < 16 or max_bytes < 1024:
        raise ConfigError(f"bad clip bounds: fps={fps} (0-60), max_side={max_side} (>= 16), max_bytes={max_bytes}")
    capped = max_duration_s is not None and end_s - start_s > max_duration_s
    if capped:
        assert max_duration_s is not None
        end_s = start_s + max_duration_s
    av = _import_av()
    path = Path(path)
    demuxer = gate_video(path, max_pixels)
    stats = _SpanStats()
    out = io.BytesIO()
    step = 1.0 / fps
    due = start_s
    kept = 0
    size: tuple[int, int] | None = None
    time_base = Fraction(1, 1000)
    try:
        with av.open(out, mode="w", format="mp4") as muxer:
            stream: Any = None
            for t, frame in _span(av, path, demuxer, start_s, end_s, max_pixels, stats):
                if t + 1e-6 < due:
                    continue
                while due <= t + 1e-6:
                    due += step
                rotation = int(frame.rotation or 0) % 360
                upright_size = (frame.height, frame.width) if rotation in (90, 270) else (frame.width, frame.height)
                if stream is None:
                    size = _even_size(*upright_size, max_side)
                    stream = muxer.add_stream("libx264", rate=Fraction(fps).limit_denominator(1000))
                    stream.width, stream.height = size
                    stream.pix_fmt = "yuv420p"
                    stream.codec_context.time_base = time_base
                    stream.options = {"crf": str(CRF), "preset": "veryfast"}
                    stream.codec_context.thread_count = 2  # x264 holds frames per thread: bounded like the decoders
                assert size is not None
                if rotation == 0:  # scaled and converted by FFmpeg in one step, to limited-range (tv) yuv420p
                    full = frame.format.name.startswith("yuvj") or int(getattr(frame, "color_range", 0) or 0) == 2
                    out_frame = frame.reformat(
                        width=size[0],
                        height=size[1],
                        format="yuv420p",
                        src_color_range="JPEG" if full else "MPEG",
                        dst_color_range="MPEG",
                    )
                else:
                    image = upright(frame.to_image(), rotation).resize(size)
                    out_frame = av.VideoFrame.from_image(image).reformat(format="yuv420p")
                out_frame.pts = round((t - start_s) / time_base)
                out_frame.time_base = time_base
                for packet in stream.encode(out_frame):
                    muxer.mux(packet)
                kept += 1
                if out.tell() > max_bytes:
                    raise _over(max_bytes, kept, start_s, t)
            if stream is None:
                raise _nothing_in(start_s, end_s, stats, "frames")
            for packet in stream.encode():
                muxer.mux(packet)
    except MediaError:
        raise
    except (av.error.FFmpegError, OSError, ValueError, RuntimeError) as exc:
        raise MediaError(f"cannot encode the clip ({error_reason(exc)})") from exc
    data = out.getvalue()
    if len(data) > max_bytes:
        raise _over(max_bytes, kept, start_s, end_s)
    assert size is not None
    return EncodedVideo(
        data, width=size[0], height=size[1], start_s=start_s, end_s=end_s, frames=kept, fps=fps, capped=capped
    )


def _over(max_bytes: int, kept: int, start_s: float, at_s: float) -> MediaError:
    fix = "lower clip_fps or clip_max_side, or raise clip_max_mb"
    return MediaError(f"clip over {max_bytes:,} bytes after {kept} frames ({start_s:.2f}-{at_s:.2f} s); {fix}")


def span_frames(
    path: str | Path,
    start_s: float,
    end_s: float,
    n: int,
    *,
    max_side: int = 1024,
    fmt: str = "jpeg",
    quality: int = 90,
    max_pixels: int | None = DEFAULT_MAX_FRAME_PIXELS,
) -> list[EncodedImage]:
    """``n`` frames spread evenly over ``[start_s, end_s)``, encoded as the models see images.

    The k-th frame is the first decoded frame at or after ``start_s + k * (end_s - start_s) / n``
    (streaming: one pass, one frame decoded at a time); a span with fewer frames gives fewer.

    Raises:
        MediaError: As `cut_clip`, or no frame in the span.
        ConfigError: A bad span or ``n`` below 1.
    """
    from vhd.media.image import encode_image

    _check_span(start_s, end_s)
    if n < 1:
        raise ConfigError(f"frames per span must be at least 1, got {n}")
    av = _import_av()
    path = Path(path)
    demuxer = gate_video(path, max_pixels)
    stats = _SpanStats()
    targets = [start_s + k * (end_s - start_s) / n for k in range(n)]
    images: list[EncodedImage] = []
    for t, frame in _span(av, path, demuxer, start_s, end_s, max_pixels, stats):
        if t + 1e-6 < targets[len(images)]:
            continue
        image = upright(frame.to_image(), int(frame.rotation or 0))
        images.append(encode_image(image, max_side=max_side, fmt=fmt, quality=quality))
        while len(images) < len(targets) and targets[len(images)] <= t + 1e-6:
            targets.pop(len(images))  # several targets fell on this one frame: one frame for them
        if len(images) >= len(targets):
            break
    if not images:
        raise _nothing_in(start_s, end_s, stats, "frames")
    return images


@dataclass(frozen=True)
class VideoContent:
    """What a model is shown of a span of a video: still frames, a clip, or both.

    Attributes:
        start_s: Start of the span, in seconds from the video's first decoded frame.
        end_s: End of the span.
        frames: Still frames in order (empty in ``native`` mode).
        clip: The clip (None in ``frames`` mode).
    """

    start_s: float
    end_s: float
    frames: list[EncodedImage] = field(default_factory=list)
    clip: EncodedVideo | None = None


def video_content(
    path: str | Path,
    start_s: float,
    end_s: float,
    mode: str,
    limits: ClipLimits | None = None,
    *,
    n_frames: int = 5,
    max_side: int = 1024,
    fmt: str = "jpeg",
    quality: int = 90,
) -> VideoContent:
    """Show ``[start_s, end_s)`` of a video to a model as its backends take it.

    Args:
        path: The video file.
        start_s: Start of the span, in seconds from the video's first decoded frame.
        end_s: End of the span.
        mode: ``frames`` (``n_frames`` still frames), ``native`` (one clip bounded by ``limits``) or
            ``both`` (for a debate whose roles differ; `vhd.debate.engine.Debate.video_mode`).
        limits: The clip's bounds (``limits.seconds`` caps the span; ``limits.max_pixels`` bounds
            the source frames in both modes); None: `ClipLimits` defaults. In a run, the
            ``[media]`` table's: `vhd.media.load.clip_limits`, or ``MediaSettings.clip``.
        n_frames: Still frames in ``frames`` mode.
        max_side: Longest side of the still frames.
        fmt: Encoding of the still frames (``jpeg``, ``png`` or ``webp``).
        quality: JPEG/WebP quality of the still frames.

    Returns:
        The frames and/or the clip; pass them on as ``debate.run(Kind.VIDEO, content.frames,
        clip=content.clip)``.

    Raises:
        MediaError: The span cannot be read (one line; record it as the span's outcome).
        ConfigError: Unknown ``mode`` or a bad span.
    """
    if mode not in (*MODES, "both"):
        raise ConfigError(f"unknown video input {mode!r}: choose frames or native")
    limits = limits or ClipLimits()
    frames: list[EncodedImage] = []
    clip: EncodedVideo | None = None
    if mode in ("frames", "both"):
        frames = span_frames(
            path, start_s, end_s, n_frames, max_side=max_side, fmt=fmt, quality=quality, max_pixels=limits.max_pixels
        )
    if mode in ("native", "both"):
        clip = cut_clip(
            path,
            start_s,
            end_s,
            max_side=limits.max_side,
            fps=limits.fps,
            max_bytes=limits.max_bytes,
            max_duration_s=limits.seconds,
            max_pixels=limits.max_pixels,
        )
    return VideoContent(start_s, end_s, frames, clip)
