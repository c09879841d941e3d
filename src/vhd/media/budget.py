"""One decode memory budget per process, shared by every worker thread that decodes media.

``vhd ingest --jobs N``, ``vhd annotate`` (up to ``concurrency`` samples loading at once),
``vhd fetch --store``, ``vhd frames --jobs N`` and ``vhd dedup`` decode media in worker threads.
Each decode is bounded on its own (the pixel limits of `vhd.media.image.ImageLimits`), but N of
them at once are not: four 8K videos decoded together hold four times the memory. So
`load_sample` (and the video decodes of ``frames`` and ``dedup``) first waits for room in one
`MemoryBudget` per process: what a decode needs is estimated from the file's header
(`vhd.media.image.decode_cost`, `video_cost`), so many large files arriving together are
decoded a few at a time, and small ones never wait for each other. One decode larger than the
whole budget still runs, alone. (The review app's previews keep a `MemoryBudget` of their own,
``--preview-memory``.)

Example:
    >>> with decode_budget().hold(video_cost((1920, 1080), 5)):  # doctest: +SKIP
    ...     frames = read_frames("clip.mp4")
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Final

DEFAULT_DECODE_MEMORY: Final = 2 * 2**30
"""Default decode budget of a process: room for an 8K video's frames and a few large images at once."""

_UNKNOWN_FRAME: Final = (1920, 1080)
"""The frame size assumed for a video whose header gives none (the decoder's own check still applies)."""


class MemoryBudget:
    """A semaphore counted in bytes: decodes wait until what they need fits in the budget.

    One decode larger than the whole budget still runs, alone (never a deadlock on one large
    file). Not reentrant: a thread holding part of the budget must not wait for more.

    Args:
        total: The budget in bytes.
        on_idle: Called (outside the lock) when the last holder of a burst gives its part back:
            the review app returns freed memory to the system there.

    Attributes:
        used: Bytes held now.
        peak: Most bytes held at once so far.
    """

    def __init__(self, total: int, on_idle: Callable[[], None] | None = None) -> None:
        self.total = total
        self.used = 0
        self.peak = 0
        self.on_idle = on_idle
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def hold(self, cost: int) -> Iterator[None]:
        """Wait for ``cost`` bytes of the budget, hold them for the block, then give them back."""
        cost = max(0, cost)
        with self._cond:
            self._cond.wait_for(lambda: self.used == 0 or self.used + cost <= self.total)
            self.used += cost
            self.peak = max(self.peak, self.used)
        try:
            yield
        finally:
            with self._cond:
                self.used -= cost
                idle = self.used == 0
                self._cond.notify_all()
            if idle and self.on_idle is not None:
                self.on_idle()


_BUDGETS: dict[int, MemoryBudget] = {}
_LOCK = threading.Lock()


def decode_budget(total: int | None = None) -> MemoryBudget:
    """The process's decode budget of ``total`` bytes (default `DEFAULT_DECODE_MEMORY`), made on first use.

    Every caller asking for the same total shares one budget, whichever thread it runs in.
    """
    total = DEFAULT_DECODE_MEMORY if total is None else total
    with _LOCK:
        if total not in _BUDGETS:
            _BUDGETS[total] = MemoryBudget(total)
        return _BUDGETS[total]


def video_cost(frame: tuple[int, int] | None, kept: int, threads: int = 4) -> int:
    """Bytes a video decode may hold: ``kept`` RGB frames, plus the decoder's own frames.

    Args:
        frame: Width and height from the container's header (None: unknown, 1920 x 1080 assumed).
        kept: Frames kept (RGB, 3 bytes a pixel).
        threads: Decoder threads (each holds a frame, YUV 4:2:0 at 1.5 bytes a pixel), plus
            four reference frames.
    """
    width, height = frame or _UNKNOWN_FRAME
    pixels = width * height
    return int(pixels * (3 * kept + 1.5 * (threads + 4))) + 2**24


def video_file_cost(path: str | os.PathLike[str], kept: int) -> int:
    """`video_cost` of a video file, its frame size read from the container's header (nothing decoded)."""
    from vhd.media.untrusted import HEAD_BYTES, video_demuxer
    from vhd.media.videoframes import DECODE_THREADS
    from vhd.media.videosize import declared_frame_size

    try:
        with open(path, "rb") as fh:
            demuxer = video_demuxer(fh.read(HEAD_BYTES))
    except OSError:
        return video_cost(None, kept, DECODE_THREADS)  # the decode itself says what is wrong
    size = declared_frame_size(path, demuxer) if demuxer else None
    return video_cost(size, kept, DECODE_THREADS)
