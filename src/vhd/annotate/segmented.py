"""``vhd annotate --segments`` in a run that writes to a store: `judge_in_store`.

The segment-by-segment judgement itself (`judge_video`, the screen, the verdict rule) is
`vhd.debate.segmented`, which detectors can use too; this module adds the store: each segment
written the moment it is decided, and the segments a killed run had finished taken back. The
store's process (the driver) does this whether the calls run here or on an executor's workers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vhd.config import VideoConfig
from vhd.debate.segmented import (
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
from vhd.records import Segment

if TYPE_CHECKING:
    from vhd.annotate.cascade import Cascade
    from vhd.debate.engine import Debate
    from vhd.debate.segmented import SegmentCalls
    from vhd.media.load import LoadedSample, MediaSettings
    from vhd.store.sqlite import Store

__all__ = [
    "CAPPED",
    "DEBATE",
    "FAILED",
    "SCREEN",
    "SEGMENTS",
    "WHOLE_VIDEO",
    "VerdictRule",
    "VideoJudgement",
    "judge_in_store",
    "judge_video",
    "screen_debate",
    "segment_settings",
    "segments_identity",
    "span_text",
]


async def judge_in_store(
    db: Store,
    run_id: str,
    config_hash: str,
    loaded: LoadedSample,
    path: Path,
    video: VideoConfig,
    media: MediaSettings,
    debate: Debate,
    cascade: Cascade | None = None,
    *,
    calls: SegmentCalls | None = None,
    parallel: int = 1,
) -> VideoJudgement:
    """`judge_video` for a run that writes to a store: segments stored as each is decided, stored ones reused.

    Args:
        db: The run's store.
        run_id: The run.
        config_hash: The configuration the segments are judged under.
        loaded: The video's sample and its whole-video frames (the fallback).
        path: The video file.
        video: The ``[video]`` settings.
        media: How frames are encoded.
        debate: The full debate.
        cascade: The cascade's stages, when they screen (run in this process).
        calls: Where the screen and debate calls run (default: here, with ``debate``); an
            executor's pool (`vhd.annotate.work.PoolCalls`) judges the segments on its workers.
        parallel: Segments of the video judged at once.

    Returns:
        What `judge_video` returns.
    """
    sample = loaded.sample
    db.upsert_sample(sample)  # before its segments are written

    def on_segment(index: int, segment: Segment, calls: int) -> None:
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
        whole_video=loaded.images,
        whole_clip=loaded.clip,
        done=db.stored_segments(sample.id, config_hash),
        on_segment=on_segment,
    )
