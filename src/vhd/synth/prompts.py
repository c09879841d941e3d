"""`vhd prompts`: expand keywords into distinct one-sentence scene prompts with any chat model.

For each keyword the model is asked (text only) for a numbered list of scene descriptions, in
batches, until N distinct prompts exist or the request budget is spent. Replies are parsed
leniently (numbers, bullets, quotes, a preamble line); refusals (of the whole request or of
single lines) are counted; every prompt passes the safety floor (`vhd.synth.floor`); duplicates
are dropped exactly (case, spacing and punctuation folded) and then by sentence-embedding
similarity (the packaged all-MiniLM-L6-v2). The CSV (``prompt,keyword,id,model,template``) is
rewritten atomically after every request, so a rerun asks only for the prompts still missing.

Example:
    >>> backend = create_backend("openai:llama3.1-8b")  # doctest: +SKIP
    >>> result = asyncio.run(expand(backend, ["knife in hand"], 20, "prompts.csv"))  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vhd.aio import run_sync
from vhd.backends.base import Backend, GenerateConfig, Message, ask
from vhd.errors import BackendError, ConfigError
from vhd.fileio import atomic_write, escape_cell, unescape_cell
from vhd.synth.floor import floor_reason
from vhd.synth.provenance import prompt_id

DEFAULT_TEMPLATE = (
    "You help build a dataset for training and testing content-moderation models.\n"
    "Write {n} different scene descriptions for photographs or short videos about: {keyword}.\n"
    "Rules: each description is a single sentence that shows one concrete, visible scene (who or "
    "what is there, what happens, where), written as a photographer would caption it. Vary the "
    "people, places, objects and actions. No commentary, no titles, no warnings.\n"
    "Answer with a numbered list, one scene per line."
)
"""Our prompt template: ``{keyword}`` and ``{n}`` are filled in (the paper: one scene per prompt, photographic)."""

COLUMNS = ("prompt", "keyword", "id", "model", "template")
"""Columns of the prompt CSV."""

_ITEM = re.compile(r"^\s*(?:(?:\d{1,3}|[a-zA-Z])[.):\]]\s+|[-*•·‣–—]\s+|#{1,3}\s+)?(.*\S)\s*$")
_REFUSAL = re.compile(
    r"\b(?:i\s*(?:'m|am)\s*(?:sorry|unable|not able)|i\s*(?:can(?:'|no)t|cannot|won'?t|will not|must decline)|"
    r"as an ai\b|i (?:do not|don't) (?:feel comfortable|create|produce|generate)|"
    r"against (?:my|the) (?:guidelines|policy|policies)|not appropriate for me)",
    re.IGNORECASE,
)


def template_hash(template: str) -> str:
    """12 hex digits of the template's sha256 (the CSV's ``template`` column)."""
    return hashlib.sha256(template.encode("utf-8")).hexdigest()[:12]


def is_refusal(text: str) -> bool:
    """Whether a reply (or a line of one) is the model declining."""
    return bool(_REFUSAL.search(text))


@dataclass
class Parsed:
    """One reply, parsed.

    Attributes:
        items: Candidate prompts, in order.
        refusals: Lines (or the whole reply) that declined.
        malformed: Lines that were not list items (preambles, notes), dropped.
    """

    items: list[str] = field(default_factory=list)
    refusals: int = 0
    malformed: int = 0


def parse_list(text: str) -> Parsed:
    """Parse a numbered or bulleted list of one-sentence scenes, leniently.

    Numbers (``1.``, ``2)``), bullets and surrounding quotes are removed; empty lines dropped; a
    line ending with a colon (a preamble such as "Here are ten scenes:") and lines of one or two
    words are counted as malformed; lines that decline are counted as refusals.
    """
    parsed = Parsed()
    lines = [line for line in text.replace("\r", "\n").split("\n") if line.strip()]
    for line in lines:
        match = _ITEM.match(line)
        body = (match.group(1) if match else line).strip().strip("\"'“”‘’*_ ").strip()
        if not body:
            continue
        if is_refusal(body):
            parsed.refusals += 1
        elif body.endswith(":") or len(body.split()) < 3:
            parsed.malformed += 1
        else:
            parsed.items.append(" ".join(body.split()))
    if not parsed.items and not parsed.refusals and is_refusal(text):
        parsed.refusals = 1
    return parsed


def normal_form(text: str) -> str:
    """Case, spacing and punctuation folded: the exact-duplicate key."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


@dataclass
class KeywordReport:
    """What happened for one keyword.

    Attributes:
        keyword: The keyword.
        wanted: Prompts asked for.
        had: Prompts the CSV held before this run.
        added: New prompts written.
        requests: Requests sent.
        refusals: Replies or lines the model declined.
        floor_refused: Prompts the safety floor refused.
        exact_duplicates: Prompts dropped as exact duplicates.
        near_duplicates: Prompts dropped as near duplicates.
        malformed: Lines that were not list items.
        errors: Failed requests (the message of the last one in ``error``).
        error: The last request error, if any.
    """

    keyword: str
    wanted: int
    had: int = 0
    added: int = 0
    requests: int = 0
    refusals: int = 0
    floor_refused: int = 0
    exact_duplicates: int = 0
    near_duplicates: int = 0
    malformed: int = 0
    errors: int = 0
    error: str | None = None

    @property
    def short(self) -> int:
        """Prompts still missing."""
        return max(0, self.wanted - self.had - self.added)


@dataclass
class PromptsResult:
    """What `expand` did: one report per keyword, and the CSV."""

    out: Path
    keywords: list[KeywordReport] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable summary (totals and per keyword)."""
        totals = {
            key: sum(getattr(k, key) for k in self.keywords)
            for key in ("added", "requests", "refusals", "floor_refused", "exact_duplicates", "near_duplicates")
        }
        per = [{**asdict(k), "short": k.short} for k in self.keywords]
        return {"out": str(self.out), **totals, "short": sum(k.short for k in self.keywords), "keywords": per}


def read_prompts(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """Rows of an existing prompt CSV (empty when the file does not exist)."""
    file = Path(path)
    if not file.exists():
        return []
    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {file} ({exc}); pass another --out") from exc
    reader = csv.DictReader(io.StringIO(text))
    if "prompt" not in (reader.fieldnames or []):
        raise ConfigError(f"{file} exists but has no 'prompt' column; pass another --out")
    return [{k: unescape_cell(v or "") for k, v in row.items() if k} for row in reader]


def write_prompts(path: str | os.PathLike[str], rows: Sequence[dict[str, str]]) -> None:
    """Write the prompt CSV atomically."""

    def write(f: Any) -> None:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow([escape_cell(row.get(c, "")) for c in COLUMNS])

    atomic_write(path, write)


class NearDuplicates:
    """Near-duplicate filter by cosine similarity of sentence embeddings (all-MiniLM-L6-v2 by default).

    Args:
        threshold: Prompts at or above this similarity to a kept one are duplicates; 1 or more
            turns the filter off (no model loaded).
        model: Sentence-transformers model name or folder (None: the packaged default).
        encode: For tests and other embedders: texts -> unit vectors (a numpy array).
    """

    def __init__(
        self, threshold: float = 0.9, model: str | None = None, encode: Callable[[list[str]], Any] | None = None
    ) -> None:
        self.threshold = threshold
        self.vectors: dict[str, list[Any]] = {}
        self._encode = encode
        self._model = model

    @property
    def enabled(self) -> bool:
        """Whether the filter runs."""
        return 0 < self.threshold < 1

    def encode(self, texts: list[str]) -> Any:
        """Unit vectors of the texts."""
        if self._encode is None:
            from vhd.categorize.embedding import load_embedder

            self._encode = load_embedder(self._model).encode
        return self._encode(texts)

    def keep(self, keyword: str, texts: list[str]) -> list[bool]:
        """Which texts are not near duplicates of kept ones (nor of each other); kept ones are remembered."""
        if not self.enabled or not texts:
            return [True] * len(texts)
        import numpy as np

        vectors = np.asarray(self.encode(texts), dtype=np.float32)
        kept = self.vectors.setdefault(keyword, [])
        flags = []
        for vec in vectors:
            if kept and float(np.max(np.stack(kept) @ vec)) >= self.threshold:
                flags.append(False)
            else:
                kept.append(vec)
                flags.append(True)
        return flags


async def expand(
    backend: Backend,
    keywords: Sequence[str],
    per_keyword: int,
    out: str | os.PathLike[str],
    *,
    template: str = DEFAULT_TEMPLATE,
    batch: int = 20,
    max_requests: int | None = None,
    near: NearDuplicates | None = None,
    config: GenerateConfig | None = None,
    concurrency: int = 4,
    on_keyword: Callable[[KeywordReport], None] | None = None,
) -> PromptsResult:
    """Ask ``backend`` for ``per_keyword`` distinct prompts per keyword, resuming ``out``.

    Args:
        backend: Any chat backend (text-only requests).
        keywords: The keywords.
        per_keyword: Distinct prompts wanted per keyword.
        out: The CSV to write (rows already there count, and are kept).
        template: The request template (``{keyword}``, ``{n}``).
        batch: Prompts asked for per request.
        max_requests: Request budget per keyword (default: twice the requests N needs, plus 2).
        near: Near-duplicate filter (default: all-MiniLM-L6-v2 at 0.9).
        config: Decoding settings (default: temperature 0.9, up to 60 tokens a prompt).
        concurrency: Keywords asked at once.
        on_keyword: Called with each keyword's report when it finishes.

    Raises:
        ConfigError: Bad template or numbers; ``out`` unreadable.
    """
    if "{keyword}" not in template:
        raise ConfigError("the prompt template must contain {keyword} (and may contain {n})")
    if per_keyword < 1 or batch < 1:
        raise ConfigError("--per-keyword and --batch must be at least 1")
    out_path = Path(out)
    rows = read_prompts(out_path)
    near = near or NearDuplicates()
    t_hash = template_hash(template)
    seen: dict[str, set[str]] = {}
    for row in rows:
        seen.setdefault(row.get("keyword", ""), set()).add(normal_form(row["prompt"]))
    if near.enabled:
        for kw, texts in _by_keyword(rows).items():
            near.keep(kw, texts)
    budget = max_requests or 2 * -(-per_keyword // batch) + 2
    lock = asyncio.Lock()
    result = PromptsResult(out_path)
    semaphore = asyncio.Semaphore(max(1, concurrency))

    async def one(keyword: str) -> KeywordReport:
        report = KeywordReport(keyword, per_keyword, had=len(_by_keyword(rows).get(keyword, [])))
        async with semaphore:
            while report.short and report.requests < budget:
                report.requests += 1
                n = min(batch, report.short + max(2, report.short // 4))  # a few spare for duplicates
                text = template.replace("{keyword}", keyword).replace("{n}", str(n))
                cfg = config or GenerateConfig(temperature=0.9, max_tokens=60 * n + 40, tag="prompts")
                answer = await ask(backend, [Message("user", text)], cfg)
                if isinstance(answer, BackendError):
                    report.errors += 1
                    report.error = str(answer)
                    if not answer.retryable:
                        break
                    continue
                if answer.refused:
                    report.refusals += 1
                    continue
                parsed = parse_list(answer.text)
                report.refusals += parsed.refusals
                report.malformed += parsed.malformed
                async with lock:
                    _accept(parsed.items, keyword, report, rows, seen, near, backend.spec, t_hash)
                    write_prompts(out_path, rows)
        if on_keyword is not None:
            on_keyword(report)
        return report

    result.keywords = list(await asyncio.gather(*(one(k) for k in dict.fromkeys(keywords))))
    return result


def _by_keyword(rows: Sequence[dict[str, str]]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for row in rows:
        found.setdefault(row.get("keyword", ""), []).append(row["prompt"])
    return found


def _accept(
    items: list[str],
    keyword: str,
    report: KeywordReport,
    rows: list[dict[str, str]],
    seen: dict[str, set[str]],
    near: NearDuplicates,
    model: str,
    t_hash: str,
) -> None:
    keys = seen.setdefault(keyword, set())
    fresh: list[str] = []
    for item in items:
        if floor_reason(item):
            report.floor_refused += 1
            continue
        key = normal_form(item)
        if key in keys:
            report.exact_duplicates += 1
            continue
        keys.add(key)
        fresh.append(item)
    for item, keep in zip(fresh, near.keep(keyword, fresh), strict=True):
        if not keep:
            report.near_duplicates += 1
        elif report.short:
            rows.append(
                {"prompt": item, "keyword": keyword, "id": prompt_id(keyword, item), "model": model, "template": t_hash}
            )
            report.added += 1


def prompts(
    keywords: Sequence[str],
    per_keyword: int,
    out: str | os.PathLike[str],
    *,
    model: str,
    config: str | os.PathLike[str] | None = None,
    template: str | None = None,
    similarity: float = 0.9,
    embed_model: str | None = None,
    **kwargs: Any,
) -> PromptsResult:
    """`expand` from a ``BACKEND:MODEL`` spec (options from a TOML/YAML config's ``[backends.*]``).

    Args:
        keywords: The keywords.
        per_keyword: Distinct prompts per keyword.
        out: The CSV.
        model: ``BACKEND:MODEL`` (``openai:llama3.1-8b``, ``hf:Qwen/Qwen2.5-1.5B-Instruct``).
        config: A config file with ``[backends.*]`` tables (endpoints, keys by variable name).
        template: A template file or text (``{keyword}``, ``{n}``); default `DEFAULT_TEMPLATE`.
        similarity: Near-duplicate threshold (1 turns the embedding filter off).
        embed_model: Sentence-transformers model for near duplicates (default all-MiniLM-L6-v2).
        **kwargs: More `expand` arguments (``batch``, ``max_requests``, ``concurrency``, ``on_keyword``).
    """
    from vhd.backends.registry import create_backend
    from vhd.config import load_config

    text = DEFAULT_TEMPLATE
    if template is not None:
        text = Path(template).read_text(encoding="utf-8") if Path(template).is_file() else template
    cfg = load_config(None if config is None else Path(config))
    backend = create_backend(model, cfg.backends)

    async def run() -> PromptsResult:
        try:
            await backend.check()
            near = NearDuplicates(similarity, embed_model)
            return await expand(backend, keywords, per_keyword, out, template=text, near=near, **kwargs)
        finally:
            await backend.aclose()

    return run_sync(run())
