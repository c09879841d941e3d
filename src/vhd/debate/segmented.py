"""A video judged in time: segments, a cheap screen each, a debate for the doubtful ones (``--segments``).

This module sits with the debate (below the annotation workflow and the detectors) so that
``vhd annotate`` (`vhd.annotate.segmented.judge_in_store`) and a detector that reads a video file
can both judge a video segment by segment.

`judge_video` streams a video's segments (`vhd.media.segments.iter_segments`: one decode, memory
flat in the video's length) and decides each with as few calls as it can:

1. **Screen.** One cheap call per segment: the judge alone over the segment's frames (the
   debate's judge prompt with no arguments, `screen_debate`), or with ``--cascade`` the cascade's
   detector stages, which decide the clear segments.
2. **Debate.** Only a segment the screen flags (harmful), cannot read (no decision), or a cascade
   leaves undecided gets the full debate, while the video's call cap (``[video]
   max_calls_per_video``) allows; a segment left over keeps its screen verdict and is named in
   `VideoJudgement.capped`.
3. **Verdict.** The video's verdict follows `VerdictRule` from its segments (harmful when at
   least ``min_harmful_segments`` segments are and they last ``min_harmful_s`` together), names
   the deciding spans in its reason, and carries every segment in `vhd.records.Verdict.segments`.

Segments already stored for the video under the same configuration (a run killed midway) are
taken as they are, not asked again: ``done`` and ``on_segment`` connect the store. A video that
cannot be segmented (`vhd.media.segments.SegmentationError`) is judged by the whole-video protocol
(the frames `vhd.media.load.load_sample` chooses) and the reason is returned in
`VideoJudgement.fallback`. Those frames are read only then (``whole_video`` is a reader, called
after the failure), so a video that segments is decoded once: by the segment pass. Native video
input (a backend that takes the clip itself) plugs in where `_ask_segment` turns a segment into
what the models see.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vhd.config import VideoConfig
from vhd.records import Kind, Segment, Status, Usage, Verdict

if TYPE_CHECKING:
    from vhd.debate.engine import Debate, DebateResult
    from vhd.media.encoded import EncodedImage, EncodedVideo
    from vhd.media.load import MediaSettings
    from vhd.media.segments import SegmentSettings, VideoSegment


class Stages(Protocol):
    """What screens a segment instead of the screen call: `vhd.annotate.cascade.Cascade` (its ``run``)."""

    async def run(self, kind: Kind, images: Sequence[EncodedImage]) -> Any:
        """The stages' outcome: ``decision`` (None: undecided), ``calls`` and ``notes``."""
        ...


SCREEN = "screen"
"""``decided_by`` of a segment the screen call decided."""
DEBATE = "debate"
"""``decided_by`` of a segment the full debate decided."""
CAPPED = "screen (call cap)"
"""``decided_by`` of a segment the screen flagged but the call cap left undebated."""
SEGMENTS = "segments"
"""``decided_by`` of a video whose verdict came from its segments."""
WHOLE_VIDEO = "whole-video"
"""``decided_by`` of a video that could not be segmented and was judged by the whole-video protocol."""


def segment_settings(video: VideoConfig) -> SegmentSettings:
    """The `vhd.media.segments.SegmentSettings` of a ``[video]`` table."""
    from vhd.media.segments import SegmentSettings

    return SegmentSettings(
        detect=video.detect,
        min_s=video.min_segment_s,
        max_s=video.max_segment_s,
        window_s=video.window_s,
        threshold=video.cut_threshold,
        frames=video.frames_per_segment,
    )


def segments_identity(video: VideoConfig) -> dict[str, Any]:
    """What a segmented run adds to the configuration's identity (cuts, frames, rule, cap)."""
    return {
        "segments": segment_settings(video).identity(),
        "rule": [video.min_harmful_segments, video.min_harmful_s],
        "max_calls_per_video": video.max_calls_per_video,
    }


def _clock(seconds: float) -> str:
    tenths_total = round(seconds * 10)
    whole, tenths = divmod(tenths_total, 10)
    tail = f".{tenths}" if tenths else ""
    if whole >= 3600:
        return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}{tail}"
    return f"{whole // 60}:{whole % 60:02d}{tail}"


def span_text(segment: Segment) -> str:
    """A segment's span as ``m:ss-m:ss`` (``h:mm:ss`` past an hour; tenths of a second when not whole)."""
    return f"{_clock(segment.start_s)}-{_clock(segment.end_s)}"


@dataclass(frozen=True)
class VerdictRule:
    """How a video's verdict follows from its segments' verdicts.

    Attributes:
        min_segments: Harmful segments needed (1: harmful if any segment is).
        min_duration_s: Seconds the harmful segments must last together.
    """

    min_segments: int = 1
    min_duration_s: float = 0.0

    @classmethod
    def of(cls, video: VideoConfig) -> VerdictRule:
        """The rule of a ``[video]`` table."""
        return cls(video.min_harmful_segments, video.min_harmful_s)

    def describe(self) -> str:
        """The rule in words."""
        text = "any segment harmful" if self.min_segments == 1 else f"at least {self.min_segments} harmful segments"
        return text + (f" lasting {self.min_duration_s:g} s together" if self.min_duration_s else "")

    def decide(self, segments: Sequence[Segment]) -> Verdict:
        """The video's verdict: harmful by this rule, with the deciding spans in the reason.

        A video whose harmful segments do not meet the rule, while some segment has no decision,
        has no decision either (status unparsed: a later run asks those segments again).
        """
        harmful = [s for s in segments if s.harmful]
        duration = sum(s.duration_s for s in harmful)
        scores = [s.score for s in segments if s.score is not None]
        score = max(scores) if scores else None
        if harmful and len(harmful) >= self.min_segments and duration >= self.min_duration_s:
            spans = "; ".join(f"{span_text(s)} {s.reason}".strip() for s in harmful[:5])
            more = f"; and {len(harmful) - 5} more" if len(harmful) > 5 else ""
            categories = list(dict.fromkeys(c for s in harmful for c in s.categories))
            reason = f"harmful in {len(harmful)} of {len(segments)} segments: {spans}{more}"
            severity = next((s.severity for s in harmful if s.severity), None)
            return Verdict(True, reason, categories, score, severity=severity, segments=list(segments))
        undecided = [s for s in segments if s.harmful is None]
        if undecided:
            why = f"{len(undecided)} of {len(segments)} segments undecided (first at {span_text(undecided[0])})"
            return Verdict(None, why, score=score, status=Status.UNPARSED, segments=list(segments))
        found = f"{len(harmful)} harmful segment(s) short of the rule ({self.describe()})" if harmful else ""
        reason = found or f"no harmful segment among {len(segments)}"
        return Verdict(False, reason, score=score, segments=list(segments))


def screen_debate(debate: Debate) -> Debate:
    """A copy of ``debate`` that makes one call: the judge over the frames, with no arguments."""
    import copy

    screen = copy.copy(debate)
    screen.rounds = 0
    screen._system = {}  # the prompts name the rounds: render them again for this copy
    screen._judge_prefix = {}
    return screen


@dataclass
class VideoJudgement:
    """What `judge_video` found for one video.

    Attributes:
        verdict: The video's verdict (``segments`` filled unless it fell back).
        turns: The turns of the segments debated in this run (screens are in the segments' reasons).
        usage: Calls and tokens this run spent on the video.
        decided_by: `SEGMENTS`, or `WHOLE_VIDEO` after a fallback.
        fallback: Why the video could not be segmented, when it could not.
        capped: Positions of the segments the call cap left at their screen verdict.
        resumed: Segments taken from the store as they were.
        stage_calls: Calls the cascade's stages made (also in ``usage.calls``).
        error: A model call's failure that left the video undecided, if any.
        retryable: Whether that failure may go away on a later try.
    """

    verdict: Verdict
    turns: list[Any] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    decided_by: str = SEGMENTS
    fallback: str | None = None
    capped: list[int] = field(default_factory=list)
    resumed: int = 0
    stage_calls: int = 0
    error: str | None = None
    retryable: bool = True


def _encode(segment: VideoSegment, media: MediaSettings) -> list[EncodedImage]:
    from vhd.media.image import encode_image

    return [encode_image(im, max_side=media.max_side, fmt=media.fmt, quality=media.quality) for im in segment.images]


def _clip(path: str | Path, segment: VideoSegment, media: MediaSettings) -> EncodedVideo | None:
    from vhd.media.clip import video_content

    return video_content(path, segment.start_s, segment.end_s, "native", media.clip).clip


def _from_result(segment: VideoSegment, result: DebateResult, by: str) -> Segment:
    v = result.verdict
    harmful = v.harmful if v.status in (Status.OK, Status.REFUSED) else None
    return Segment(segment.start_s, segment.end_s, harmful, v.score, v.reason, list(v.categories), v.severity, by)


class _Budget:
    """The calls one video may still spend (None: no cap)."""

    def __init__(self, cap: int | None) -> None:
        self.left = cap

    def allows(self, calls: int) -> bool:
        return self.left is None or self.left >= calls

    def spend(self, calls: int) -> None:
        if self.left is not None:
            self.left -= calls


async def _next(segments: Generator[VideoSegment, None, None]) -> VideoSegment | None:
    return await asyncio.to_thread(next, segments, None)


async def judge_video(
    path: str | Path,
    video: VideoConfig,
    media: MediaSettings,
    *,
    debate: Debate,
    screen: Debate | None = None,
    cascade: Stages | None = None,
    whole_video: Callable[[], tuple[Sequence[EncodedImage], EncodedVideo | None]] | None = None,
    done: Mapping[int, Segment] | None = None,
    on_segment: Callable[[int, Segment, int], None] | None = None,
) -> VideoJudgement:
    """Judge one video segment by segment (see the module notes).

    Args:
        path: The video file.
        video: The ``[video]`` settings (cuts, frames, rule, call cap).
        media: How frames are encoded for the models; with ``media.clip`` set (native video
            input), each segment is also cut as one clip of its span for the roles that take videos.
        debate: The full debate (for flagged or uncertain segments).
        screen: The one-call screen; default `screen_debate` of ``debate``.
        cascade: Detector stages that screen each segment instead of the screen call.
        whole_video: Reads the whole-video protocol's frames, and with native video input
            (``media.clip`` set) its clip (else None), for a video that cannot be segmented;
            called once, in a thread, only then (None: such a video ends with status error).
        done: Segments already decided under this configuration, by position (a resumed run).
        on_segment: Called with ``(position, segment, calls spent on it)`` as each is decided.

    Returns:
        The video's verdict with its segments, the turns and usage, and what was capped or resumed.

    Raises:
        MediaError: The file is unreadable or damaged (before or while decoding), or, after a
            fallback, ``whole_video`` cannot read it either.
    """
    from vhd.media.segments import SegmentationError, iter_segments

    screen = screen or screen_debate(debate)
    done = done or {}
    budget = _Budget(video.max_calls_per_video)
    out = VideoJudgement(Verdict(None, ""))
    decided: list[Segment] = []
    max_pixels = media.limits.effective_max_frame_pixels
    stream = iter_segments(path, segment_settings(video), max_pixels=max_pixels)
    try:
        while (segment := await _next(stream)) is not None:
            earlier = done.get(segment.index)
            if earlier is not None and earlier.harmful is not None and earlier.start_s == segment.start_s:
                decided.append(earlier)
                out.resumed += 1
                continue
            before = out.usage.calls
            judged = await _ask_segment(path, segment, media, debate, screen, cascade, budget, out)
            if judged.harmful is None and out.error is not None:  # the model failed: stop, keep what is stored
                out.verdict = Verdict(None, "", status=Status.ERROR, segments=[*decided, judged])
                return out
            decided.append(judged)
            if on_segment is not None:
                on_segment(segment.index, judged, out.usage.calls - before)
    except SegmentationError as exc:
        out.fallback = str(exc)
    finally:
        stream.close()
    if out.fallback is None:
        out.verdict = VerdictRule.of(video).decide(decided)
        return out
    out.decided_by = WHOLE_VIDEO
    if whole_video is None:
        out.verdict = Verdict(None, "", status=Status.ERROR)
        out.error, out.retryable = f"cannot segment the video ({out.fallback})", False
        return out
    images, clip = await asyncio.to_thread(whole_video)
    result = await debate.run(Kind.VIDEO, images, clip)
    out.verdict, out.turns, out.error, out.retryable = result.verdict, result.turns, result.error, result.retryable
    out.usage.add(result.usage)
    return out


async def _ask_segment(
    path: str | Path,
    segment: VideoSegment,
    media: MediaSettings,
    debate: Debate,
    screen: Debate,
    cascade: Stages | None,
    budget: _Budget,
    out: VideoJudgement,
) -> Segment:
    """Screen one segment, and debate it when the screen flags it or cannot decide (within the cap).

    The cascade's detectors always see the segment's frames; the screen and the debate also get the
    span as one clip when native video input is on (``media.clip``), for the roles that take videos.
    """
    images = await asyncio.to_thread(_encode, segment, media)
    segment.images = []  # the encoded frames are what is kept from here on
    clip = None if media.clip is None else await asyncio.to_thread(_clip, path, segment, media)
    if cascade is not None:
        outcome = await cascade.run(Kind.VIDEO, images)
        out.usage.add(Usage(calls=outcome.calls))
        out.stage_calls += outcome.calls
        budget.spend(outcome.calls)
        stage = outcome.decision
        if stage is not None:
            return Segment(
                segment.start_s,
                segment.end_s,
                stage.harmful,
                stage.score,
                stage.reason(),
                stage.categories,
                None,
                stage.label,
            )
        screened = Segment(segment.start_s, segment.end_s, None, None, "; ".join(outcome.notes), [], None, CAPPED)
    else:
        first = await screen.run(Kind.VIDEO, images, clip)
        out.usage.add(first.usage)
        budget.spend(first.usage.calls)
        screened = _from_result(segment, first, SCREEN)
        if screened.harmful is False:
            return screened
        screened.decided_by = CAPPED
        if not budget.allows(debate.calls_per_debate) and first.error is not None:
            out.error, out.retryable = first.error, first.retryable
    if not budget.allows(debate.calls_per_debate):
        out.capped.append(segment.index)
        return screened
    result = await debate.run(Kind.VIDEO, images, clip)
    out.usage.add(result.usage)
    budget.spend(result.usage.calls)
    out.turns.extend(result.turns)
    if result.error is not None:
        out.error, out.retryable = result.error, result.retryable
    return _from_result(segment, result, DEBATE)
