"""`vhd.compare.review_queue`: the review queue, the contested samples a person should look at first.

A sample enters the queue when the judge is unsure (its score, P(harmful), lies within
``margin`` of 0.5), when its reply could not be read, when another configuration in the store
(another model, prompt, round count or example set) decided otherwise, or when a detector of a
``vhd bench`` report disagrees with the judge. The queue is ordered by uncertainty, highest
first: ``1 - |2p - 1|`` for the judge's score p = P(harmful), so 1 at p = 0.5 and 0 at p = 0 or 1
(no readable decision counts as 1, a decision without a score as 0); then by disagreement (the
minority's share of all votes, largest first), then by the number of dissenting sources.

Example:
    >>> queue = build_queue("run.db", detector_reports=["report/"], top=50)  # doctest: +SKIP
    >>> queue.write_csv("queue.csv")  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError
from vhd.store.sqlite import StoreLike, store_path

MARGIN = 0.15
"""Default: a score within this distance of 0.5 is uncertain."""

JUDGE = "judge"
"""The vote label of the judge under the chosen configuration."""

_TEXT_COLUMNS = frozenset({"sample_id", "path", "kind", "judge", "votes", "reasons", "judge_reason", "decided_by"})
"""Columns of free text (escaped for spreadsheets); the others hold numbers."""

CSV_COLUMNS = (
    "rank",
    "sample_id",
    "path",
    "kind",
    "judge",
    "score",
    "uncertainty",
    "disagreement",
    "dissent",
    "votes",
    "reasons",
    "judge_reason",
    "decided_by",
)
"""Columns of the queue CSV, in order."""


@dataclass
class ReviewItem:
    """One sample in the review queue.

    Attributes:
        sample_id: Content hash.
        path: Media path.
        kind: ``image`` or ``video``.
        harmful: The judge's decision under the chosen configuration; None when unreadable.
        score: The judge's P(harmful), when known.
        judge_reason: The judge's short reason.
        votes: Source -> decision: ``judge``, each other configuration (``config:<hash prefix>``)
            and each detector (``detector:<label>``).
        reasons: Why the sample is in the queue, in words.
        decided_by: In a cascade run, the stage that decided the verdict (or ``debate``).
    """

    sample_id: str
    path: str
    kind: str
    harmful: bool | None
    score: float | None
    judge_reason: str = ""
    votes: dict[str, bool] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    decided_by: str | None = None

    @property
    def uncertainty(self) -> float:
        """How unsure the judge is: ``1 - |2p - 1|``, 1 at p = 0.5 (most uncertain), 0 at p = 0 or 1.

        No readable decision counts as 1; a decision without a score as 0 (nothing says it is unsure).
        """
        if self.harmful is None:
            return 1.0
        if self.score is None:
            return 0.0
        return 1.0 - abs(2.0 * min(max(self.score, 0.0), 1.0) - 1.0)

    @property
    def dissent(self) -> int:
        """Sources whose decision differs from the judge's (all others when the judge has none)."""
        others = [v for k, v in self.votes.items() if k != JUDGE]
        return len(others) if self.harmful is None else sum(v != self.harmful for v in others)

    @property
    def disagreement(self) -> float:
        """The minority's share of all votes: 0 unanimous, 0.5 an even split."""
        if not self.votes:
            return 0.0
        yes = sum(self.votes.values())
        return min(yes, len(self.votes) - yes) / len(self.votes)

    def sort_key(self) -> tuple[float, float, int, str]:
        """Most uncertain first, then most disagreement, then most dissent, then by path."""
        return (-round(self.uncertainty, 12), -self.disagreement, -self.dissent, self.path)

    def row(self, rank: int) -> dict[str, Any]:
        """The item as a CSV row."""
        yn = {True: "yes", False: "no", None: ""}
        return {
            "rank": rank,
            "sample_id": self.sample_id,
            "path": self.path,
            "kind": self.kind,
            "judge": yn[self.harmful],
            "score": "" if self.score is None else f"{self.score:.4f}",
            "uncertainty": f"{self.uncertainty:.4f}",
            "disagreement": f"{self.disagreement:.4f}",
            "dissent": self.dissent,
            "votes": "; ".join(f"{k}={yn[v]}" for k, v in self.votes.items()),
            "reasons": "; ".join(self.reasons),
            "judge_reason": self.judge_reason,
            "decided_by": self.decided_by or "",
        }


@dataclass
class ReviewQueue:
    """The ordered queue and where its votes came from.

    Attributes:
        store: The store read.
        config_hash: The configuration whose judge the queue is about.
        other_configs: Other configurations whose decisions were compared.
        detectors: Detector labels read from bench reports.
        candidates: Samples with a final annotation under the configuration.
        items: The queue, ordered, cut to ``top``.
        total: Samples that qualified before the cut.
    """

    store: str
    config_hash: str
    other_configs: list[str] = field(default_factory=list)
    detectors: list[str] = field(default_factory=list)
    candidates: int = 0
    items: list[ReviewItem] = field(default_factory=list)
    total: int = 0

    def to_csv(self) -> str:
        """The queue as CSV text (`CSV_COLUMNS`); text cells escaped with `vhd.fileio.escape_cell`."""
        from vhd.fileio import escape_cell

        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
        writer.writeheader()
        for rank, item in enumerate(self.items, start=1):
            row = item.row(rank)
            writer.writerow({k: escape_cell(v) if k in _TEXT_COLUMNS else v for k, v in row.items()})
        return buf.getvalue()

    def write_csv(self, path: str | Path) -> Path:
        """Write `to_csv` atomically."""
        from vhd.fileio import atomic_write

        return atomic_write(path, self.to_csv())


def read_detector_report(folder: str | Path) -> dict[str, dict[str, tuple[bool, float | None]]]:
    """Decisions of every detector in a ``vhd bench`` report folder.

    Returns:
        Detector label -> sample id -> (harmful, score), from ``results.json`` (labels and cache
        keys) and ``predictions.sqlite`` (the predictions).

    Raises:
        ConfigError: The folder is not a bench report.
    """
    from vhd.bench.cache import CACHE_FILE, PredictionCache

    root = Path(folder)
    results, cache_file = root / "results.json", root / CACHE_FILE
    if not results.is_file() or not cache_file.is_file():
        raise ConfigError(f"{root} is not a `vhd bench` report (results.json and {CACHE_FILE}): pass its --out folder")
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {results}: {exc}; run `vhd bench` again") from None
    detectors = data.get("detectors") if isinstance(data, dict) else None
    if not isinstance(detectors, list):
        raise ConfigError(f"{results} is not a `vhd bench` results.json (no list of detectors); run `vhd bench` again")
    out: dict[str, dict[str, tuple[bool, float | None]]] = {}
    with PredictionCache(cache_file) as cache:
        for det in detectors:  # an entry that is not a detector is skipped, never a crash
            run = det.get("run") if isinstance(det, dict) else None
            key = run.get("key") if isinstance(run, dict) else None
            if not key:
                continue
            preds = cache.get_many(str(key))
            out[str(det.get("label") or str(key)[:12])] = {
                sid: (bool(p.harmful), p.score) for sid, p in preds.items() if p.harmful is not None
            }
    return out


def build_queue(
    store: StoreLike,
    *,
    config_hash: str | None = None,
    detector_reports: Sequence[str | Path] = (),
    margin: float = MARGIN,
    top: int | None = None,
) -> ReviewQueue:
    """Collect the samples a person should review, most uncertain first.

    Args:
        store: The annotation store.
        config_hash: The judge's configuration (a prefix is enough); default the newest one.
        detector_reports: ``vhd bench`` report folders whose detectors vote too.
        margin: Scores within this distance of 0.5 count as uncertain.
        top: Keep the first N (None: all).

    Returns:
        The queue; ``total`` counts every sample that qualified.

    Raises:
        ConfigError: No such store or configuration, a bad report folder, or a bad margin/top.
    """
    store = store_path(store)
    from vhd.store.sqlite import open_store

    if not 0 <= margin <= 0.5:
        raise ConfigError(f"--margin must lie between 0 and 0.5, got {margin:g}")
    if top is not None and top < 1:
        raise ConfigError(f"--top must be at least 1, got {top}")
    detectors: dict[str, dict[str, tuple[bool, float | None]]] = {}
    with open_store(store) as db:
        for folder in detector_reports:
            for label, preds in read_detector_report(folder).items():
                detectors[f"detector:{label}"] = preds
        chosen = db.resolve_config_hash(config_hash, latest=True)
        rows = db.final_verdicts()
    items: dict[str, ReviewItem] = {}
    others: dict[str, dict[str, bool]] = {}
    for r in rows:
        if r.config_hash == chosen:
            items[r.sample_id] = ReviewItem(
                r.sample_id, r.path, r.kind, r.harmful, r.score, r.reason, decided_by=r.decided_by
            )
        elif r.harmful is not None:
            others.setdefault(r.sample_id, {})[f"config:{r.config_hash[:12]}"] = r.harmful
    queue = ReviewQueue(str(store), chosen, candidates=len(items))
    queue.other_configs = sorted({k for v in others.values() for k in v})
    queue.detectors = sorted(detectors)
    selected: list[ReviewItem] = []
    for sid, item in items.items():
        if item.harmful is not None:
            item.votes[JUDGE] = item.harmful
        item.votes.update(others.get(sid, {}))
        for label, preds in detectors.items():
            if sid in preds:
                item.votes[label] = preds[sid][0]
        if item.harmful is None:
            item.reasons.append("the judge's answer could not be read")
        elif item.score is not None and abs(item.score - 0.5) <= margin:
            item.reasons.append(f"judge uncertain (score {item.score:.2f})")
        yn = {True: "yes", False: "no"}
        for label, vote in item.votes.items():
            if label != JUDGE and (item.harmful is None or vote != item.harmful):
                what = "another configuration" if label.startswith("config:") else "a detector"
                item.reasons.append(f"{what} ({label.split(':', 1)[1]}) says {yn[vote]}")
        if item.reasons:
            selected.append(item)
    selected.sort(key=ReviewItem.sort_key)
    queue.total = len(selected)
    queue.items = selected[:top] if top is not None else selected
    return queue


def export_review_labelstudio(
    queue: ReviewQueue,
    out: str | Path,
    *,
    media_root: str | Path = "/",
    url_prefix: str | None = None,
) -> Path:
    """Write the queue as Label Studio tasks, the judge's verdict as a pre-annotation.

    The tasks fit the labeling configuration of `vhd.labels.labelstudio.convert.labeling_config` (written
    next to the tasks as ``.xml``), so people's decisions come back with ``vhd label
    --import-labelstudio``. Each task also carries the queue's rank and reasons in ``data``.

    Args:
        queue: The queue.
        out: The tasks file (``.json``).
        media_root: Folder media paths are made relative to (Label Studio's local-files root).
        url_prefix: Media URL prefix (default Label Studio's local-files route).

    Returns:
        The tasks file.
    """
    from vhd.fileio import atomic_write
    from vhd.labels.files import CATEGORIES
    from vhd.labels.labelstudio import convert as ls
    from vhd.records import Kind, Role
    from vhd.store.sqlite import Store

    prefix = ls.LOCAL_FILES if url_prefix is None else url_prefix
    tasks: list[dict[str, Any]] = []
    kinds: set[str] = set()
    with Store(queue.store, create=True) as db:
        for rank, item in enumerate(queue.items, start=1):
            kinds.add(item.kind)
            key = "image" if item.kind == Kind.IMAGE.value else "video"
            data: dict[str, Any] = {
                key: ls.media_url(item.path, media_root, prefix),
                "sample_id": item.sample_id,
                "path": item.path,
                "affirmative": "",
                "negative": "",
                "review_rank": rank,
                "review_reasons": "; ".join(item.reasons),
            }
            ann = db.get_annotation(item.sample_id, queue.config_hash)
            if ann is not None:
                data["affirmative"] = "\n\n".join(ann.arguments(Role.AFFIRMATIVE))
                data["negative"] = "\n\n".join(ann.arguments(Role.NEGATIVE))
            task: dict[str, Any] = {"data": data}
            if item.score is not None:
                data["p_harmful"] = item.score  # the raw judge score; the prediction's is a confidence
            if item.harmful is not None:
                model = f"vhd-debate-{queue.config_hash[:12]}"
                task["predictions"] = [ls.prediction(item.harmful, item.judge_reason, item.score, model)]
            tasks.append(task)
    path = atomic_write(out, json.dumps(tasks, indent=2, ensure_ascii=False) + "\n")
    kind = Kind.VIDEO if kinds == {Kind.VIDEO.value} else Kind.IMAGE
    atomic_write(path.with_suffix(".xml"), ls.labeling_config(kind, [n for _, n in CATEGORIES]))
    return path
