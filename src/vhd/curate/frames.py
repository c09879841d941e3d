"""Extract the frames that represent each video into PNG files, resumably.

For every video found under the inputs, `vhd.media.video.read_frames` picks ``n`` frames at
``round(linspace(0, T - 1, n))`` with ``T = min(frame count, first)`` and they are written as
``<video stem>_<k:04d>.png``, k from 0. Two layouts:

- ``folders`` (default): ``OUT/<sub-folders of the input>/<stem>/<stem>_0000.png ...``, one
  folder per video, which `vhd annotate --frame-folders` and `vhd ingest --frame-folders` read
  back as one video each;
- ``flat``: ``OUT/<sub-folders of the input>/<stem>_0000.png ...``.

Each video's frames are written to a hidden temporary folder (``.<stem>.vhd-tmp`` beside the
final names; a re-run clears what a killed run left there) and moved into place at once, and
a journal (``OUT/.vhd-frames.jsonl``) records each finished video with its size, modification
time and settings: a re-run skips what is done and redoes only what is missing or changed, and
a killed run leaves no partial frame set under a final name.

Memory does not grow with the number of videos: discovery is streamed (with ``progress``, a first walk
counts the videos for the total, a second feeds the work), the journal, the names claimed and the
paths met are kept in temporary files (`vhd.store.statindex`), and `FramesResult` keeps counts
and the first `KEEP_EXAMPLES` outcomes; every outcome goes to ``on_outcome`` as it is made.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.boundary import ItemFailure, guarded, is_run_fault
from vhd.curate.parallel import thread_map
from vhd.errors import ConfigError, MediaError
from vhd.fileio import display_path
from vhd.progress import ProgressFn, renamed_on_progress

LAYOUTS = ("folders", "flat")
"""Output layouts."""

JOURNAL = ".vhd-frames.jsonl"
"""File (in the output folder) that records finished videos."""

KEEP_EXAMPLES = 1000
"""Video outcomes, and skipped inputs, a `FramesResult` keeps (the first ones); the rest are counted."""

TEMP_SUFFIX = ".vhd-tmp"
"""Ending of the hidden folder ``.<stem>.vhd-tmp`` a video's frames are written into before the move."""

CACHE_KIB = 2048
"""Page cache of the journal's and the claimed names' temporary files: read once a video, so small."""


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
    """Outcome of `extract_frames`: counts, and the first outcomes as examples.

    Attributes:
        videos: The first `KEEP_EXAMPLES` videos' outcomes, in input order (every one goes to
            ``on_outcome``; `count` counts them all).
        skipped: The first `KEEP_EXAMPLES` ``(path, reason)`` of inputs that could not be
            considered (unsupported type, symbolic link out of the folder, ...); every one goes
            to ``on_skip``, `skipped_count` counts them.
        images: Image files found and left alone.
        elapsed_s: Wall time.
        statuses: Videos per status (``written``, ``done``, ``failed``).
        skipped_count: Inputs skipped.
    """

    videos: list[VideoOutcome] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    images: int = 0
    elapsed_s: float = 0.0
    statuses: Counter[str] = field(default_factory=Counter)
    skipped_count: int = 0

    def count(self, status: str) -> int:
        """Videos with this status."""
        return self.statuses[status]

    @property
    def total(self) -> int:
        """Videos considered."""
        return sum(self.statuses.values())

    def add(self, outcome: VideoOutcome) -> None:
        """Count an outcome (kept as an example while fewer than `KEEP_EXAMPLES` are)."""
        self.statuses[outcome.status] += 1
        if len(self.videos) < KEEP_EXAMPLES:
            self.videos.append(outcome)

    def skip(self, path: str, reason: str) -> None:
        """Count a skipped input (kept as an example while fewer than `KEEP_EXAMPLES` are)."""
        self.skipped_count += 1
        if len(self.skipped) < KEEP_EXAMPLES:
            self.skipped.append((path, reason))


def _found(inputs: Sequence[str | os.PathLike[str]]) -> Iterator[tuple[Path, Any]]:
    """``(input root, what discovery found)`` for everything under the inputs, streamed.

    Each input is discovered on its own (a file under two inputs is met twice, as before);
    the paths met are kept in a temporary file, not a set.
    """
    from vhd.media.discover import iter_discover
    from vhd.store.statindex import ScratchSet

    for raw in inputs:
        root = Path(os.path.abspath(raw))
        seen = ScratchSet()
        try:
            yield from ((root, found) for found in iter_discover([root], first_seen=seen.add))
        finally:
            seen.close()


def _count_videos(inputs: Sequence[str | os.PathLike[str]]) -> int:
    """How many videos the inputs hold (a walk without reading)."""
    from vhd.media.discover import Skipped
    from vhd.records import Kind

    return sum(1 for _, f in _found(inputs) if not isinstance(f, Skipped) and f.kind is Kind.VIDEO)


class _Journal:
    """The journal's entries by video, read into a temporary file (the last entry of a video wins)."""

    def __init__(self, out: Path) -> None:
        from vhd.store.statindex import ScratchMap

        self.path = out / JOURNAL
        self.done = ScratchMap(CACHE_KIB)
        if self.path.exists():
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue  # a line cut short by a kill
                    if isinstance(entry, dict) and "video" in entry:
                        self.done.put(str(entry["video"]), json.dumps(entry, ensure_ascii=False))

    def get(self, video: str) -> dict[str, Any] | None:
        """The video's latest entry, or None."""
        text = self.done.get(video)
        return None if text is None else dict(json.loads(text))

    def append(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.done.put(str(entry["video"]), line)

    def close(self) -> None:
        self.done.close()


def _signature(video: Path, n: int, first: int, layout: str) -> dict[str, Any]:
    st = video.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "n": n, "first": first, "layout": layout}


def _write_set(frames: Any, folder: Path, stem: str, layout: str) -> list[Path]:
    """Write one video's frames into place all at once."""
    from vhd.media.video import write_frames

    # one fixed temporary name per video, so what a killed run left there is found with one lookup;
    # the run owns the stem (same-stem videos are refused), so no other writer uses it now
    tmp = folder / f".{stem}{TEMP_SUFFIX}"
    if tmp.exists() or tmp.is_symlink():
        shutil.rmtree(tmp) if tmp.is_dir() and not tmp.is_symlink() else tmp.unlink()
    tmp.mkdir(parents=True)
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


@renamed_on_progress
def extract_frames(
    inputs: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    n: int = 5,
    first: int = 4000,
    layout: str = "folders",
    jobs: int = 1,
    strategy: str = "auto",
    progress: ProgressFn | None = None,
    on_outcome: Callable[[VideoOutcome], None] | None = None,
    on_skip: Callable[[str, str], None] | None = None,
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
        progress: Called with (videos done, videos in total).
        on_outcome: Called with every video's outcome, in input order, as it is made.
        on_skip: Called with ``(path, reason)`` of every input skipped.

    Returns:
        Counts per status and the first outcomes; unreadable videos are reported with a
        reason, not raised.

    Raises:
        ConfigError: Bad settings, a missing input, or an unwritable output folder.
        MissingDependencyError: PyAV is not installed.
    """
    from vhd.media.budget import decode_budget, video_file_cost
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
    from vhd.media.discover import check_inputs

    check_inputs([os.fspath(p) for p in paths])  # a missing input fails before any work
    total = 0 if progress is None else _count_videos(paths)  # a second walk only for a progress bar
    journal = _Journal(out_dir)
    from vhd.media.discover import Skipped
    from vhd.records import Kind
    from vhd.store.statindex import ScratchMap

    claimed = ScratchMap(CACHE_KIB)  # output stem folder -> the video that owns its names

    def targets() -> Iterator[tuple[Path, Path, str]]:
        """(video, sub-folder relative to its input, owner of its names), as discovery finds them."""
        for root, found in _found(paths):
            if isinstance(found, Skipped):
                result.skip(display_path(found.path), found.reason)
                if on_skip is not None:
                    on_skip(display_path(found.path), found.reason)
                continue
            if found.kind is not Kind.VIDEO:
                result.images += 1
                continue
            rel = Path(os.path.relpath(found.path.parent, root)) if root.is_dir() else Path()
            stem_key = str(out_dir / rel / found.path.stem)
            owner = claimed.get(stem_key)
            if owner is None:  # the first video with a stem in a folder owns its names
                owner = display_path(found.path)
                claimed.put(stem_key, owner)
            yield found.path, rel, owner

    def one(target: tuple[Path, Path, str]) -> VideoOutcome:
        """`one_video` inside the item boundary: a surprise is the video's ``failed`` reason."""
        outcome = guarded(one_video, target)
        return (
            VideoOutcome(display_path(target[0]), "failed", reason=outcome.reason)
            if isinstance(outcome, ItemFailure)
            else outcome
        )

    def one_video(target: tuple[Path, Path, str]) -> VideoOutcome:
        video, rel, owner = target
        label = display_path(video)
        folder = out_dir / rel
        if owner != label:
            return VideoOutcome(
                label, "failed", reason=f"{owner} has the same stem and writes the same files; rename one"
            )
        if video.stem.startswith(".") and video.stem.endswith(TEMP_SUFFIX):
            owner_stem = video.stem[1 : -len(TEMP_SUFFIX)]
            reason = f"its name is the temporary folder vhd frames uses for {owner_stem!r}; rename it"
            return VideoOutcome(label, "failed", reason=reason)
        try:
            signature = _signature(video, n, first, layout)
        except OSError as exc:
            return VideoOutcome(label, "failed", reason=f"cannot read file ({exc.strerror})")
        entry = journal.get(label)
        if entry and entry.get("signature") == signature and all(Path(f).exists() for f in entry["files"]):
            return VideoOutcome(label, "done", entry["indices"], entry["total_frames"], entry["files"])
        try:
            with decode_budget().hold(video_file_cost(video, n)):  # shared by the --jobs threads
                frames = read_frames(video, n, first, strategy=strategy)
                files = [str(p) for p in _write_set(frames, folder, video.stem, layout)]
        except MediaError as exc:
            return VideoOutcome(label, "failed", reason=str(exc))
        except OSError as exc:
            if is_run_fault(exc):
                raise  # a full disk ends the run (the journal keeps what is written); not one video's fault
            return VideoOutcome(label, "failed", reason=f"cannot write frames under {folder} ({exc.strerror})")
        return VideoOutcome(label, "written", frames.indices, frames.total_frames, files)

    try:
        for outcome in thread_map(one, targets(), jobs):
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
            result.add(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
            if progress is not None:
                progress(result.total, total)
    finally:
        journal.close()
        claimed.close()
    result.elapsed_s = time.perf_counter() - start
    return result
