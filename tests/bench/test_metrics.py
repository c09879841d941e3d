from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from vhd.bench.metrics import BinaryMetrics, MulticlassMetrics, average_precision, roc_auc


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_binary_metrics_equal_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 300
    y = rng.integers(0, 2, n)
    score = np.round(np.clip(y * 0.3 + rng.random(n) * 0.7, 0, 1), 2)  # rounded: ties on purpose
    pred = (rng.random(n) < 0.5).astype(int)
    res = BinaryMetrics(resamples=50).update(y.tolist(), pred.tolist(), score.tolist()).compute()
    v = {k: val.value for k, val in res.values.items()}
    assert v["harmful_acc"] == pytest.approx(skm.recall_score(y, pred))
    assert v["unharmful_acc"] == pytest.approx(skm.recall_score(y, pred, pos_label=0))
    assert v["precision"] == pytest.approx(skm.precision_score(y, pred))
    assert v["f1"] == pytest.approx(skm.f1_score(y, pred))
    assert v["balanced_acc"] == pytest.approx(skm.balanced_accuracy_score(y, pred))
    assert v["average"] == pytest.approx(skm.balanced_accuracy_score(y, pred))
    assert v["accuracy"] == pytest.approx(skm.accuracy_score(y, pred))
    assert v["roc_auc"] == pytest.approx(skm.roc_auc_score(y, score))
    assert v["pr_auc"] == pytest.approx(skm.average_precision_score(y, score))
    assert res.confusion == skm.confusion_matrix(y, pred).tolist()
    for name, val in res.values.items():
        assert val.low is not None and val.high is not None, name
        assert val.low <= val.value <= val.high, name
    assert res.values["harmful_acc"].n == int(y.sum())
    assert res.values["unharmful_acc"].n == n - int(y.sum())


def test_auc_functions_edge_cases() -> None:
    assert roc_auc([1, 1], [0.2, 0.3]) is None
    assert average_precision([0, 0], [0.2, 0.3]) is None
    assert roc_auc([0, 1], [0.5, 0.5]) == pytest.approx(0.5)
    assert average_precision([0, 1, 1], [0.1, 0.9, 0.8]) == pytest.approx(1.0)


def test_no_scores_means_no_auc() -> None:
    res = BinaryMetrics(resamples=0).update([1, 0, 1], [1, 0, 0], [0.9, None, 0.2]).compute()
    assert "roc_auc" not in res.values and not res.curves
    assert res.values["harmful_acc"].value == pytest.approx(0.5)
    assert res.values["harmful_acc"].low is None


def test_multiclass_counts_any_true_category() -> None:
    m = MulticlassMetrics(["A", "B", "C"], resamples=100)
    m.update(
        [["A"], ["A", "B"], ["C"], ["unharmful"], ["unharmful"], ["B"]],
        ["A", "B", "A", "unharmful", "C", None],
    )
    res = m.compute()
    assert res.accuracy.value == pytest.approx(3 / 6)
    assert res.accuracy.n == 6
    assert res.per_class["A"].value == pytest.approx(1 / 2)  # A-samples: [A] right, [A,B] predicted B
    assert res.per_class["B"].value == pytest.approx(1 / 2)
    assert res.per_class["unharmful"].value == pytest.approx(1 / 2)
    assert res.classes[-1] == "unharmful"
    assert sum(map(sum, res.confusion)) == 6
    assert res.confusion[res.classes.index("B")][res.classes.index("B")] == 1


def test_multiclass_accuracy_equals_sklearn_for_single_labels() -> None:
    rng = np.random.default_rng(5)
    classes = ["A", "B", "C", "unharmful"]
    y = rng.choice(classes, 200)
    p = rng.choice(classes, 200)
    res = MulticlassMetrics(["A", "B", "C"], resamples=0).update([[c] for c in y], list(p)).compute()
    assert res.accuracy.value == pytest.approx(skm.accuracy_score(y, p))
    recalls = skm.recall_score(y, p, labels=classes, average=None)
    for c, r in zip(classes, recalls, strict=True):
        assert res.per_class[c].value == pytest.approx(r)


def test_rows_and_pandas() -> None:
    res = BinaryMetrics(resamples=10).update([1, 0], [1, 1], [0.9, 0.4]).compute()
    rows = res.to_rows()
    assert {r["metric"] for r in rows} >= {"harmful_acc", "roc_auc"}
    try:
        import pandas  # noqa: F401
    except ImportError:
        from vhd.errors import MissingDependencyError

        with pytest.raises(MissingDependencyError):
            res.to_pandas()
    else:
        assert len(res.to_pandas()) == len(rows)


def test_one_class_group_has_no_curves_and_no_nan() -> None:
    res = BinaryMetrics(resamples=20).update([1, 1, 1], [1, 0, 1], [0.9, 0.2, 0.7]).compute()
    assert not res.curves
    assert res.values["roc_auc"].value is None and res.values["unharmful_acc"].value is None
    assert res.values["harmful_acc"].value == pytest.approx(2 / 3)
