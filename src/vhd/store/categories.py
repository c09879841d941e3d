"""Category assignments in the store: one categorisation per annotation, method and taxonomy version.

Tables (migration ``0002_categories``): ``categorizations`` holds one attempt per
(annotation, method, taxonomy, taxonomy version) with its status (``ok``, ``unparsed`` or
``error``), model, raw answer and parameters; ``category_assignments`` holds the categories it
assigned, each with a confidence. Deleting or replacing an annotation deletes its
categorisations. Saving an ``ok`` categorisation also writes the category names into the
annotation's verdict (``Verdict.categories``), which is what `vhd show` and every export carry.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from vhd.records import Annotation, Sample, Status
from vhd.store.sqlite import Store

CategorizationStatus = Literal["ok", "unparsed", "error"]
_HARMFUL = (Status.OK.value, Status.REFUSED.value)


@dataclass(frozen=True)
class Assignment:
    """One category given to one annotation.

    Attributes:
        code: The category's code in its taxonomy.
        name: The category's name.
        confidence: How sure the method is (``embed``: cosine similarity to the category;
            ``llm``: probability that the answer starts with this code, when the backend returns
            log-probabilities); None when unknown.
    """

    code: str
    name: str
    confidence: float | None = None


@dataclass
class Categorization:
    """The result of categorising one annotation with one method and taxonomy version.

    Attributes:
        annotation_id: Row id of the annotation in the store.
        method: ``llm``, ``embed`` or another method name.
        taxonomy: The taxonomy's name.
        taxonomy_version: Its version.
        taxonomy_digest: sha256 of its content (tells an edited file that kept its version).
        model: The model used (a ``BACKEND:MODEL`` spec or an embedding model name).
        status: ``ok`` (zero or more categories), ``unparsed`` (answer unreadable) or ``error``
            (retried on the next run).
        assignments: The categories, in taxonomy order.
        answer: The model's raw answer (``llm``).
        error: What failed, for status ``error``.
        params: Method parameters (thresholds, prompt hash, ...).
        prompt_tokens: Prompt tokens spent.
        completion_tokens: Completion tokens spent.
        created_at: Unix time it was written.
    """

    annotation_id: int
    method: str
    taxonomy: str
    taxonomy_version: str
    taxonomy_digest: str
    model: str
    status: CategorizationStatus
    assignments: list[Assignment] = field(default_factory=list)
    answer: str | None = None
    error: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    created_at: float = 0.0

    @property
    def names(self) -> list[str]:
        """The assigned category names, in order."""
        return [a.name for a in self.assignments]


@dataclass(frozen=True)
class HarmfulAnnotation:
    """A harmful annotation (status ok or refused, harmful) with its row id.

    Attributes:
        annotation_id: Row id in the ``annotations`` table.
        sample: Its sample.
        annotation: The annotation with its turns.
    """

    annotation_id: int
    sample: Sample
    annotation: Annotation


def iter_harmful_annotations(store: Store, *, config_hash: str | None = None) -> Iterator[HarmfulAnnotation]:
    """Yield the harmful annotations of a store, ordered by sample path, a page at a time.

    Args:
        store: The store.
        config_hash: Only annotations under this configuration (default: each sample's latest,
            as exports do).
    """
    for ann_id, sample, ann in store.iter_annotation_rows(config_hash=config_hash):
        if ann.verdict.harmful and ann.verdict.status.value in _HARMFUL:
            yield HarmfulAnnotation(ann_id, sample, ann)


def harmful_annotations(store: Store, *, config_hash: str | None = None) -> list[HarmfulAnnotation]:
    """Return the harmful annotations of a store, ordered by sample path (`iter_harmful_annotations` as a list).

    Args:
        store: The store.
        config_hash: Only annotations under this configuration (default: each sample's latest,
            as exports do).
    """
    return list(iter_harmful_annotations(store, config_hash=config_hash))


def _final(retry_unparsed: bool) -> list[str]:
    return ["ok"] if retry_unparsed else ["ok", "unparsed"]


def count_harmful(
    store: Store,
    *,
    config_hash: str | None = None,
    done: tuple[str, str, str] | None = None,
    retry_unparsed: bool = False,
) -> int:
    """How many annotations `iter_harmful_annotations` yields, counted by SQL (nothing read per row).

    Args:
        store: The store.
        config_hash: As for `iter_harmful_annotations`.
        done: ``(method, taxonomy, version)``: count only those with a final categorisation
            under it (as `done_ids` says).
        retry_unparsed: With ``done``: an ``unparsed`` result is not final.
    """
    marks = ",".join("?" * len(_HARMFUL))
    conds = ["s.removed_at IS NULL", "a.harmful = 1", f"a.status IN ({marks})"]
    params: list[Any] = [*_HARMFUL]
    if config_hash:
        conds.append("a.config_hash = ?")
        params.append(config_hash)
    else:
        conds.append("a.id = (SELECT MAX(a2.id) FROM annotations a2 WHERE a2.sample_id = a.sample_id)")
    if done is not None:
        statuses = _final(retry_unparsed)
        conds.append(
            "EXISTS (SELECT 1 FROM categorizations c WHERE c.annotation_id = a.id AND c.method = ? AND c.taxonomy = ? "
            f"AND c.taxonomy_version = ? AND c.status IN ({','.join('?' * len(statuses))}))"
        )
        params += [*done, *statuses]
    sql = f"SELECT COUNT(*) FROM samples s JOIN annotations a ON a.sample_id = s.id WHERE {' AND '.join(conds)}"
    return int(store.conn.execute(sql, params).fetchone()[0])


def done_ids(
    store: Store,
    method: str,
    taxonomy: str,
    version: str,
    *,
    retry_unparsed: bool = False,
    among: Sequence[int] | None = None,
) -> set[int]:
    """Annotation ids that already have a final categorisation (``ok``, or ``unparsed`` unless retried).

    Args:
        store: The store.
        method: The method.
        taxonomy: Taxonomy name.
        version: Taxonomy version.
        retry_unparsed: An ``unparsed`` result is not final.
        among: Only look at these annotation ids (a page of them: the answer stays small).
    """
    statuses = _final(retry_unparsed)
    marks = ",".join("?" * len(statuses))
    sql = (
        "SELECT annotation_id FROM categorizations WHERE method = ? AND taxonomy = ? AND taxonomy_version = ? "
        f"AND status IN ({marks})"
    )
    params: list[Any] = [method, taxonomy, version, *statuses]
    if among is None:
        return {int(r[0]) for r in store.conn.execute(sql, params).fetchall()}
    out: set[int] = set()
    for start in range(0, len(among), 500):
        chunk = list(among[start : start + 500])
        rows = store.conn.execute(
            f"{sql} AND annotation_id IN ({','.join('?' * len(chunk))})", [*params, *chunk]
        ).fetchall()
        out.update(int(r[0]) for r in rows)
    return out


def stored_digests(store: Store, method: str, taxonomy: str, version: str) -> set[str]:
    """Digests of the taxonomy content stored under this name and version (one, unless it was edited)."""
    rows = store.conn.execute(
        "SELECT DISTINCT taxonomy_digest FROM categorizations "
        "WHERE method = ? AND taxonomy = ? AND taxonomy_version = ?",
        (method, taxonomy, version),
    ).fetchall()
    return {str(r[0]) for r in rows}


def save_categorization(store: Store, cat: Categorization, *, apply: bool = True) -> None:
    """Write one categorisation (replacing an earlier one under the same key) in one transaction.

    Args:
        store: The store.
        cat: The result.
        apply: For an ``ok`` result, also set the annotation's verdict categories to its names.
    """
    with store._tx() as conn:
        _write(conn, cat, apply=apply)


def save_categorizations(store: Store, cats: Iterable[Categorization], *, apply: bool = True) -> int:
    """Write many categorisations in one transaction; returns how many."""
    n = 0
    with store._tx() as conn:
        for cat in cats:
            _write(conn, cat, apply=apply)
            n += 1
    return n


def _write(conn: sqlite3.Connection, cat: Categorization, *, apply: bool) -> None:
    conn.execute(
        "DELETE FROM categorizations WHERE annotation_id = ? AND method = ? AND taxonomy = ? AND taxonomy_version = ?",
        (cat.annotation_id, cat.method, cat.taxonomy, cat.taxonomy_version),
    )
    cur = conn.execute(
        "INSERT INTO categorizations (annotation_id, method, taxonomy, taxonomy_version, taxonomy_digest, model, "
        "status, answer, error, params_json, prompt_tokens, completion_tokens, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            cat.annotation_id,
            cat.method,
            cat.taxonomy,
            cat.taxonomy_version,
            cat.taxonomy_digest,
            cat.model,
            cat.status,
            cat.answer,
            cat.error,
            json.dumps(cat.params, ensure_ascii=False, default=str),
            cat.prompt_tokens,
            cat.completion_tokens,
            cat.created_at or time.time(),
        ),
    )
    conn.executemany(
        "INSERT INTO category_assignments (categorization_id, code, name, confidence) VALUES (?, ?, ?, ?)",
        [(cur.lastrowid, a.code, a.name, a.confidence) for a in cat.assignments],
    )
    if apply and cat.status == "ok":
        conn.execute(
            "UPDATE annotations SET categories_json = ? WHERE id = ?",
            (json.dumps(cat.names, ensure_ascii=False), cat.annotation_id),
        )


def load_categorizations(
    store: Store,
    *,
    method: str | None = None,
    taxonomy: str | None = None,
    version: str | None = None,
    statuses: Sequence[str] | None = None,
) -> dict[int, list[Categorization]]:
    """Read categorisations, keyed by annotation id (newest first within each).

    Args:
        store: The store.
        method: Only this method.
        taxonomy: Only this taxonomy name.
        version: Only this taxonomy version.
        statuses: Only these statuses.
    """
    conds: list[str] = []
    params: list[Any] = []
    for column, value in (("method", method), ("taxonomy", taxonomy), ("taxonomy_version", version)):
        if value is not None:
            conds.append(f"c.{column} = ?")
            params.append(value)
    if statuses:
        conds.append(f"c.status IN ({','.join('?' * len(statuses))})")
        params.extend(statuses)
    where = f"WHERE {' AND '.join(conds)}" if conds else ""
    cur = store.conn.cursor()
    cur.row_factory = sqlite3.Row
    rows = cur.execute(f"SELECT c.* FROM categorizations c {where} ORDER BY c.created_at DESC, c.id DESC", params)
    cats: dict[int, Categorization] = {}
    out: dict[int, list[Categorization]] = {}
    for r in rows.fetchall():
        cat = Categorization(
            annotation_id=int(r["annotation_id"]),
            method=r["method"],
            taxonomy=r["taxonomy"],
            taxonomy_version=r["taxonomy_version"],
            taxonomy_digest=r["taxonomy_digest"],
            model=r["model"],
            status=r["status"],
            answer=r["answer"],
            error=r["error"],
            params=json.loads(r["params_json"]),
            prompt_tokens=int(r["prompt_tokens"]),
            completion_tokens=int(r["completion_tokens"]),
            created_at=float(r["created_at"]),
        )
        cats[int(r["id"])] = cat
        out.setdefault(cat.annotation_id, []).append(cat)
    if cats:
        ids = list(cats)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            found = store.conn.execute(
                "SELECT categorization_id, code, name, confidence FROM category_assignments "
                f"WHERE categorization_id IN ({','.join('?' * len(chunk))}) ORDER BY rowid",
                chunk,
            ).fetchall()
            for cid, code, name, confidence in found:
                cats[int(cid)].assignments.append(Assignment(code, name, confidence))
    return out


def apply_to_verdicts(store: Store, method: str, taxonomy: str, version: str, codes: Sequence[str] = ()) -> int:
    """Set each annotation's verdict categories from its ``ok`` categorisation under this key.

    Args:
        store: The store.
        method: The method whose results to apply.
        taxonomy: Taxonomy name.
        version: Taxonomy version.
        codes: Category codes in taxonomy order, to order the names (default: by code).

    Returns:
        How many annotations were updated.
    """
    order = {c: i for i, c in enumerate(codes)}
    updated = 0
    last = -1
    with store._tx() as conn:  # a page of results at a time: nothing held per annotation
        while True:
            rows = conn.execute(
                "SELECT id, annotation_id FROM categorizations WHERE method = ? AND taxonomy = ? "
                "AND taxonomy_version = ? AND status = 'ok' AND id > ? ORDER BY id LIMIT 500",
                (method, taxonomy, version, last),
            ).fetchall()
            if not rows:
                break
            last = int(rows[-1][0])
            found: dict[int, list[tuple[str, str]]] = {int(r[0]): [] for r in rows}
            for cid, code, name in conn.execute(
                "SELECT categorization_id, code, name FROM category_assignments "
                f"WHERE categorization_id IN ({','.join('?' * len(found))}) ORDER BY rowid",
                list(found),
            ):
                found[int(cid)].append((str(code), str(name)))
            updates = []
            for cid, ann_id in rows:
                pairs = sorted(found[int(cid)], key=lambda cn: (order.get(cn[0], len(order)), cn[0]))
                updates.append((json.dumps([name for _, name in pairs], ensure_ascii=False), int(ann_id)))
            conn.executemany("UPDATE annotations SET categories_json = ? WHERE id = ?", updates)
            updated += len(updates)
    return updated


def status_counts(store: Store, method: str, taxonomy: str, version: str) -> dict[str, int]:
    """How many categorisations under this key have each status (all three keys)."""
    out = {"ok": 0, "unparsed": 0, "error": 0}
    rows = store.conn.execute(
        "SELECT status, COUNT(*) FROM categorizations WHERE method = ? AND taxonomy = ? AND taxonomy_version = ? "
        "GROUP BY status",
        (method, taxonomy, version),
    ).fetchall()
    out.update({str(r[0]): int(r[1]) for r in rows})
    return out
