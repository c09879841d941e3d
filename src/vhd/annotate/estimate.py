"""Dry-run estimates: how many samples, calls, tokens and dollars a run would take.

Every figure bounds what the run does, through the run's own rules: a segmented video's segments
by `vhd.media.segments.segment_bound` and `fewest_segments` from its header (opened through the
run's gate, `vhd.media.videoopen.open_video`, so a file the run refuses is refused here at the
same cost), its calls by the same call cap (`video_calls`). ``tests/annotate/test_estimate.py``
checks on generated videos that the run's calls fall within the range.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.config import AnnotateConfig
from vhd.errors import MediaError
from vhd.media.segments import SegmentSettings, fewest_segments, segment_bound
from vhd.media.untrusted import DEFAULT_MAX_FRAME_PIXELS
from vhd.records import Kind, MediaItem

if TYPE_CHECKING:
    from vhd.annotate.cascade import Cascade
    from vhd.debate.icl import ICLExample
    from vhd.debate.prompts import Prompts

TOKENS_PER_WORD = 1.35
"""Rough English tokens per whitespace-separated word."""


def image_tokens(width: int, height: int) -> int:
    """Prompt tokens for one image under OpenAI's high-detail tiling (a common upper bound).

    The image is fitted into 2048x2048, then its shorter side scaled to 768; each 512-pixel
    tile costs 170 tokens plus 85 for the whole image.
    """
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def native_video(config: AnnotateConfig) -> bool:
    """Whether the judge is shown videos as clips (its backend table's ``video_input``, else ``[media]``'s)."""
    table = config.backends.get(config.role_model("judge").partition(":")[0], {})
    tables = table if isinstance(table, list) else [table]
    modes = [str(t["video_input"]) for t in tables if "video_input" in t]
    return (modes[0] if modes else config.media.video_input) == "native"


def clip_tokens(config: AnnotateConfig) -> int:
    """Prompt tokens of one clip at the ``[media]`` clip bounds, square frames (an upper bound; Qwen2-VL count)."""
    from vhd.backends.endpoints import video_tokens

    side = config.media.clip_max_side
    return video_tokens(math.ceil(config.media.clip_seconds * config.media.clip_fps), side, side)


def _words(text: str) -> int:
    return int(len(text.split()) * TOKENS_PER_WORD) + 1


LOOKUP = 500
"""Sample ids looked up in the store at once."""


def header_facts(path: str, max_pixels: int | None) -> tuple[float | None, float | None] | None:
    """A video's length and frame interval as its header gives them, through the run's gate.

    Returns:
        ``(seconds, seconds per frame)``, either None when the header does not say (or says
        something that is no length: `vhd.media.videoopen.declared_seconds`); None when the run
        would refuse or could not open the file (it is then skipped, with no call).
    """
    from vhd.errors import MissingDependencyError
    from vhd.media.videoframes import checked_stream
    from vhd.media.videoopen import declared_seconds, open_video

    try:
        with open_video(path, max_pixels) as container:
            stream = checked_stream(container, max_pixels)
            rate = stream.average_rate or stream.guessed_rate
            fps = float(rate) if rate else 0.0
            return declared_seconds(container, stream), (1.0 / fps if math.isfinite(fps) and fps > 0 else None)
    except MissingDependencyError:
        return None, None  # the run says so, once; the estimate knows no length
    except MediaError:
        return None


def header_seconds(path: str, max_pixels: int | None = DEFAULT_MAX_FRAME_PIXELS) -> float | None:
    """A video's length as its container header gives it (an estimate only: segments use decoded times)."""
    facts = header_facts(path, max_pixels)
    return None if facts is None else facts[0]


def video_calls(
    settings: SegmentSettings,
    seconds: float | None,
    frame_s: float | None,
    *,
    cap: int | None,
    screen: tuple[int, int],
    debate: int,
) -> tuple[int, int | None]:
    """The fewest and the most calls the run makes on one segmented video (None: no bound).

    Through the run's rules: between `fewest_segments` and `segment_bound` segments, each screened
    (``screen``: the fewest and most calls of a screen), each flagged one debated (``debate``: the
    most calls of a debate); a video's calls never pass ``cap``, and the run stops a video only
    once a screen no longer fits, so it spends more than ``cap - screen[1]`` then. Model calls
    that fail, and a video that cannot be segmented (judged by the whole-video protocol), are
    outside these figures.
    """
    fewest = fewest_segments(settings, seconds, frame_s) * screen[0]
    most_segments = segment_bound(settings, seconds)
    most = None if most_segments is None else most_segments * (screen[1] + debate)
    if cap is not None:
        fewest = min(fewest, max(0, cap - screen[1] + 1))
        most = cap if most is None else min(most, cap)
    return fewest, most


def segment_estimate(
    config: AnnotateConfig,
    videos: Sequence[tuple[float | None, float | None]],
    *,
    screen: tuple[int, int],
    debate: int,
    tokens: tuple[dict[str, list[int]], dict[str, list[int]]],
) -> dict[str, Any] | None:
    """Segments, calls and tokens of the videos a segmented run (``[video] segments``) would judge, else None.

    Args:
        config: The run's configuration.
        videos: Each video's header length and frame interval (`header_facts`).
        screen: The fewest and most calls of one screen.
        debate: The most calls of one debate.
        tokens: One screen's and one segment debate's tokens by role (``[prompt, completion]``).

    Returns:
        Totals over the videos: ``segments``, ``screen_calls`` and ``calls`` as ``[fewest, most]``
        (most None: unbounded), the tokens and the settings that bound them.
    """
    from vhd.debate.segmented import segment_settings

    video = config.video
    if not video.segments:
        return None
    settings = segment_settings(video)
    cap = video.max_calls_per_video
    segments, screens, calls = [0, 0], [0, 0], [0, 0]
    bounded = True
    screened = debated = 0  # the most screens and debates, for the tokens
    for seconds, frame_s in videos:
        fewest, most = video_calls(settings, seconds, frame_s, cap=cap, screen=screen, debate=debate)
        most_segments = segment_bound(settings, seconds)
        calls[0] += fewest
        segments[0] += fewest_segments(settings, seconds, frame_s)
        screens[0] += min(fewest_segments(settings, seconds, frame_s) * screen[0], fewest)
        if most is None or most_segments is None:
            bounded = False
            continue
        calls[1] += most
        segments[1] += most_segments
        screens[1] += min(most_segments * screen[1], most)
        screened += min(most_segments, most)
        debated += min(most_segments, most // max(debate, 1))
    prompt = {role: screened * t[0] + debated * tokens[1][role][0] for role, t in tokens[0].items()}
    completion = {role: screened * t[1] + debated * tokens[1][role][1] for role, t in tokens[0].items()}
    known = [seconds for seconds, _ in videos if seconds is not None]
    return {
        "videos": len(videos),
        "video_minutes": round(sum(known) / 60, 2),
        "videos_without_duration": len(videos) - len(known),
        "segments": [segments[0], segments[1] if bounded else None],
        "screen_calls": [screens[0], screens[1] if bounded else None],
        "calls": [calls[0], calls[1] if bounded else None],
        "prompt_tokens_max": sum(prompt.values()) if bounded else None,
        "completion_tokens_max": sum(completion.values()) if bounded else None,
        "by_role": {role: [prompt[role], completion[role]] for role in prompt} if bounded else None,
        "segments_per_minute": [round(60 / settings.max_s, 2), round(60 / settings.floor_s, 2)],
        "max_calls_per_video": cap,
        "max_segments_per_video": video.max_segments_per_video,
    }


def _debate_tokens(
    config: AnnotateConfig, prompts: Prompts, examples: Sequence[ICLExample], kind: Kind, n_images: int
) -> dict[str, list[int]]:
    """The most tokens one debate of one sample takes, by role (``[prompt, completion]``).

    Completion tokens are bounded by the token caps; prompt tokens assume every earlier argument
    used its whole cap.
    """
    rounds = config.debate.rounds
    _, debater_cap = config.role_settings("affirmative")
    _, judge_cap = config.role_settings("judge")
    per_image = image_tokens(config.media.max_side, config.media.max_side)
    tokens = {role: [0, 0] for role in ("affirmative", "negative", "judge")}
    system = _words(prompts.render(f"affirmative_{kind.value}", rounds=rounds, n_frames=n_images, definition=""))
    judge_system = _words(prompts.render(f"judge_{kind.value}", n_frames=n_images, definition=""))
    definition = _words(prompts.definition(kind.value))
    media = n_images * per_image
    if kind is Kind.VIDEO and native_video(config):  # one clip instead of the frames (every role, as the judge)
        media = clip_tokens(config)
    for k in range(2 * rounds):
        counts = tokens["affirmative" if k % 2 == 0 else "negative"]
        counts[0] += system + definition + media + 40 + k * debater_cap
        counts[1] += debater_cap
    icl = sum(len(e.images) * per_image + 30 for e in examples if e.kind is kind)
    tokens["judge"][0] += judge_system + definition + icl + media + 40 + 2 * rounds * debater_cap
    tokens["judge"][1] += judge_cap
    return tokens


def _screen_tokens(config: AnnotateConfig, prompts: Prompts) -> dict[str, list[int]]:
    """The most tokens of one segment's screen (the judge alone over the segment's frames)."""
    frames = config.video.frames_per_segment
    _, judge_cap = config.role_settings("judge")
    media = clip_tokens(config) if native_video(config) else frames * image_tokens(*(2 * [config.media.max_side]))
    prompt = (
        _words(prompts.render("judge_video", n_frames=frames, definition=""))
        + _words(prompts.render("definition_video"))
        + media
        + 40
    )
    return {"affirmative": [0, 0], "negative": [0, 0], "judge": [prompt, judge_cap]}


async def estimate(
    items: Iterable[MediaItem],
    config: AnnotateConfig,
    prompts: Prompts,
    examples: Sequence[ICLExample],
    store: Path,
    config_hash: str,
    *,
    retry_budget: int = 1,
    cascade: Cascade | None = None,
) -> dict[str, Any]:
    """Count samples still to annotate and bound the calls, tokens and cost they need.

    The items are streamed: sample ids met go to an on-disk set and are looked up in the store
    `LOOKUP` at a time, so memory does not grow with the number of files. Completion tokens are
    bounded by the token caps; prompt tokens assume every earlier argument used its whole cap,
    so the figures are upper bounds. With ``[video] segments``, the videos' figures are their
    segments' (`segment_estimate`), included in the totals (``calls`` is the most, ``calls_min``
    the fewest).

    Args:
        items: The inputs, as discovery yields them.
        config: The run's configuration.
        prompts: Its prompts.
        examples: Its in-context examples.
        store: The store (what it holds already is not counted).
        config_hash: The configuration's hash.
        retry_budget: The run's `vhd.debate.engine.Debate` ``retry_budget``: above 1 (``--retry-unparsed``)
            a call cut off by the token limit is asked again with this times its cap, so each call
            counts twice, its prompt tokens twice and its completion tokens ``1 + retry_budget`` times.
        cascade: The cascade's stages, which make calls of their own before a debate.
    """
    from vhd.media.load import media_settings, sample_id
    from vhd.store.sqlite import Store
    from vhd.store.statindex import ScratchSet

    found = dict.fromkeys(Kind, 0)
    todo_by_kind = dict.fromkeys(Kind, 0)
    videos: list[tuple[float | None, float | None]] = []  # the header facts of the segmented videos to do
    unreadable = refused = 0  # files that cannot be hashed; videos the run's gate refuses
    batch: list[tuple[str, Kind, str]] = []
    db = Store(store) if store.exists() else None
    seen = ScratchSet()
    max_pixels = media_settings(config.media).limits.effective_max_frame_pixels
    segmented = config.video.segments

    def flush() -> None:
        nonlocal refused
        done = db.done_ids(config_hash, [sid for sid, _, _ in batch]) if db is not None else set()
        for sid, kind, path in batch:
            if sid in done:
                continue
            if kind is Kind.VIDEO and segmented:
                facts = header_facts(path, max_pixels)
                if facts is None:  # refused by the run's gate: skipped there, no call
                    refused += 1
                    continue
                videos.append(facts)
            todo_by_kind[kind] += 1
        batch.clear()

    try:
        for item in items:
            try:
                sid = await asyncio.to_thread(sample_id, item)
            except MediaError:
                unreadable += 1
                continue
            if seen.add(sid):
                found[item.kind] += 1
                batch.append((sid, item.kind, str(item.path)))
                if len(batch) >= LOOKUP:
                    await asyncio.to_thread(flush)
        await asyncio.to_thread(flush)
    finally:
        seen.close()
        if db is not None:
            db.close()
    samples, to_annotate = sum(found.values()), sum(todo_by_kind.values())
    twice = 2 if retry_budget > 1 else 1
    debate = (2 * config.debate.rounds + 1) * twice

    def retried(one: dict[str, list[int]]) -> dict[str, list[int]]:
        return {role: [p * twice, c * (1 + retry_budget if twice > 1 else 1)] for role, (p, c) in one.items()}

    tokens = {role: [0, 0] for role in ("affirmative", "negative", "judge")}  # [prompt, completion]
    whole = dict(todo_by_kind)
    if segmented:
        whole[Kind.VIDEO] = 0
    for kind, n in whole.items():
        one = retried(_debate_tokens(config, prompts, examples, kind, 1 if kind is Kind.IMAGE else config.media.frames))
        for role, (prompt, completion) in one.items():
            tokens[role][0] += n * prompt
            tokens[role][1] += n * completion
    calls_most: int | None = 0
    for kind, n in whole.items():
        frames = 1 if kind is Kind.IMAGE else config.media.frames
        calls_most = (calls_most or 0) + n * (debate + (0 if cascade is None else cascade.most_calls(kind, frames)))
    calls_least = sum(whole.values()) * (1 if cascade is not None else debate // twice)
    segments = None
    if segmented:
        frames = config.video.frames_per_segment
        screen = (1, twice if cascade is None else cascade.most_calls(Kind.VIDEO, frames))
        per_segment = retried(_debate_tokens(config, prompts, examples, Kind.VIDEO, frames))
        screen_tokens = retried(_screen_tokens(config, prompts))
        segments = segment_estimate(config, videos, screen=screen, debate=debate, tokens=(screen_tokens, per_segment))
        assert segments is not None
        calls_least += segments["calls"][0]
        most = segments["calls"][1]
        calls_most = None if most is None else (calls_most or 0) + most
        for role, (prompt, completion) in (segments["by_role"] or {}).items():
            tokens[role][0] += prompt
            tokens[role][1] += completion
    bounded = calls_most is not None
    cost: float | None = 0.0
    for role, (prompt, completion) in tokens.items():
        price = config.prices.get(config.role_model(role))
        if price is None or not bounded:
            cost = None
            break
        cost = (cost or 0.0) + price.cost(prompt, completion)  # an upper bound: no cache hits assumed
    return {
        "segments": segments,
        "samples": samples,
        "images": found[Kind.IMAGE],
        "videos": found[Kind.VIDEO],
        "already_done": samples - to_annotate - refused,
        "to_annotate": to_annotate,
        "unreadable": unreadable + refused,
        "calls": calls_most,
        "calls_min": calls_least,
        "prompt_tokens_max": sum(t[0] for t in tokens.values()) if bounded else None,
        "completion_tokens_max": sum(t[1] for t in tokens.values()) if bounded else None,
        "cost_max_usd": cost,
    }
