"""Ask a model to name and define reason clusters, or to propose categories from reasons (the paper's way).

Answers are read line by line (``Name:``, ``Definition:``, ``Examples:``), tolerating markdown
and numbering. A cluster whose answer cannot be read keeps a name made from its most typical
reason (`fallback_names`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from vhd.backends.base import Backend, GenerateConfig, Message, ask
from vhd.categorize.cluster import Cluster
from vhd.errors import BackendError, VhdError

NAMER_SYSTEM = "You organise the findings of content-moderation reviews into clear, distinct harm categories."
_FIELD = re.compile(r"^\W*(name|category|definition|examples?)\W*\s*[:\-–]\s*(.*)$", re.IGNORECASE)
_DECOR = re.compile(r"[*_`#]+")


def cluster_prompt(cluster: Cluster) -> str:
    """The prompt that asks for one cluster's name and definition."""
    listing = "\n".join(f"- {r}" for r in cluster.typical)
    return (
        "Reviewers gave these reasons for judging images or videos harmful. They form one group:\n"
        f"{listing}\n\n"
        "Give the group a short harm-category name (2 to 6 words) and a one-sentence definition of what "
        "belongs in it. Answer in exactly two lines:\nName: <name>\nDefinition: <definition>"
    )


def propose_prompt(reasons: Sequence[str]) -> str:
    """The one prompt of ``llm-only`` discovery: all the reasons, asking for categories."""
    listing = "\n".join(f"- {r}" for r in reasons)
    return (
        "Reviewers gave these reasons for judging images or videos harmful:\n"
        f"{listing}\n\n"
        "Propose a small set of distinct harm categories (between 5 and 15) that together cover these "
        "reasons; a reason may fit several. For each category write three lines, then a blank line:\n"
        "Name: <2 to 6 words>\nDefinition: <one sentence>\nExamples: <reason>; <reason>; <reason>"
    )


def parse_blocks(text: str) -> list[tuple[str, str, list[str]]]:
    """Read ``Name:`` / ``Definition:`` / ``Examples:`` blocks into ``(name, definition, examples)``."""
    out: list[tuple[str, str, list[str]]] = []
    current: dict[str, str] = {}

    def flush() -> None:
        if current.get("name"):
            examples = [e.strip(" .") for e in re.split(r"[;|]", current.get("examples", "")) if e.strip(" .")]
            out.append((current["name"].strip(" ."), current.get("definition", "").strip(), examples))
        current.clear()

    for raw in text.splitlines():
        line = _DECOR.sub("", raw).strip()
        line = re.sub(r"^\d{1,2}[.)]\s*", "", line)
        m = _FIELD.match(line)
        if not m:
            continue
        key = m.group(1).lower()
        key = "name" if key == "category" else "examples" if key.startswith("example") else key
        if key == "name" and "name" in current:
            flush()
        current[key] = m.group(2).strip()
    flush()
    return out


def fallback_names(clusters: Sequence[Cluster]) -> None:
    """Name (and define) every cluster that has no name yet from its typical reasons."""
    for c in clusters:
        if not c.name:
            top = c.typical[0] if c.typical else c.reasons[0]
            c.name = top[:1].upper() + top[1:]
        if not c.definition:
            c.definition = "Harm reasons such as: " + "; ".join(c.typical[:5]) + "."


async def name_with_model(backend: Backend, clusters: Sequence[Cluster], *, concurrency: int = 8) -> None:
    """Ask the model for each cluster's name and definition (set in place; unreadable answers are skipped)."""
    gate = asyncio.Semaphore(concurrency)
    config = GenerateConfig(temperature=0.0, max_tokens=120, tag="discover")

    async def one(cluster: Cluster) -> None:
        async with gate:
            asked = [Message("system", NAMER_SYSTEM), Message("user", cluster_prompt(cluster))]
            out = await ask(backend, asked, config)
            if isinstance(out, BackendError):
                return
        blocks = parse_blocks(out.text)
        if blocks:
            cluster.name, cluster.definition = blocks[0][0], blocks[0][1]

    await asyncio.gather(*(one(c) for c in clusters))


async def propose_with_model(backend: Backend, reasons: Sequence[str]) -> list[tuple[str, str, list[str]]]:
    """Ask the model once for categories covering the reasons.

    Raises:
        VhdError: The answer holds no readable category.
    """
    config = GenerateConfig(temperature=0.0, max_tokens=2000, tag="discover")
    out = await backend.generate([Message("system", NAMER_SYSTEM), Message("user", propose_prompt(reasons))], config)
    blocks = parse_blocks(out.text)
    if not blocks:
        start = " ".join(out.text.split())[:160]
        raise VhdError(
            f"the model's answer holds no 'Name:' lines to read categories from ({start!r}): try another model"
        )
    return blocks
