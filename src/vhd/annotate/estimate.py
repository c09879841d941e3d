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
    unreadable = 0
    batch: list[tuple[str, Kind]] = []
    db = Store(store) if store.exists() else None
    seen = ScratchSet()

    def flush() -> None:
        done = db.done_ids(config_hash, [sid for sid, _ in batch]) if db is not None else set()
        for sid, kind in batch:
            todo_by_kind[kind] += sid not in done
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
                batch.append((sid, item.kind))
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
        definition = _words(prompts.definition(kind.value))
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
    return {
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
