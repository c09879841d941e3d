"""Reviews in the store: kept for ever, settled into the labelled set, undone, counted for agreement."""

from __future__ import annotations

import pytest

from tests.store.conftest import Builder
from vhd.errors import ConfigError
from vhd.records import LabelledSample
from vhd.store import Store


@pytest.fixture
def ids(store: Store, build: Builder) -> list[str]:
    samples = [build.sample(n) for n in range(4)]
    for s in samples:
        store.upsert_sample(s)
    return [s.id for s in samples]


def _labels(store: Store) -> dict[str, bool]:
    return {i.id: i.harmful for i in store.labelled_set("review")} if "review" in store.labelled_sets() else {}


def test_one_review_labels_at_once_and_undo_takes_it_back(store: Store, ids: list[str]) -> None:
    first = store.add_review("review", ids[0], "alice", harmful=True, categories=["B", "A", "A"], note="n")
    store.add_review("review", ids[0], "alice", harmful=False)  # changed her mind: the newest counts
    assert _labels(store) == {ids[0]: False}
    undone = store.undo_review("review", "alice")
    assert undone is not None and undone.harmful is False
    assert _labels(store) == {ids[0]: True}
    item = store.labelled_set("review")[0]
    assert item.categories == ["A", "B"] and item.reason == "n"
    assert store.undo_review("review", "alice", first) is not None
    assert _labels(store) == {}
    assert store.undo_review("review", "alice") is None  # nothing left
    assert [r.id for r in store.sample_reviews("review", ids[0])] == []


def test_k_reviewers_must_agree_unless_adjudicated(store: Store, ids: list[str]) -> None:
    k = {"reviews_per_sample": 2}
    store.add_review("review", ids[0], "alice", harmful=True, **k)
    assert _labels(store) == {}  # one of two
    store.add_review("review", ids[0], "bob", harmful=True, **k)
    store.add_review("review", ids[1], "alice", harmful=True, **k)
    store.add_review("review", ids[1], "bob", harmful=False, **k)
    assert _labels(store) == {ids[0]: True}
    assert store.agreement_counts("review") == {(2, 2): 1, (1, 2): 1}
    store.add_review("review", ids[1], "carol", harmful=False, adjudication=True, **k)
    assert _labels(store) == {ids[0]: True, ids[1]: False}
    assert store.labelled_set_reviewers("review") == {ids[0]: "alice,bob", ids[1]: "adjudicator:carol"}
    store.undo_review("review", "carol", **k)
    assert _labels(store) == {ids[0]: True}


def test_undo_keeps_imported_labels_of_other_samples(store: Store, ids: list[str], build: Builder) -> None:
    item = LabelledSample(id=ids[3], path=build.root / "media/3.png", kind=build.sample(3).kind, harmful=True)
    store.save_labelled_set("review", [item], source="labels.csv")
    store.add_review("review", ids[0], "alice", harmful=False)
    store.undo_review("review", "alice")
    assert _labels(store) == {ids[3]: True}
    assert store.review_progress("review") == (1, 4)


def test_a_removed_or_unknown_sample_cannot_be_reviewed(store: Store, ids: list[str]) -> None:
    store.remove_sample(ids[0])
    with pytest.raises(ConfigError, match="removed"):
        store.add_review("review", ids[0], "alice", harmful=True)
    with pytest.raises(ConfigError, match="not in the store"):
        store.add_review("review", "f" * 64, "alice", harmful=True)
    assert store.sample_reviews("review", ids[0]) == []


def test_a_bulk_label_is_one_batch_and_one_undo_takes_it_back(store: Store, ids: list[str]) -> None:
    store.add_review("review", ids[3], "alice", harmful=False)
    store.add_review("review", ids[0], "bob", harmful=True)
    store.remove_sample(ids[2])
    made, skipped = store.add_reviews(
        "review", [ids[0], ids[1], ids[2], ids[1], "f" * 64], "alice", harmful=True, categories=["A"]
    )
    assert len(made) == 2 and [s for s, _ in skipped] == [ids[2], "f" * 64]
    assert "removed" in skipped[0][1] and "not in the store" in skipped[1][1]
    assert _labels(store) == {ids[0]: True, ids[1]: True, ids[3]: False}
    batch = store.last_batch("review", "alice")
    assert sorted(r.sample_id for r in batch) == sorted(ids[:2]) and store.last_review("review", "alice") == batch[0]
    assert store.last_batch("review", "bob")[0].sample_id == ids[0]  # another reviewer's batch is theirs
    undone = store.undo_review("review", "alice")
    assert undone is not None and undone.sample_id in ids[:2]
    assert _labels(store) == {ids[0]: True, ids[3]: False}  # bob's label of ids[0] stays
    assert [r.sample_id for r in store.last_batch("review", "alice")] == [ids[3]]  # the review before the batch
    with pytest.raises(ConfigError, match="at most"):
        store.add_reviews("review", ["0" * 64] * 1001, "alice", harmful=True)
