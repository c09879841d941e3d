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
taken as they are, not asked again: ``done`` and ``on_segment`` connect the store. Where the
calls run is `SegmentCalls`: in this process (`InProcess`), or on an executor's workers, each
screen and each debate one work item (`vhd.annotate.work.PoolCalls`), with ``parallel``
segments of the video in flight at once; the call cap is still applied in segment order. A video that
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
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vhd.boundary import ItemFailure, item_boundary
from vhd.config import VideoConfig
from vhd.errors import WorkerLostError
from vhd.records import Kind, Segment, Status, Usage, Verdict

if TYPE_CHECKING:
    from vhd.debate.engine import Debate, DebateResult
    from vhd.media.encoded import EncodedImage, EncodedVideo
    from vhd.media.load import MediaSettings
    from vhd.media.segments import SegmentSettings, VideoSegment
    from vhd.progress import ProgressFn


class Stages(Protocol):
    """What screens a segment instead of the screen call: `vhd.annotate.cascade.Cascade` (its ``run``)."""

    async def run(self, kind: Kind, images: Sequence[EncodedImage]) -> Any:
        """The stages' outcome: ``decision`` (None: undecided), ``calls`` and ``notes``."""
        ...

    def most_calls(self, kind: Kind, images: int) -> int:
        """The calls the stages make at most on a sample of ``images`` frames (what the call cap reserves)."""
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
FAILED = "error"
"""``decided_by`` of a segment whose judgement raised (no decision; a later run asks it again)."""
CALL_CAP = "the call cap ({cap} calls a video, max_calls_per_video) is spent"
"""Why the rest of a video is not judged when not even its next screen fits the call cap."""


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
        max_segments=video.max_segments_per_video,
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

    def decide(self, segments: Sequence[Segment], rest: str | None = None) -> Verdict:
        """The video's verdict: harmful by this rule, with the deciding spans in the reason.

        A video whose harmful segments do not meet the rule, while some segment has no decision,
        has no decision either (status unparsed: a later run asks those segments again).

        Args:
            segments: The video's segments, in time order.
            rest: Set when the segments end before the video does (the call cap, the segment
                bound): what was not judged and why. The reason then says it; a video that the
                judged segments do not make harmful has no decision (status unparsed), never
                "not harmful" for what nobody looked at.
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
            reason += f"; {rest}" if rest else ""
            severity = next((s.severity for s in harmful if s.severity), None)
            return Verdict(True, reason, categories, score, severity=severity, segments=list(segments))
        undecided = [s for s in segments if s.harmful is None]
        if undecided:
            why = f"{len(undecided)} of {len(segments)} segments undecided (first at {span_text(undecided[0])})"
            return Verdict(None, why, score=score, status=Status.UNPARSED, segments=list(segments))
        found = f"{len(harmful)} harmful segment(s) short of the rule ({self.describe()})" if harmful else ""
        reason = found or f"no harmful segment among {len(segments)}"
        if rest:
            return Verdict(None, f"{rest}; {reason}", score=score, status=Status.UNPARSED, segments=list(segments))
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
        skipped: Set when the video's segments end before the video does: from where and why
            the rest was not judged (the call cap spent, the segment bound); also in the verdict's reason.
        unjudged_from_s: Where the part not judged starts (with ``skipped``).
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
    skipped: str | None = None
    unjudged_from_s: float | None = None
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


def _from_result(span: tuple[float, float], result: DebateResult, by: str) -> Segment:
    v = result.verdict
    harmful = v.harmful if v.status in (Status.OK, Status.REFUSED) else None
    return Segment(span[0], span[1], harmful, v.score, v.reason, list(v.categories), v.severity, by)


class SegmentCalls(Protocol):
    """Where a segment's model calls run: in this process (`InProcess`) or on an executor's workers.

    `judge_video` decides what is asked and when (the screen, the debate of a flagged segment, the
    call cap, the verdict); a `SegmentCalls` only runs the asking, so one judgement serves a local
    run and a run on Ray (`vhd.annotate.work.PoolCalls`, which sends each call as a work item).
    """

    @property
    def calls_per_debate(self) -> int:
        """The most calls a full debate can make (what the call cap reserves for one)."""
        ...

    @property
    def calls_per_screen(self) -> int:
        """The most calls a screen can make (what the call cap reserves for one)."""
        ...

    async def screen(
        self, images: Sequence[EncodedImage], clip: EncodedVideo | None, span: tuple[float, float]
    ) -> DebateResult:
        """The one-call screen of a segment's frames (and clip, with native video input)."""
        ...

    async def debate(
        self, images: Sequence[EncodedImage], clip: EncodedVideo | None, span: tuple[float, float] | None
    ) -> DebateResult:
        """The full debate of a segment (``span``) or, with ``span`` None, of the whole-video frames."""
        ...


class InProcess:
    """`SegmentCalls` made in this process, with the run's own debate and its screen copy.

    Args:
        debate: The full debate.
        screen: The one-call screen; default `screen_debate` of ``debate``.
    """

    def __init__(self, debate: Debate, screen: Debate | None = None) -> None:
        self.full = debate
        self.one = screen or screen_debate(debate)

    @property
    def calls_per_debate(self) -> int:
        """The most calls of the full debate (`vhd.debate.engine.Debate.most_calls`)."""
        return self.full.most_calls

    @property
    def calls_per_screen(self) -> int:
        """The most calls of the screen."""
        return self.one.most_calls

    async def screen(
        self, images: Sequence[EncodedImage], clip: EncodedVideo | None, span: tuple[float, float]
    ) -> DebateResult:
        """The screen call."""
        return await self.one.run(Kind.VIDEO, images, clip)

    async def debate(
        self, images: Sequence[EncodedImage], clip: EncodedVideo | None, span: tuple[float, float] | None
    ) -> DebateResult:
        """The full debate."""
        return await self.full.run(Kind.VIDEO, images, clip)


class _Budget:
    """The calls one video may still spend (None: no cap), and the debates not yet granted or refused.

    Every call is counted before it is made: a screen when it is started (in segment order), a
    debate when it is granted, each at its most (`SegmentCalls.calls_per_screen`,
    ``calls_per_debate``), and corrected by what it spent when it returns. A screen may start
    before the debates of earlier segments are decided only while the cap would still grant all
    of them: so segments in flight at once are debated and capped as one by one.
    """

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.left = cap
        self.pending: list[tuple[asyncio.Event, int]] = []  # (decided, reserved at most) of earlier segments

    def allows(self, calls: int) -> bool:
        return self.left is None or self.left >= calls

    def spend(self, calls: int) -> None:
        if self.left is not None:
            self.left -= calls

    async def ahead(self, calls: int, *, must: bool = False) -> bool:
        """Count ``calls`` (a screen about to start, or ``must``: already spent) once earlier debates allow.

        Returns:
            Whether they were counted: False when the cap cannot pay for them (never with ``must``).
        """
        while self.left is not None:
            self.pending = [(event, most) for event, most in self.pending if not event.is_set()]
            if self.left - calls >= sum(most for _, most in self.pending):
                break  # every earlier debate still fits beside these
            if not self.pending:
                if not must:
                    return False
                break
            await self.pending[0][0].wait()
        self.spend(calls)
        return True


@dataclass
class _Judged:
    """One segment's judgement in this run, kept until the video's verdict is put together in order."""

    segment: Segment
    usage: Usage = field(default_factory=Usage)
    turns: list[Any] = field(default_factory=list)
    stage_calls: int = 0
    capped: bool = False
    error: str | None = None
    retryable: bool = True
    raised: bool = False


async def _next(segments: Generator[VideoSegment, None, None]) -> VideoSegment | None:
    return await asyncio.to_thread(next, segments, None)


def _screen_cost(calls: SegmentCalls, cascade: Stages | None, segment: VideoSegment) -> int:
    """The most calls a segment's screen makes: the screen call's, or every cascade stage's."""
    return calls.calls_per_screen if cascade is None else cascade.most_calls(Kind.VIDEO, len(segment.images))


def _rest(out: VideoJudgement, segment: VideoSegment, at_s: float, why: str | None) -> bool:
    """Note that the video is not judged from ``at_s`` on, when there is a ``why``; whether there was."""
    if why is not None:
        out.skipped, out.unjudged_from_s = f"not judged from {_clock(at_s)} on: {why}", at_s
    return why is not None


class _Told:
    """The seconds of a video decided so far, told to a `ProgressFn` as each segment is decided."""

    def __init__(self, progress: ProgressFn | None) -> None:
        self.progress = progress
        self.seconds = 0.0
        self.count = 0
        self.total: float | None = None

    def expect(self, video_s: float | None) -> None:
        self.total = video_s if video_s is not None else self.total

    def segment(self, segment: Segment, video_s: float | None = None) -> None:
        self.expect(video_s)
        self.seconds += max(0.0, segment.duration_s)
        self.count += 1
        self.tell()

    def done(self) -> None:
        self.total = self.seconds  # the header's length was a hint: the video ends where its segments do
        self.tell()

    def tell(self) -> None:
        if self.progress is not None and self.count:
            total = None if self.total is None else int(max(self.total, self.seconds))
            self.progress(int(self.seconds), total, stage="segments", info=f"{self.count} segment(s)")


async def judge_video(
    path: str | Path,
    video: VideoConfig,
    media: MediaSettings,
    *,
    debate: Debate | None = None,
    screen: Debate | None = None,
    calls: SegmentCalls | None = None,
    parallel: int = 1,
    cascade: Stages | None = None,
    whole_video: Callable[[], tuple[Sequence[EncodedImage], EncodedVideo | None]] | None = None,
    done: Mapping[int, Segment] | None = None,
    done_calls: Mapping[int, int] | None = None,
    on_segment: Callable[[int, Segment, int], None] | None = None,
    progress: ProgressFn | None = None,
) -> VideoJudgement:
    """Judge one video segment by segment (see the module notes).

    The video is decoded here, once, in a stream; up to ``parallel`` of its segments are judged at
    once (``calls`` may run them on several workers). Whatever their order of arrival, the call
    cap is applied in segment order: a segment's debate is granted only once every earlier
    segment's has been granted or refused, from what the cap leaves after the screens up to this
    segment and the debates granted before it (each counted at its full size, `calls_per_debate`,
    when granted, and corrected by what it really spent when it returns). With ``parallel=1`` that
    is exactly the order of a sequential run. The cap counts every call: a screen is started only
    when it fits, and once none does, the rest of the video is not judged (`VideoJudgement.skipped`).

    Args:
        path: The video file.
        video: The ``[video]`` settings (cuts, frames, rule, call cap).
        media: How frames are encoded for the models; with ``media.clip`` set (native video
            input), each segment is also cut as one clip of its span for the roles that take videos.
        debate: The full debate (for flagged or uncertain segments); needed unless ``calls`` is given.
        screen: The one-call screen; default `screen_debate` of ``debate``.
        calls: Where the screen and debate calls run; default `InProcess` of ``debate`` and ``screen``.
        parallel: Segments judged at once (1: one after the other, in this process's order).
        cascade: Detector stages that screen each segment instead of the screen call (run here).
        whole_video: Reads the whole-video protocol's frames, and with native video input
            (``media.clip`` set) its clip (else None), for a video that cannot be segmented;
            called once, in a thread, only then (None: such a video ends with status error).
        done: Segments already decided under this configuration, by position (a resumed run).
        done_calls: The calls the run that decided ``done``'s segments spent on each, by position:
            counted against the call cap in segment order as they are taken back, so a resumed
            video is capped as if its first run had gone on.
        on_segment: Called with ``(position, segment, calls spent on it)`` as each is decided.
        progress: Told the seconds of video decided so far, of the length its header declares
            (None when unknown), as each segment is decided (stage ``segments``).

    Returns:
        The video's verdict with its segments, the turns and usage, and what was capped or resumed.
        A segment whose judgement raised (a bug, a worker that kept dying) is that segment's
        outcome (`FAILED`, no decision) and the others go on; the video's verdict then stands if
        the other segments decide it, else it ends with status error (the next run asks again).

    Raises:
        MediaError: The file is unreadable or damaged (before or while decoding), or, after a
            fallback, ``whole_video`` cannot read it either.
        ValueError: Neither ``debate`` nor ``calls`` was given.
    """
    from vhd.media.segments import SegmentationError, iter_segments

    if calls is None:
        if debate is None:
            raise ValueError("judge_video needs the debate (debate=...) or where its calls run (calls=...)")
        calls = InProcess(debate, screen)
    done = done or {}
    budget = _Budget(video.max_calls_per_video)
    out = VideoJudgement(Verdict(None, ""))
    told = _Told(progress)
    order: list[int] = []
    resumed: dict[int, Segment] = {}
    results: dict[int, _Judged] = {}
    slots = asyncio.Semaphore(max(1, parallel))
    tasks: list[asyncio.Task[None]] = []
    stopped: list[int] = []  # a model call failed: no further segment is started

    async def one(segment: VideoSegment, before: asyncio.Event | None, mine: asyncio.Event, cost: int) -> None:
        try:
            judged = await _guarded_segment(path, segment, media, calls, cascade, (budget, cost), before, mine)
            results[segment.index] = judged
            told.segment(judged.segment)
            if judged.raised:
                return  # stored with the video's verdict, asked again by a later run
            if judged.segment.harmful is None and judged.error is not None:
                stopped.append(segment.index)  # the model failed: stop, keep what is stored
                return
            if on_segment is not None:
                on_segment(segment.index, judged.segment, judged.usage.calls)
        finally:
            mine.set()
            slots.release()

    settings = replace(segment_settings(video), keep_side=media.max_side)  # kept as the models are sent them
    stream = iter_segments(path, settings, max_pixels=media.limits.effective_max_frame_pixels)
    last: asyncio.Event | None = None
    try:
        try:
            while True:
                await slots.acquire()
                if stopped or any(t.done() and not t.cancelled() and t.exception() for t in tasks):
                    slots.release()  # a model call failed, or a run fault (a store write) ends the video
                    break
                segment = await _next(stream)
                earlier = None if segment is None else done.get(segment.index)
                if segment is None or (
                    earlier is not None and earlier.harmful is not None and earlier.start_s == segment.start_s
                ):
                    slots.release()
                    if segment is None:
                        break
                    assert earlier is not None
                    order.append(segment.index)
                    resumed[segment.index] = earlier
                    out.resumed += 1
                    told.segment(earlier, segment.video_s)
                    await budget.ahead((done_calls or {}).get(segment.index, 0), must=True)  # as its first run did
                    if _rest(out, segment, segment.end_s, segment.stopped):
                        break
                    continue
                cost = _screen_cost(calls, cascade, segment)
                if not await budget.ahead(cost):  # not even this segment's screen fits the cap
                    slots.release()
                    _rest(out, segment, segment.start_s, CALL_CAP.format(cap=budget.cap))
                    break
                if stopped:  # a model call failed while this screen waited for room
                    slots.release()
                    break
                told.expect(segment.video_s)
                order.append(segment.index)
                before, last = last, asyncio.Event()
                budget.pending.append((last, calls.calls_per_debate))
                tasks.append(asyncio.create_task(one(segment, before, last, cost)))
                if _rest(out, segment, segment.end_s, segment.stopped):
                    break
        except SegmentationError as exc:
            out.fallback = str(exc)
        finally:
            with suppress(ValueError):  # still running in its thread (cancelled meanwhile): closed when it ends
                stream.close()
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    if out.fallback is None:
        told.done()
        return _assemble(out, video, order, resumed, results, bool(stopped))
    out.decided_by = WHOLE_VIDEO
    for judged in results.values():  # calls spent before the stream gave out
        out.usage.add(judged.usage)
        out.stage_calls += judged.stage_calls
    if whole_video is None:
        out.verdict = Verdict(None, "", status=Status.ERROR)
        out.error, out.retryable = f"cannot segment the video ({out.fallback})", False
        return out
    if not budget.allows(calls.calls_per_debate):  # the cap counts the calls spent before the stream gave out
        why = f"not judged by the whole-video protocol: {CALL_CAP.format(cap=budget.cap)}"
        out.verdict, out.skipped = Verdict(None, why, status=Status.UNPARSED), why
        return out
    images, clip = await asyncio.to_thread(whole_video)
    result = await calls.debate(images, clip, None)
    out.verdict, out.turns, out.error, out.retryable = result.verdict, result.turns, result.error, result.retryable
    out.usage.add(result.usage)
    return out


def _assemble(
    out: VideoJudgement,
    video: VideoConfig,
    order: Sequence[int],
    resumed: Mapping[int, Segment],
    results: Mapping[int, _Judged],
    stopped: bool,
) -> VideoJudgement:
    """The video's verdict from its segments, put together in segment order."""
    decided: list[Segment] = []
    failure: _Judged | None = None
    raised: _Judged | None = None
    for index in order:
        if index in resumed:
            decided.append(resumed[index])
            continue
        judged = results[index]
        out.usage.add(judged.usage)
        out.stage_calls += judged.stage_calls
        out.turns.extend(judged.turns)
        out.capped.extend([index] if judged.capped else [])
        decided.append(judged.segment)
        if judged.raised:
            raised = raised or judged
        elif failure is None and judged.segment.harmful is None and judged.error is not None:
            failure = judged
    if stopped and failure is not None:
        out.error, out.retryable = failure.error, failure.retryable
        out.verdict = Verdict(None, "", status=Status.ERROR, segments=decided)
        return out
    out.verdict = VerdictRule.of(video).decide(decided, out.skipped)
    if raised is not None and out.verdict.status is Status.UNPARSED:
        out.error = f"{span_text(raised.segment)}: {raised.error}"
        out.verdict = Verdict(None, "", score=out.verdict.score, status=Status.ERROR, segments=decided)
    return out


async def _guarded_segment(
    path: str | Path,
    segment: VideoSegment,
    media: MediaSettings,
    calls: SegmentCalls,
    cascade: Stages | None,
    budget: tuple[_Budget, int],
    before: asyncio.Event | None,
    mine: asyncio.Event,
) -> _Judged:
    """`_ask_segment` inside the item boundary: a segment whose judgement raised is its own outcome.

    A worker that kept dying on the segment (`WorkerLostError`, a run fault for a whole sample)
    is such an outcome too: the segment is asked again by a later run, the video goes on.
    """
    failure: ItemFailure | None = None
    try:
        with item_boundary(segment.index) as boundary:
            return await _ask_segment(path, segment, media, calls, cascade, budget, before, mine)
        failure = boundary.failure
    except WorkerLostError as exc:
        failure = ItemFailure.of(exc)
    assert failure is not None
    reason = f"not judged: {failure.reason}"
    failed = Segment(segment.start_s, segment.end_s, None, None, reason, [], None, FAILED)
    return _Judged(failed, error=failure.reason, raised=True)


async def _ask_segment(
    path: str | Path,
    segment: VideoSegment,
    media: MediaSettings,
    calls: SegmentCalls,
    cascade: Stages | None,
    counted: tuple[_Budget, int],
    before: asyncio.Event | None,
    mine: asyncio.Event,
) -> _Judged:
    """Screen one segment, and debate it when the screen flags it or cannot decide (within the cap).

    The cascade's detectors always see the segment's frames; the screen and the debate also get the
    span as one clip when native video input is on (``media.clip``), for the roles that take videos.
    The cap's decision waits for ``before`` (the previous segment's) and sets ``mine``; ``counted``
    is the video's budget with what it already counted for this screen.
    """
    budget, screen_cost = counted
    images = await asyncio.to_thread(_encode, segment, media)
    segment.images = []  # the encoded frames are what is kept from here on
    clip = None if media.clip is None else await asyncio.to_thread(_clip, path, segment, media)
    span = (segment.start_s, segment.end_s)
    usage = Usage()
    stage_calls = 0
    first: DebateResult | None = None
    settled: Segment | None = None
    if cascade is not None:
        outcome = await cascade.run(Kind.VIDEO, images)
        stage_calls = outcome.calls
        usage.add(Usage(calls=outcome.calls))
        stage = outcome.decision
        if stage is not None:
            settled = Segment(
                segment.start_s, segment.end_s, stage.harmful, stage.score, stage.reason(), stage.categories,
                None, stage.label,
            )  # fmt: skip
        screened = Segment(segment.start_s, segment.end_s, None, None, "; ".join(outcome.notes), [], None, CAPPED)
    else:
        first = await calls.screen(images, clip, span)
        usage.add(first.usage)
        screened = _from_result(span, first, SCREEN)
        if screened.harmful is False:
            settled = screened
        screened.decided_by = CAPPED if settled is None else SCREEN
    if before is not None:
        await before.wait()  # the cap is applied in segment order
    budget.spend(usage.calls - screen_cost)  # the screen was counted at its most when it started
    allowed = settled is None and budget.allows(calls.calls_per_debate)
    if allowed:
        budget.spend(calls.calls_per_debate)  # reserved at its full size; corrected below
    mine.set()
    if settled is not None:
        return _Judged(settled, usage, stage_calls=stage_calls)
    if not allowed:
        error, retryable = (first.error, first.retryable) if first is not None else (None, True)
        return _Judged(screened, usage, stage_calls=stage_calls, capped=True, error=error, retryable=retryable)
    result = await calls.debate(images, clip, span)
    usage.add(result.usage)
    budget.spend(result.usage.calls - calls.calls_per_debate)
    judged = _from_result(span, result, DEBATE)
    return _Judged(judged, usage, list(result.turns), stage_calls, error=result.error, retryable=result.retryable)
