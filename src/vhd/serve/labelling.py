"""What makes labelling fast in the review app: category hotkeys, the instructions panel, histograms.

Categories get Label Studio's keys: ``1``-``9`` and ``0`` for the first ten, then letters of the
keyboard's top rows that no other key of the app uses. The instructions are what the annotator
model was told: the harm definition of the run's prompts (its ``[prompts]`` overrides when it had
them) and the taxonomy's category definitions. The histograms of P(harmful) and of the categories
(``/histograms``, a page of its own so that the gallery never waits for them) come from the store's
gallery indexes and are cached for a few seconds per configuration, as the count of samples is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from vhd.errors import VhdError
from vhd.taxonomy.taxonomy import default_taxonomy

APP_KEYS = frozenset("ynurgjkiz")
"""Letters the app already binds (label, undo, reveal, gallery, move, instructions, zoom)."""

CATEGORY_KEYS = "1234567890" + "".join(k for k in "qwetopasdfhlxcvbm" if k not in APP_KEYS)
"""Keys of the categories, in taxonomy order (Label Studio's digits first)."""

HISTOGRAM_TTL_S = 10.0
"""How long a configuration's histograms are reused."""


@dataclass(frozen=True)
class CategoryKey:
    """One category as the labelling form shows it.

    Attributes:
        key: Its hotkey ('' past the last key).
        code: Its letter code.
        name: Its name (the value the form sends).
        definition: What belongs in it.
    """

    key: str
    code: str
    name: str
    definition: str


def category_keys() -> list[CategoryKey]:
    """The taxonomy's categories with their hotkeys, in order."""
    return [
        CategoryKey(CATEGORY_KEYS[k] if k < len(CATEGORY_KEYS) else "", c.code, c.name, c.definition)
        for k, c in enumerate(default_taxonomy())
    ]


@dataclass(frozen=True)
class Instructions:
    """What the annotator was given, for the reviewer to read.

    Attributes:
        policy: ``(title, text)`` of the harm definitions (images, videos).
        categories: The categories with definitions and keys.
        source: Where the policy comes from (a run and configuration, or the packaged default).
        note: Why the packaged text is shown instead of the run's ('' when it is the run's).
    """

    policy: list[tuple[str, str]]
    categories: list[CategoryKey]
    source: str
    note: str = ""


def instructions(runs: list[Any], config_hash: str | None) -> Instructions:
    """The instructions of a configuration: its newest run's prompts (the newest run's without one).

    Args:
        runs: The store's runs (`vhd.store.rows.RunInfo`), oldest first.
        config_hash: The configuration shown (None: the newest run's).
    """
    from vhd.debate.prompts import Prompts

    chosen = [r for r in runs if config_hash is None or r.config_hash == config_hash]
    run = chosen[-1] if chosen else None
    note = ""
    prompts = Prompts()
    source = "the packaged default prompts (no annotation run in this store)"
    if run is not None:
        source = f"run {run.id[:12]}, configuration {run.config_hash[:12]}"
        overrides = run.config.get("prompts") or {}
        base = run.config.get("base_dir")
        try:
            prompts = Prompts(overrides, Path(base) if base else None)
        except (VhdError, TypeError, AttributeError) as exc:
            note = f"the run's own prompts cannot be read here ({exc}); the packaged default text is shown"
    policy = [
        ("Images", prompts.templates["definition_image"]),
        ("Videos", prompts.templates["definition_video"]),
    ]
    return Instructions(policy, category_keys(), source, note)


@dataclass
class Histograms:
    """A configuration's histograms as the page draws them: bars with a count and a filter link.

    Attributes:
        scores: ``(label, count, href)`` per P(harmful) bin, low to high.
        categories: ``(name, count, href)`` per category, commonest first.
        top: The largest count (the bars' scale).
        config: The configuration they describe.
    """

    scores: list[tuple[str, int, str]] = field(default_factory=list)
    categories: list[tuple[str, int, str]] = field(default_factory=list)
    top: int = 1
    config: str = ""


def histograms(
    cache: dict[str, tuple[float, tuple[list[int], dict[str, int]]]], store: Any, config_hash: str | None, sort: str
) -> Histograms | None:
    """A configuration's histograms, each bar linking to the gallery filtered on it.

    Args:
        cache: Counts by configuration with the time they were read (kept between requests).
        store: The open store.
        config_hash: The configuration, or `vhd.store.gallery.NEWEST` for each sample's newest verdict
            (None: no histograms).
        sort: The gallery's order (kept in the links).
    """
    if config_hash is None:
        return None
    now = time.monotonic()
    hit = cache.get(config_hash)
    if hit is None or now - hit[0] > HISTOGRAM_TTL_S:
        hit = (now, store.gallery_histograms(config_hash))
        cache[config_hash] = hit
    scores, categories = hit[1]
    if not scores:
        return None
    base: dict[str, Any] = {"config": config_hash} if config_hash else {}  # '': each sample's newest verdict
    if sort != "ingest":
        base["sort"] = sort
    out = Histograms(config=config_hash)
    bins = len(scores)
    for b, n in enumerate(scores):
        lo, hi = b / bins, (b + 1) / bins
        href = "/?" + urlencode({**base, "score_min": f"{lo:g}", "score_max": f"{hi:g}"})
        out.scores.append((f"{lo:.1f}-{hi:.1f}", n, href))
    for name, n in sorted(categories.items(), key=lambda kv: (-kv[1], kv[0])):
        out.categories.append((name, n, "/?" + urlencode({**base, "category": name})))
    out.top = max([1, *scores, *categories.values()])
    return out


STRIP_WIDTH = 1000
"""Width of the segment strip's SVG coordinate system (the page scales it to the column)."""


@dataclass(frozen=True)
class StripSpan:
    """One segment of a video's time line as the sample page draws it: a coloured box of the strip.

    Attributes:
        x: Where it starts, in `STRIP_WIDTH` units of the video's length.
        width: How long it is, in the same units (at least 1, so a short segment stays visible).
        decision: ``yes``, ``no`` or ``none`` (the colour, as the gallery's ``d-`` classes).
        label: ``0:04.0-0:09.5 harmful, p=0.91: reason`` (its tooltip and list entry).
    """

    x: float
    width: float
    decision: str
    label: str


def _clock(seconds: float) -> str:
    """``m:ss.s`` (tenths: segments of a short clip are often under a second)."""
    tenths = max(0, round(float(seconds) * 10))
    return f"{tenths // 600}:{(tenths % 600) / 10:04.1f}"


def segment_strip(segments: Sequence[Any]) -> list[StripSpan]:
    """A video's segments (`vhd.records.Segment`) as boxes of a time line from 0 to the last segment's end.

    Empty for an image or an unsegmented video.
    """
    if not segments:
        return []
    end = max(float(s.end_s) for s in segments)
    if end <= 0:
        return []
    out = []
    for s in sorted(segments, key=lambda s: float(s.start_s)):
        decision = "none" if s.harmful is None else "yes" if s.harmful else "no"
        said = "no decision" if s.harmful is None else "harmful" if s.harmful else "not harmful"
        score = f", p={s.score:.2f}" if s.score is not None else ""
        reason = f": {s.reason}" if s.reason else ""
        x = STRIP_WIDTH * float(s.start_s) / end
        width = max(1.0, STRIP_WIDTH * (float(s.end_s) - float(s.start_s)) / end)
        out.append(StripSpan(x, width, decision, f"{_clock(s.start_s)}-{_clock(s.end_s)} {said}{score}{reason}"))
    return out
