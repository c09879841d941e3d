"""``vhd annotate --segments`` in a run that writes to a store: `judge_in_store`.

The segment-by-segment judgement itself (`judge_video`, the screen, the verdict rule) is
`vhd.debate.segmented`, which detectors can use too; this module adds the store: each segment
written the moment it is decided, and the segments a killed run had finished taken back. The
store's process (the driver) does this whether the calls run here or on an executor's workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vhd.config import VideoConfig
from vhd.debate.segmented import (
    CALL_CAP,
    CAPPED,
    DEBATE,
    FAILED,
    SCREEN,
    SEGMENTS,
    WHOLE_VIDEO,
    VerdictRule,
    VideoJudgement,
    judge_video,
    screen_debate,
    segment_settings,
    segments_identity,
    span_text,
)
from vhd.records import MediaItem, Sample, Segment

if TYPE_CHECKING:
    from vhd.annotate.cascade import Cascade
    from vhd.debate.engine import Debate
    from vhd.debate.segmented import SegmentCalls
    from vhd.media.encoded import EncodedImage, EncodedVideo
    from vhd.media.load import LoadedSample, MediaSettings
    from vhd.progress import ProgressFn
    from vhd.store.sqlite import Store

__all__ = [
    "CALL_CAP",
    "CAPPED",
    "DEBATE",
    "FAILED",
    "SCREEN",
    "SEGMENTS",
    "WHOLE_VIDEO",
    "VerdictRule",
    "VideoJudgement",
    "WholeVideo",
    "judge_in_store",
    "judge_video",
    "screen_debate",
    "segment_settings",
    "segments_identity",
    "span_text",
]


class WholeVideo:
    """The whole-video protocol's frames of one video file, read only when asked (a segmented video's fallback).

    Pass it as ``whole_video`` to `judge_video` / `judge_in_store`: a video that segments is then
    decoded once, by the segment pass, and one that cannot be segmented is read here.

    Args:
        item: The video file.
        settings: How its frames are read and encoded (`vhd.media.load.load_sample`).
    """

    def __init__(self, item: MediaItem, settings: MediaSettings) -> None:
        self.item = item
        self.settings = settings
        self.loaded: LoadedSample | None = None

    def __call__(self) -> tuple[list[EncodedImage], EncodedVideo | None]:
        """Read the frames (and clip, with native video input).

        Raises:
            MediaError: The file cannot be read for the whole-video protocol either.
        """
        from vhd.media.load import load_sample

        self.loaded = load_sample(self.item, self.settings)
        return self.loaded.images, self.loaded.clip

    def sample(self, described: Sample) -> Sample:
        """The sample to store: the one read with its frames when they were read, else ``described``."""
        return described if self.loaded is None else self.loaded.sample


async def judge_in_store(
    db: Store,
    run_id: str,
    config_hash: str,
    sample: Sample,
    path: Path,
    video: VideoConfig,
    media: MediaSettings,
    debate: Debate,
    cascade: Cascade | None = None,
    whole_video: Callable[[], tuple[Sequence[EncodedImage], EncodedVideo | None]] | None = None,
    *,
    calls: SegmentCalls | None = None,
    parallel: int = 1,
    progress: ProgressFn | None = None,
) -> VideoJudgement:
    """`judge_video` for a run that writes to a store: segments stored as each is decided, stored ones reused.

    The sample is stored with its first segment (a file that turns out unreadable leaves no trace).

    Args:
        db: The run's store.
        run_id: The run.
        config_hash: The configuration the segments are judged under.
        sample: The video's sample (`vhd.media.load.describe_sample`: nothing decoded yet).
        path: The video file.
        video: The ``[video]`` settings.
        media: How frames are encoded.
        debate: The full debate.
        cascade: The cascade's stages, when they screen (run in this process).
        whole_video: Reads the whole-video protocol's frames and clip, only for a video that cannot
            be segmented (see `judge_video`).
        calls: Where the screen and debate calls run (default: here, with ``debate``); an
            executor's pool (`vhd.annotate.work.PoolCalls`) judges the segments on its workers.
        parallel: Segments of the video judged at once.
        progress: Told the seconds of the video decided so far (see `judge_video`).

    Returns:
        What `judge_video` returns.
    """
    stored: list[bool] = []

    def on_segment(index: int, segment: Segment, calls: int) -> None:
        if not stored:  # before its segments are written
            db.upsert_sample(sample)
            stored.append(True)
        db.save_segment(sample.id, config_hash, run_id, index, segment, calls)

    return await judge_video(
        path,
        video,
        media,
        debate=debate,
        screen=screen_debate(debate),
        calls=calls,
        parallel=parallel,
        cascade=cascade,
        whole_video=whole_video,
        done=db.stored_segments(sample.id, config_hash),
        done_calls=db.stored_segment_calls(sample.id, config_hash),
        on_segment=on_segment,
        progress=progress,
    )
