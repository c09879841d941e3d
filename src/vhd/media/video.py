"""Pick a few frames that represent a video, decoded with PyAV (the ``vhd[video]`` extra).

A video is shown to the models as ``n`` frames (5 by default) spread evenly over its first
``first`` frames (4,000 by default, so that long videos are represented by their opening
minutes rather than a handful of frames minutes apart): frame indices
``round(linspace(0, T - 1, n))`` with ``T = min(frame count, first)``.

Frames are found by a keyframe-aware plan: the packets of the window are scanned without
decoding (demuxing only), which gives the exact frame count and where the keyframes are; the
reader then seeks to a keyframe only when one lies after the current position and at or before
the next wanted frame, and otherwise decodes forward. Every frame it keeps is checked against
the scanned timestamps, and whenever the plan cannot be trusted (a codec whose keyframe flags
are unreliable, missing or repeated timestamps, a count that disagrees with the container, a
seek landing elsewhere) it falls back to decoding forward from the start, which never goes past
frame ``first - 1``. Both ways return exactly the same frames. Every planned frame must
actually be decoded: a file that ends early (a truncated WebM decodes without any error) is
rejected instead of being represented by fewer frames.

Only MP4/MOV, WebM/MKV and AVI files are opened, each with its one FFmpeg demuxer chosen from the
file's first bytes (`vhd.media.untrusted.video_demuxer`), and every stream is decoded with FFmpeg's
strict error detection: a stream with corrupted data is refused as ``damaged: ...`` instead of
being shown with its errors concealed. FFV1 slices are also checked against their CRCs, which
FFmpeg only logs (`vhd.media.videoframes.ffv1_slices_intact`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.boundary import is_run_fault
from vhd.errors import ConfigError, MediaError, MissingDependencyError
from vhd.media.keyframes import SEEKABLE_CODECS, try_plan
from vhd.media.untrusted import DEFAULT_MAX_FRAME_PIXELS
from vhd.media.videoframes import (
    DEFAULT_FIRST,
    DEFAULT_FRAMES,
    REWIND,
    VideoFrames,
    check_counts,
    checked_stream,
    decode_strictly,
    duration_s,
    error_reason,
    frame_indices,
    observed_total,
    tolerance,
    upright,
)
from vhd.media.videoopen import gate_video, open_gated

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "DEFAULT_FIRST",
    "DEFAULT_FRAMES",
    "SEEKABLE_CODECS",
    "STRATEGIES",
    "VideoFrames",
    "frame_indices",
    "read_frames",
    "write_frames",
]

STRATEGIES = ("auto", "decode")
"""How `read_frames` reaches the frames: ``auto`` (keyframe-aware plan) or ``decode`` (forward)."""


def _import_av() -> Any:
    try:
        import av
    except ImportError as exc:
        raise MissingDependencyError("av", "video") from exc
    return av


@dataclass
class _Pass:
    """What one forward decoding pass found."""

    reported: int
    estimated: bool
    fps: float | None
    planned_total: int
    plan: list[int]
    images: dict[int, Image.Image]
    decoded: int
    reached_end: bool
    duration_s: float | None = None
    span_s: float = 0.0


class _Rewound(Exception):
    """A reused container did not restart at its first frame: open the file afresh."""


def _decode_pass(
    av: Any,
    path: Path,
    demuxer: str,
    n: int,
    first: int,
    known_total: int | None = None,
    container: Any = None,
    start_pts: Any = None,
    max_pixels: int | None = None,
) -> _Pass:
    """Open the file, plan the frames and decode forward, keeping the planned ones.

    Without ``known_total`` the plan comes from the container's frame count, or from
    duration x frame rate when the container stores no count; in the second case decoding
    goes on to the end of the window so that the real count becomes known.

    An already open ``container`` may be passed to save opening the file again: with
    ``start_pts`` the timestamp of its first frame, it is rewound there first (and `_Rewound`
    is raised when the first frame decoded is another one); with ``REWIND`` it is used as is.
    """
    try:
        if container is not None:
            return _decode_container(container, n, first, known_total, start_pts, max_pixels)
        with open_gated(path, demuxer, max_pixels) as opened:
            return _decode_container(opened, n, first, known_total, REWIND, max_pixels)
    except (MediaError, _Rewound):
        raise
    except (av.error.FFmpegError, OSError, ValueError, EOFError, RuntimeError) as exc:
        raise MediaError(f"cannot decode video ({error_reason(exc)})") from exc


def _decode_container(
    container: Any, n: int, first: int, known_total: int | None, start_pts: Any, max_pixels: int | None
) -> _Pass:
    stream = checked_stream(container, max_pixels)
    rate = stream.average_rate or stream.guessed_rate
    fps = float(rate) if rate else None
    reported = int(stream.frames or 0)
    estimated = False
    duration = duration_s(container, stream)
    if known_total is not None:
        total = known_total
    elif reported > 0:
        total = reported
    else:
        estimated = True
        total = round(duration * fps) if duration and fps else 0
    plan = frame_indices(total, n, first)
    wanted = set(plan)
    stop = first - 1 if estimated or not plan else plan[-1]
    images: dict[int, Image.Image] = {}
    decoded = 0
    reached_end = True
    start_s = end_s = 0.0
    if start_pts is not REWIND:
        container.seek(start_pts, stream=stream, backward=True, any_frame=False)
    for index, frame in enumerate(decode_strictly(container, stream, max_pixels)):
        if index == 0 and start_pts is not REWIND and frame.pts != start_pts:
            raise _Rewound
        decoded = index + 1
        if frame.time is not None:
            start_s, end_s = (frame.time, frame.time) if index == 0 else (start_s, frame.time)
        if index in wanted:
            images[index] = upright(frame.to_image(), int(frame.rotation or 0))
        if index >= stop:
            reached_end = False
            break
    return _Pass(reported, estimated, fps, total, plan, images, decoded, reached_end, duration, end_s - start_s)


def _ended_early(got: int, missing: int, expected: int, how: str) -> MediaError:
    return MediaError(
        f"video ended after {got} frames; expected frame {missing} ({expected} frames {how}); "
        "the file is probably truncated or corrupt"
    )


def read_frames(
    path: str | Path,
    n: int = DEFAULT_FRAMES,
    first: int = DEFAULT_FIRST,
    *,
    strategy: str = "auto",
    max_pixels: int | None = DEFAULT_MAX_FRAME_PIXELS,
) -> VideoFrames:
    """Decode the frames that represent a video (see `frame_indices`).

    With ``strategy="auto"`` the keyframe-aware plan of the module notes is tried first and
    forward decoding is the fallback; ``"decode"`` always decodes forward from the start. Both
    return the same frames (the first is faster on long videos with regular keyframes).

    Containers that store no frame count (WebM, Matroska) are planned from duration x frame
    rate, then checked against the frames actually decoded: a small difference (at most 2
    frames or 2%) is an estimation error and the frames are re-planned on the real count
    with a second pass; a larger shortfall means the file is cut short and is an error.
    Rotation metadata (display matrix) is applied to every frame.

    Frames larger than ``max_pixels`` are refused before any is decoded: the size the
    container's header declares is read first (`vhd.media.videosize`), before FFmpeg opens the
    file; then the size the stream's own headers give, when it is opened; then every decoded
    frame's. Each decoder uses at most `vhd.media.videoframes.DECODE_THREADS` threads.

    Args:
        path: The video file.
        n: Frames wanted.
        first: Only frames ``0 .. first - 1`` are considered.
        strategy: ``auto`` (keyframe plan, falling back to forward decoding) or ``decode``.
        max_pixels: Largest frame accepted, width x height (default 8K UHD; None: no limit).

    Returns:
        The chosen frames; fewer than ``n`` when the video is shorter than ``n`` frames.

    Raises:
        MediaError: Unreadable, empty, truncated or corrupt file, no video stream, or frames
            over ``max_pixels``.
        MissingDependencyError: PyAV is not installed.
        ConfigError: ``n`` or ``first`` is below 1, or ``strategy`` is unknown.
    """
    check_counts(n, first)
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown frame strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    av = _import_av()
    path = Path(path)
    demuxer = gate_video(path, max_pixels)
    scan = _first_pass(av, path, demuxer, n, first, max_pixels) if strategy == "auto" else None
    if isinstance(scan, VideoFrames):
        return scan
    if scan is None:
        scan = _decode_pass(av, path, demuxer, n, first, max_pixels=max_pixels)
    missing = [i for i in scan.plan if i not in scan.images]
    if scan.estimated:
        actual = scan.decoded if scan.reached_end else first
        how = "estimated from its duration"
    else:
        actual = scan.decoded if missing else min(scan.planned_total, first)
        how = "in its header"
    if actual == 0:
        raise MediaError("video has no decodable frames")
    expected = min(scan.planned_total, first)
    if not missing and actual == expected:
        return _result(scan.plan, scan.images, scan, actual, scan.decoded)
    promised = scan.planned_total
    if scan.estimated and scan.reached_end:
        promised = observed_total(scan.duration_s, scan.span_s, scan.decoded) or promised
    if promised > 0 and min(promised, first) - actual > tolerance(min(promised, first)):
        at = missing[0] if missing else actual
        raise _ended_early(scan.decoded, at, promised, how)

    plan = frame_indices(actual, n, first)
    if all(i in scan.images for i in plan):
        return _result(plan, scan.images, scan, actual, scan.decoded)
    again = _decode_pass(av, path, demuxer, n, first, known_total=actual, max_pixels=max_pixels)
    lost = [i for i in again.plan if i not in again.images]
    if lost:
        raise _ended_early(again.decoded, lost[0], actual, "counted on a first pass")
    return _result(again.plan, again.images, scan, actual, scan.decoded + again.decoded)


def _first_pass(
    av: Any, path: Path, demuxer: str, n: int, first: int, max_pixels: int | None
) -> VideoFrames | _Pass | None:
    """Try the keyframe plan; when it does not apply, decode forward in the same open file.

    Returns:
        The frames when the plan found them, else the forward pass made in the container the
        plan opened (saving a second open), else None (the caller decodes afresh).
    """
    try:
        container = open_gated(path, demuxer, max_pixels)
    except MediaError:
        return None  # the fresh pass reports the error
    with container:
        planned, start = try_plan(container, n, first, max_pixels)
        if planned is not None:
            return planned
        if start is None:
            return None
        try:
            return _decode_pass(
                av, path, demuxer, n, first, container=container, start_pts=start, max_pixels=max_pixels
            )
        except _Rewound:
            return None


def _result(plan: list[int], images: dict[int, Image.Image], scan: _Pass, actual: int, decoded: int) -> VideoFrames:
    if scan.reached_end:
        total = scan.decoded  # decoding saw the real end of the stream
    elif scan.estimated:
        total = max(scan.planned_total, actual)
    else:
        total = scan.reported
    return VideoFrames(
        images=[images[i] for i in plan],
        indices=list(plan),
        total_frames=total,
        fps=scan.fps,
        frames_decoded=decoded,
    )


def write_frames(frames: VideoFrames, out_dir: str | Path, stem: str) -> list[Path]:
    """Save frames as PNG files named ``<stem>_<k:04d>.png``, k counting from 0.

    This is the naming the upstream annotation tools use, and a folder written this way is
    read back as one video sample (see `vhd.media.discover`). Each file is written under a
    temporary name and renamed, so no partial PNG is ever left under a final name.

    Args:
        frames: Frames from `read_frames`.
        out_dir: Folder to write into (created if needed).
        stem: File name stem, usually the video's own stem.

    Returns:
        The written paths, in frame order.

    Raises:
        MediaError: A frame cannot be written.
    """
    folder = Path(out_dir)
    paths: list[Path] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for k, image in enumerate(frames.images):
            target = folder / f"{stem}_{k:04d}.png"
            partial = folder / f".{target.name}.part"
            try:
                image.save(partial, format="PNG")
                os.replace(partial, target)
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
            paths.append(target)
    except OSError as exc:
        if is_run_fault(exc):
            raise  # a full disk ends the run, not just this video
        raise MediaError(f"cannot write frames to {folder} ({error_reason(exc)})") from exc
    return paths
