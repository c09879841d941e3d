"""Dry-run estimates: how many samples, calls, tokens and dollars a run would take."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.config import AnnotateConfig
from vhd.errors import MediaError
from vhd.records import Kind, MediaItem

if TYPE_CHECKING:
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


def _words(text: str) -> int:
    return int(len(text.split()) * TOKENS_PER_WORD) + 1


LOOKUP = 500
"""Sample ids looked up in the store at once."""


def header_seconds(path: str) -> float | None:
    """A video's length as its container header gives it (an estimate only: segments use decoded times)."""
    from vhd.media.videoframes import duration_s

    try:
        import av

        with av.open(path) as container:
            return duration_s(container, container.streams.video[0]) if container.streams.video else None
    except Exception:  # an unreadable header only leaves the video out of the estimate
        return None


def segment_estimate(
    config: AnnotateConfig, minutes: float, unknown: int, screen_prompt_tokens: int
) -> dict[str, Any] | None:
    """Calls and tokens per video-minute of a segmented run (``[video] segments``), else None.

    Segments per minute lie between ``60 / max_segment_s`` (one long shot) and ``60 /
    min_segment_s`` (a cut at every chance, at least 1 s apart) for shots, and are exactly
    ``60 / window_s`` for windows. Each segment costs one screen call; a flagged one also a debate
    of ``2 x rounds + 1`` calls (``[video] max_calls_per_video`` caps that per video).
    """
    video = config.video
    if not video.segments:
        return None
    if video.detect == "windows":
        low = high = 60 / video.window_s
    else:
        low, high = 60 / video.max_segment_s, 60 / max(video.min_segment_s, 1.0)
    debate = 2 * config.debate.rounds + 1
    _, judge_cap = config.role_settings("judge")

    def pair(per_segment: float) -> list[float]:
        return [round(low * per_segment, 2), round(high * per_segment, 2)]

    return {
        "video_minutes": round(minutes, 2),
        "videos_without_duration": unknown,
        "segments_per_minute": pair(1),
        "calls_per_minute_screened": pair(1),
        "calls_per_minute_screened_all_flagged": pair(1 + debate),
        "calls_per_minute_debate_every_segment": pair(debate),
        "screen_prompt_tokens_per_minute": pair(screen_prompt_tokens),
        "screen_completion_tokens_per_minute": pair(judge_cap),
        "max_calls_per_video": video.max_calls_per_video,
    }


async def estimate(
    items: Iterable[MediaItem],
    config: AnnotateConfig,
    prompts: Prompts,
    examples: Sequence[ICLExample],
    store: Path,
    config_hash: str,
) -> dict[str, Any]:
    """Count samples still to annotate and bound the calls, tokens and cost they need.

    The items are streamed: sample ids met go to an on-disk set and are looked up in the store
    `LOOKUP` at a time, so memory does not grow with the number of files. Completion tokens are
    bounded by the token caps; prompt tokens assume every earlier argument used its whole cap,
    so the figures are upper bounds.
    """
    from vhd.media.load import sample_id
    from vhd.store.sqlite import Store
    from vhd.store.statindex import ScratchSet

    found = dict.fromkeys(Kind, 0)
    todo_by_kind = dict.fromkeys(Kind, 0)
    video_s = [0.0, 0]  # seconds of the videos still to annotate (their headers), videos without one
    unreadable = 0
    batch: list[tuple[str, Kind, str]] = []
    db = Store(store) if store.exists() else None
    seen = ScratchSet()

    def flush() -> None:
        done = db.done_ids(config_hash, [sid for sid, _, _ in batch]) if db is not None else set()
        for sid, kind, path in batch:
            todo_by_kind[kind] += sid not in done
            if kind is Kind.VIDEO and sid not in done and config.video.segments:
                seconds = header_seconds(path)
                video_s[0] += seconds or 0.0
                video_s[1] += seconds is None
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
                    flush()
        flush()
    finally:
        seen.close()
        if db is not None:
            db.close()
    samples, to_annotate = sum(found.values()), sum(todo_by_kind.values())
    rounds = config.debate.rounds
    _, debater_cap = config.role_settings("affirmative")
    _, judge_cap = config.role_settings("judge")
    side = config.media.max_side
    per_image = image_tokens(side, side)
    tokens = {role: [0, 0] for role in ("affirmative", "negative", "judge")}  # [prompt, completion]
    for kind, n in todo_by_kind.items():
        n_images = 1 if kind is Kind.IMAGE else config.media.frames
        system = _words(prompts.render(f"affirmative_{kind.value}", rounds=rounds, n_frames=n_images, definition=""))
        judge_system = _words(prompts.render(f"judge_{kind.value}", n_frames=n_images, definition=""))
        definition = _words(prompts.render(f"definition_{kind.value}"))
        media = n_images * per_image
        for k in range(2 * rounds):
            counts = tokens["affirmative" if k % 2 == 0 else "negative"]
            counts[0] += n * (system + definition + media + 40 + k * debater_cap)
            counts[1] += n * debater_cap
        icl = sum(len(e.images) * per_image + 30 for e in examples if e.kind is kind)
        tokens["judge"][0] += n * (judge_system + definition + icl + media + 40 + 2 * rounds * debater_cap)
        tokens["judge"][1] += n * judge_cap
    cost: float | None = 0.0
    for role, (prompt, completion) in tokens.items():
        price = config.prices.get(config.role_model(role))
        if price is None:
            cost = None
            break
        cost = (cost or 0.0) + price.cost(prompt, completion)  # an upper bound: no cache hits assumed
    screen_prompt = (
        _words(prompts.render("judge_video", n_frames=config.video.frames_per_segment, definition=""))
        + _words(prompts.render("definition_video"))
        + config.video.frames_per_segment * per_image
        + 40
    )
    segments = segment_estimate(config, video_s[0] / 60, int(video_s[1]), screen_prompt)
    return {
        "segments": segments,
        "samples": samples,
        "images": found[Kind.IMAGE],
        "videos": found[Kind.VIDEO],
        "already_done": samples - to_annotate,
        "to_annotate": to_annotate,
        "unreadable": unreadable,
        "calls": to_annotate * (2 * rounds + 1),
        "prompt_tokens_max": sum(t[0] for t in tokens.values()),
        "completion_tokens_max": sum(t[1] for t in tokens.values()),
        "cost_max_usd": cost,
    }
