"""`compute_stats`: the category distribution (the paper's figure 3) and other counts.

Everything is recomputed from the store: the harmful samples per category, real against
synthetic, for images and videos; the harmful share per keyword and per source; the reasons
given most often; and how many verdicts were refusals, unparsed or errors.
`vhd.categorize.stats_files.write_stats` writes the figure (PNG, needs matplotlib), CSV and
Markdown tables, and a JSON summary.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from vhd.records import Kind, Source, Status
from vhd.store import categories as cstore
from vhd.store.sqlite import Store
from vhd.taxonomy.taxonomy import Taxonomy, load_taxonomy

SOURCES = (*(s.value for s in Source), "unknown")
"""Source columns, in order (``unknown``: the sample's source was never given)."""

KINDS = ("image", "video")
"""Kind columns, in order."""

OTHER = "(other)"
"""Row name for categories that are not in the taxonomy."""


@dataclass
class CategoryRow:
    """Harmful samples in one category, by kind and source.

    Attributes:
        code: The category's code (``-`` for the other row).
        name: Its name.
        counts: ``"image/real"``-style keys to counts.
    """

    code: str
    name: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """All harmful samples in the category."""
        return sum(self.counts.values())


@dataclass
class ShareRow:
    """Harmful share within a group of samples (a keyword, or a kind and source).

    Attributes:
        group: The group's name.
        samples: Samples with a decision (harmful or not).
        harmful: Of those, harmful.
    """

    group: str
    samples: int = 0
    harmful: int = 0

    @property
    def share(self) -> float:
        """Harmful samples over samples (0 when empty)."""
        return self.harmful / self.samples if self.samples else 0.0


@dataclass
class Stats:
    """Counts a report needs, all recomputable from the store.

    Attributes:
        taxonomy: ``name@version`` of the taxonomy the rows follow.
        columns: The ``kind/source`` columns that hold samples, in order.
        categories: One row per category (taxonomy order), then ``(other)`` when needed.
        totals: annotations, harmful, unharmful, refused, unparsed, truncated, errors,
            harmful_categorized, harmful_uncategorized.
        keywords: Harmful share per keyword (most samples first).
        sources: Harmful share per kind and source.
        reasons: The most frequent harm reasons with counts (a debate's reasons: verdicts a
            cascade stage decided have none).
        decided_by: Verdicts (errors left out) by the cascade stage that decided them, or
            ``debate``; empty when no cascade ran.
    """

    taxonomy: str
    columns: list[str]
    categories: list[CategoryRow]
    totals: dict[str, int]
    keywords: list[ShareRow]
    sources: list[ShareRow]
    reasons: list[tuple[str, int]]
    decided_by: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (category totals and shares included)."""
        d = asdict(self)
        for row, out in zip(self.categories, d["categories"], strict=True):
            out["total"] = row.total
        for key in ("keywords", "sources"):
            for row, out in zip(getattr(self, key), d[key], strict=True):
                out["share"] = round(row.share, 4)
        return d


def compute_stats(
    store: Store | str | os.PathLike[str],
    *,
    taxonomy: Taxonomy | str | os.PathLike[str] | None = None,
    method: str | None = None,
    config_hash: str | None = None,
    top_reasons: int = 20,
) -> Stats:
    """Count a store's annotations by category, keyword, source, reason and status.

    Args:
        store: A `Store` or the path of one.
        taxonomy: Orders and names the categories (default VHD11K's).
        method: Read categories from this method's stored results (``embed``/``llm``) instead
            of the verdicts' categories (the latest categorisation applied).
        config_hash: Only annotations under this configuration (default: each sample's latest).
        top_reasons: How many reasons to list.
    """
    from vhd.categorize.assign import use_store

    tax = load_taxonomy(taxonomy)
    db, owned = use_store(store)
    try:
        return _compute(db, tax, method, config_hash, top_reasons)
    finally:
        if owned:
            db.close()


def _compute(db: Store, tax: Taxonomy, method: str | None, config_hash: str | None, top_reasons: int) -> Stats:
    totals = Counter(
        {k: 0 for k in ("annotations", "harmful", "unharmful", "refused", "unparsed", "truncated", "errors")}
    )
    keywords: dict[str, ShareRow] = {}
    sources: dict[str, ShareRow] = {}
    reasons: Counter[str] = Counter()
    rows = {c.code: CategoryRow(c.code, c.name) for c in tax}
    other = CategoryRow("-", OTHER)
    used: set[str] = set()
    by_method = _method_names(db, tax, method, config_hash) if method else None
    decided_by: Counter[str] = Counter()
    for sample, ann in db.iter_annotations(config_hash=config_hash):
        v = ann.verdict
        status = Status(v.status)
        if ann.decided_by is not None and status is not Status.ERROR:
            decided_by[ann.decided_by] += 1
        totals["annotations"] += 1
        totals["refused"] += status is Status.REFUSED
        totals["unparsed"] += status is Status.UNPARSED
        totals["truncated"] += status is Status.TRUNCATED
        totals["errors"] += status is Status.ERROR
        if v.harmful is None or status in (Status.UNPARSED, Status.TRUNCATED, Status.ERROR):
            continue
        harmful = bool(v.harmful)
        totals["harmful" if harmful else "unharmful"] += 1
        column = f"{Kind(sample.kind).value}/{sample.source if sample.source in SOURCES[:2] else 'unknown'}"
        for group, table in ((sample.keyword or "(none)", keywords), (column, sources)):
            row = table.setdefault(group, ShareRow(group))
            row.samples += 1
            row.harmful += harmful
        if not harmful:
            continue
        if not v.refused and v.reason.strip() and ann.decided_by in (None, "debate"):
            reasons[" ".join(v.reason.split()).rstrip(".").lower()] += 1
        names = by_method.get((sample.id, ann.config_hash), []) if by_method is not None else v.categories
        totals["harmful_categorized" if names else "harmful_uncategorized"] += 1
        used.add(column)
        for name in dict.fromkeys(names):
            cat = tax.find(name)
            target = rows[cat.code] if cat is not None else other
            target.counts[column] = target.counts.get(column, 0) + 1
    columns = [f"{k}/{s}" for k in KINDS for s in SOURCES if f"{k}/{s}" in used or s != "unknown"]
    category_rows = list(rows.values()) + ([other] if other.counts else [])
    for cat_row in category_rows:
        cat_row.counts = {c: cat_row.counts.get(c, 0) for c in columns}
    totals.setdefault("harmful_categorized", 0)
    totals.setdefault("harmful_uncategorized", 0)
    return Stats(
        taxonomy=tax.key,
        columns=columns,
        categories=category_rows,
        totals=dict(totals),
        keywords=sorted(keywords.values(), key=lambda r: (-r.samples, r.group)),
        sources=[sources[k] for k in sorted(sources)],
        reasons=reasons.most_common(top_reasons),
        decided_by=dict(decided_by.most_common()),
    )


def _method_names(db: Store, tax: Taxonomy, method: str, config_hash: str | None) -> dict[tuple[str, str], list[str]]:
    found = cstore.load_categorizations(db, method=method, taxonomy=tax.name, version=tax.version, statuses=["ok"])
    out = {}
    for item in cstore.harmful_annotations(db, config_hash=config_hash):
        cats = found.get(item.annotation_id)
        if cats:
            out[(item.sample.id, item.annotation.config_hash)] = cats[0].names
    return out
