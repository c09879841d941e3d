from __future__ import annotations

from vhd.store import Store
from vhd.store.categories import (
    Assignment,
    Categorization,
    apply_to_verdicts,
    done_ids,
    harmful_annotations,
    load_categorizations,
    save_categorizations,
    status_counts,
)
from vhd.store.migrations import applied_migrations


def result(ann_id: int, status: str = "ok", codes: str = "", method: str = "embed") -> Categorization:
    names = {"A": "Violence and Threats", "F": "Explicit and Sexual Content"}
    return Categorization(
        ann_id, method, "vhd11k", "1.0", "d", "m", status,  # type: ignore[arg-type]
        [Assignment(c, names[c], 0.5) for c in codes],
    )  # fmt: skip


def test_migration_and_round_trip(store: Store) -> None:
    assert "0002_categories" in applied_migrations(store.conn)
    items = harmful_annotations(store)
    assert len(items) == 6 and all(i.annotation.verdict.harmful for i in items)
    ids = [i.annotation_id for i in items]
    save_categorizations(store, [result(ids[0], codes="FA"), result(ids[1], "unparsed"), result(ids[2], "error")])
    assert done_ids(store, "embed", "vhd11k", "1.0") == {ids[0], ids[1]}
    assert done_ids(store, "embed", "vhd11k", "1.0", retry_unparsed=True) == {ids[0]}
    assert done_ids(store, "llm", "vhd11k", "1.0") == set()
    assert status_counts(store, "embed", "vhd11k", "1.0") == {"ok": 1, "unparsed": 1, "error": 1}
    loaded = load_categorizations(store, statuses=["ok"])[ids[0]][0]
    assert [(a.code, a.confidence) for a in loaded.assignments] == [("F", 0.5), ("A", 0.5)]
    store.conn.execute("UPDATE annotations SET categories_json = '[]'")
    assert apply_to_verdicts(store, "embed", "vhd11k", "1.0", codes=["A", "F"]) == 1
    ann = next(a for s, a in store.iter_annotations() if s.id == items[0].sample.id)
    assert ann.verdict.categories == ["Violence and Threats", "Explicit and Sexual Content"]
    save_categorizations(store, [result(ids[0], codes="F")])  # replaces, never duplicates
    assert len(load_categorizations(store)[ids[0]]) == 1
