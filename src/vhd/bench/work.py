"""Judging one labelled sample by the detectors that still need it: here, or on an executor's workers.

`predict_item` loads a sample's media once (original bytes for detectors that want them,
prepared images for the others) and asks each detector; one detector failing on one sample
gives an error prediction, never an exception. A detector that judges a video from its file
(`vhd.detectors.base.Detector.judges_video_files`: the ``debate`` detector with ``[video]
segments``) is given the path instead, and the prepared frames only if it asks for them.
`DetectWork` wraps it as `vhd.execution.Work` for ``vhd bench --executor ray``: each worker
checks (loads) its own copy of the detectors once, reads the media by path (a filesystem shared
with the driver), and sends the predictions back to the driver, which alone writes the
prediction cache.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.bench.original import load_original, wants_original
from vhd.boundary import item_boundary, one_line
from vhd.detectors.base import Detector, Prediction
from vhd.errors import MediaError, VhdError
from vhd.execution import Work
from vhd.records import Kind, MediaItem

if TYPE_CHECKING:
    from vhd.bench.data import BenchItem
    from vhd.media.load import MediaSettings

Outcome = tuple[int, Prediction, float, float]
"""``(detector index, prediction, start, end)``: one detector's answer on one sample (perf_counter times)."""

Entry = tuple["BenchItem", list[int]]
"""One sample and the indices of the detectors that still need it."""


def load_media(item: BenchItem, original: bool, settings: MediaSettings | None) -> list[Any]:
    """The sample's original bytes (``original``) or its prepared images."""
    from vhd.media.load import MediaSettings, load_sample

    if original:
        return [load_original(item.path, (settings or MediaSettings()).limits)]
    path = Path(item.path)
    media = MediaItem(path=path, kind=item.kind, is_frame_folder=path.is_dir())
    return load_sample(media, settings).images


async def judge(
    detector: Detector,
    index: int,
    kind: Kind,
    images: Sequence[Any],
    slots: asyncio.Semaphore,
    ask: Callable[[], Awaitable[Prediction]] | None = None,
) -> Outcome:
    """One detector's prediction (``ask``: how, instead of `Detector.predict`); a failure is its error."""
    async with slots:
        start = time.perf_counter()
        try:
            pred = await (ask() if ask is not None else detector.predict(kind, images))
        except (VhdError, Exception) as exc:  # one sample's failure never stops the run
            pred = Prediction(None, error=f"{type(exc).__name__}: {exc}")
        end = time.perf_counter()
    if pred.harmful is None and pred.error is None:
        pred.error = "no decision"
    return index, pred, start, end


async def place_in_time(
    detectors: Sequence[Detector],
    settings: MediaSettings | None,
    item: BenchItem,
    found: Sequence[Outcome],
    slots: asyncio.Semaphore,
) -> None:
    """Give the predictions of frame-scoring detectors their harmful spans (`Prediction.segments`).

    The video is sampled over time once (`vhd.bench.timeline.timeline_frames`) for all of them.
    A video that cannot be sampled, or a detector failing on its frames, leaves ``segments``
    None (no answer in time) and the video-level prediction as it is.
    """
    from vhd.bench.timeline import timeline_frames

    wanted = [(i, p) for i, p, _, _ in found if p.harmful is not None and detectors[i].scores_frames]
    if not wanted:
        return
    with item_boundary(item) as b:  # not sampled: the predictions keep segments None (no answer in time)
        frames = await asyncio.to_thread(timeline_frames, item.path, settings)
    if b.failure is not None:
        return
    for index, pred in wanted:
        async with slots:
            with item_boundary(item):  # this detector failing on the frames: no answer in time
                pred.segments = await detectors[index].predict_segments(frames.times, frames.images, end_s=frames.end_s)


async def predict_item(
    detectors: Sequence[Detector],
    settings: MediaSettings | None,
    item: BenchItem,
    todo: Sequence[int],
    slots: asyncio.Semaphore,
    timeline: bool = False,
) -> list[Outcome]:
    """Every detector in ``todo`` on one sample, its media loaded once per form (original or prepared).

    With ``timeline`` (a video whose human label has spans to compare), frame-scoring detectors
    also score frames sampled over the whole video (`place_in_time`).
    """
    plain_file = item.kind is Kind.IMAGE and not Path(item.path).is_dir()
    video_file = item.kind is Kind.VIDEO and Path(item.path).is_file()
    by_file = [i for i in todo if video_file and detectors[i].judges_video_files]
    groups: dict[bool, list[int]] = {}
    for index in todo:
        if index not in by_file:
            groups.setdefault(plain_file and wants_original(detectors[index]), []).append(index)
    prepared: list[list[Any]] = []

    def whole_video() -> list[Any]:  # the prepared frames, read for a file-judging detector only if it asks
        if not prepared:
            prepared.append(load_media(item, False, settings))
        return prepared[0]

    out: list[Outcome] = []
    jobs: list[Coroutine[Any, Any, Outcome]] = []
    try:
        for original, indices in groups.items():
            with item_boundary(item) as b:  # unreadable, damaged, a missing extra, or a surprise: this sample's error
                # Original bytes are a file read and a header parse (well under a millisecond): done
                # inline, since a thread hand-off per sample costs more on a busy machine than that.
                if original:
                    images = load_media(item, True, settings)
                else:
                    images = await asyncio.to_thread(load_media, item, False, settings)
            if b.failure is not None:
                now = time.perf_counter()
                out.extend((index, Prediction(None, error=f"media: {b.failure.reason}"), now, now) for index in indices)
            else:
                prepared.extend([] if original else [images])
                jobs.extend(judge(detectors[index], index, item.kind, images, slots) for index in indices)
        for index in by_file:
            det = detectors[index]
            ask = _file_judge(det, Path(item.path), settings, whole_video)
            jobs.append(judge(det, index, item.kind, [], slots, ask))
    except BaseException:  # cancelled (Ctrl-C) between loads: drop the calls not yet started
        for job in jobs:
            job.close()
        raise
    out.extend(await asyncio.gather(*jobs))
    if timeline and item.kind is Kind.VIDEO:
        await place_in_time(detectors, settings, item, out, slots)
    return out


def _file_judge(
    detector: Detector, path: Path, settings: MediaSettings | None, whole_video: Callable[[], list[Any]]
) -> Callable[[], Awaitable[Prediction]]:
    """`Detector.predict_video_file` on one video file, as `judge`'s ``ask`` (a bad file reads ``media: ...``)."""

    async def ask() -> Prediction:
        try:
            return await detector.predict_video_file(path, settings, whole_video)
        except MediaError as exc:  # unreadable or damaged: "media: ...", as when the frames cannot be read
            return Prediction(None, error=f"media: {one_line(str(exc))}")

    return ask


class DetectWork(Work[Entry, list[Outcome]]):
    """`predict_item` on an executor's worker: the detectors are checked (models loaded) once there.

    Args:
        detectors: Every detector of the run (built on the driver, not yet checked).
        needed: Indices of the detectors with work left (only these are checked).
        settings: How media is prepared.
        concurrency: Detector calls in flight at once on one worker.
        timeline_ids: Samples whose frames over time are scored too (see `predict_item`).
    """

    def __init__(
        self,
        detectors: Sequence[Detector],
        needed: Sequence[int],
        settings: MediaSettings | None,
        concurrency: int,
        timeline_ids: frozenset[str] = frozenset(),
    ) -> None:
        self.timeline_ids = timeline_ids
        self.detectors = list(detectors)
        self.needed = list(needed)
        self.settings = settings
        self.concurrency = concurrency
        self.slots: asyncio.Semaphore | None = None

    async def setup(self) -> None:
        """Check (load) the detectors with work left."""
        self.slots = asyncio.Semaphore(self.concurrency)
        for index in self.needed:
            await self.detectors[index].check()

    async def run(self, item: Entry) -> list[Outcome]:
        """Predictions of the detectors that still need this sample."""
        assert self.slots is not None, "setup() first"
        sample, todo = item
        return await predict_item(
            self.detectors, self.settings, sample, todo, self.slots, sample.id in self.timeline_ids
        )

    async def aclose(self) -> None:
        """Release the detectors."""
        for index in self.needed:
            with suppress(Exception):
                await self.detectors[index].aclose()
