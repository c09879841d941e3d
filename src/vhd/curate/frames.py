"""Extract the frames that represent each video into PNG files, resumably.

For every video found under the inputs, `vhd.media.video.read_frames` picks ``n`` frames at
``round(linspace(0, T - 1, n))`` with ``T = min(frame count, first)`` and they are written as
``<video stem>_<k:04d>.png``, k from 0. Two layouts:

- ``folders`` (default): ``OUT/<sub-folders of the input>/<stem>/<stem>_0000.png ...``, one
  folder per video, which `vhd annotate --frame-folders` and `vhd ingest --frame-folders` read
  back as one video each;
- ``flat``: ``OUT/<sub-folders of the input>/<stem>_0000.png ...``.

Each video's frames are written to a hidden temporary folder and moved into place at once, and
a journal (``OUT/.vhd-frames.jsonl``) records each finished video with its size, modification
time and settings: a re-run skips what is done and redoes only what is missing or changed, and
a killed run leaves no partial frame set under a final name.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.curate.parallel import thread_map
from vhd.errors import ConfigError, MediaError
from vhd.fileio import display_path
from vhd.progress import ProgressFn

LAYOUTS = ("folders", "flat")
"""Output layouts."""

JOURNAL = ".vhd-frames.jsonl"
"""File (in the output folder) that records finished videos."""


@dataclass
class VideoOutcome:
    """What happened to one video.

    Attributes:
        path: The video.
        status: ``written``, ``done`` (already written by an earlier run) or ``failed``.
        indices: Frame indices written.
        total_frames: Frames in the video (as `read_frames` counts them).
        files: The PNG files.
        reason: Why it failed.
    """

    path: str
    status: str
    indices: list[int] = field(default_factory=list)
    total_frames: int = 0
    files: list[str] = field(default_factory=list)
    reason: str = ""


@dataclass
class FramesResult:
    """Outcome of `extract_frames`.

    Attributes:
        videos: One entry per video, in input order.
        skipped: ``(path, reason)`` of inputs that could not be considered (unsupported type,
            symbolic link out of the folder, ...).
        images: Image files found and left alone.
        elapsed_s: Wall time.
    """

    videos: list[VideoOutcome] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    images: int = 0
    elapsed_s: float = 0.0

    def count(self, status: str) -> int:
        """Videos with this status."""
        return sum(1 for v in self.videos if v.status == status)


def _targets(inputs: Sequence[str | os.PathLike[str]], result: FramesResult) -> list[tuple[Path, Path]]:
    """Return (video, sub-folder relative to its input) for every video under the inputs."""
    from vhd.media.discover import discover
    from vhd.records import Kind

    out: list[tuple[Path, Path]] = []
    for raw in inputs:
        root = Path(os.path.abspath(raw))
        found = discover([root])
        result.skipped.extend((display_path(s.path), s.reason) for s in found.skipped)
        for item in found.items:
            if item.kind is not Kind.VIDEO:
                result.images += 1
                continue
            rel = Path(os.path.relpath(item.path.parent, root)) if root.is_dir() else Path()
            out.append((item.path, rel))
    return out


class _Journal:
    def __init__(self, out: Path) -> None:
        self.path = out / JOURNAL
        self.done: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a kill
                if isinstance(entry, dict) and "video" in entry:
                    self.done[str(entry["video"])] = entry

    def append(self, entry: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.done[str(entry["video"])] = entry


def _signature(video: Path, n: int, first: int, layout: str) -> dict[str, Any]:
    st = video.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "n": n, "first": first, "layout": layout}


def _write_set(frames: Any, folder: Path, stem: str, layout: str) -> list[Path]:
    """Write one video's frames into place all at once."""
    from vhd.media.video import write_frames

    folder.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{stem}.", suffix=".tmp", dir=folder))
    try:
        written = write_frames(frames, tmp, stem)
        if layout == "folders":
            final = folder / stem
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
            return [final / p.name for p in written]
        paths = []
        for p in written:
            os.replace(p, folder / p.name)
            paths.append(folder / p.name)
        return paths
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def extract_frames(
    inputs: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    n: int = 5,
    first: int = 4000,
    layout: str = "folders",
    jobs: int = 1,
    strategy: str = "auto",
    on_progress: ProgressFn | None = None,
) -> FramesResult:
    """Write the sampled frames of every video under the inputs.

    Args:
        inputs: Video files and folders (searched recursively).
        out: Output folder.
        n: Frames per video.
        first: Only the first this-many frames are sampled.
        layout: ``folders`` (one folder per video) or ``flat``.
        jobs: Videos decoded at once (threads).
        strategy: Passed to `read_frames` (``auto`` or ``decode``).
        on_progress: Called with (videos done, videos in total).

    Returns:
        One outcome per video; unreadable videos are reported with a reason, not raised.

    Raises:
        ConfigError: Bad settings, a missing input, or an unwritable output folder.
        MissingDependencyError: PyAV is not installed.
    """
    from vhd.media.video import frame_indices, read_frames

    if layout not in LAYOUTS:
        raise ConfigError(f"unknown layout {layout!r}: choose folders or flat")
    frame_indices(1, n, first)  # validates n and first
    start = time.perf_counter()
    out_dir = Path(os.path.abspath(out))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create output folder {out_dir}: {exc.strerror}") from exc
    paths = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    result = FramesResult()
    targets = _targets(paths, result)
    journal = _Journal(out_dir)
    claimed: dict[Path, str] = {}
    for video, rel in targets:  # the first video with a stem in a folder owns its names
        claimed.setdefault(out_dir / rel / video.stem, display_path(video))

    def one(target: tuple[Path, Path]) -> VideoOutcome:
        video, rel = target
        label = display_path(video)
        folder = out_dir / rel
        owner = claimed[folder / video.stem]
        if owner != label:
            return VideoOutcome(
                label, "failed", reason=f"{owner} has the same stem and writes the same files; rename one"
            )
        try:
            signature = _signature(video, n, first, layout)
        except OSError as exc:
            return VideoOutcome(label, "failed", reason=f"cannot read file ({exc.strerror})")
        entry = journal.done.get(label)
        if entry and entry.get("signature") == signature and all(Path(f).exists() for f in entry["files"]):
            return VideoOutcome(label, "done", entry["indices"], entry["total_frames"], entry["files"])
        try:
            frames = read_frames(video, n, first, strategy=strategy)
            files = [str(p) for p in _write_set(frames, folder, video.stem, layout)]
        except MediaError as exc:
            return VideoOutcome(label, "failed", reason=str(exc))
        except OSError as exc:
            return VideoOutcome(label, "failed", reason=f"cannot write frames under {folder} ({exc.strerror})")
        return VideoOutcome(label, "written", frames.indices, frames.total_frames, files)

    for outcome in thread_map(one, targets, jobs):
        if outcome.status == "written":
            journal.append(
                {
                    "video": outcome.path,
                    "signature": _signature(Path(outcome.path), n, first, layout),
                    "indices": outcome.indices,
                    "total_frames": outcome.total_frames,
                    "files": outcome.files,
                }
            )
        result.videos.append(outcome)
        if on_progress is not None:
            on_progress(len(result.videos), len(targets))
    result.elapsed_s = time.perf_counter() - start
    return result
