from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.categorize.conftest import Spec, fill_store
from tests.categorize.planted import PLANTED
from vhd.categorize import discover
from vhd.categorize.cluster import REASON_TEMPLATE, cluster_reasons
from vhd.categorize.naming import parse_blocks
from vhd.cli.main import main
from vhd.errors import ConfigError
from vhd.store import Store
from vhd.taxonomy import load_taxonomy

TRUTH = {r: g for g, rs in PLANTED.items() for r in rs}


def planted_counts() -> Counter[str]:
    return Counter({r: 1 + i % 3 for i, r in enumerate(TRUTH)})


def adjusted_rand(groups: list[list[str]]) -> float:
    from sklearn.metrics import adjusted_rand_score

    found = {r: i for i, g in enumerate(groups) for r in g}
    found.update({r: 1000 + j for j, r in enumerate(r for r in TRUTH if r not in found)})  # noise: alone
    keys = list(TRUTH)
    return float(adjusted_rand_score([TRUTH[k] for k in keys], [found[k] for k in keys]))


def test_parse_blocks() -> None:
    text = "**Name:** Gore\nDefinition: Blood.\nExamples: a; b.\n\n2. Name - Hate\nDefinition: Slurs\n"
    assert parse_blocks(text) == [("Gore", "Blood.", ["a", "b"]), ("Hate", "Slurs", [])]
    assert parse_blocks("nothing useful") == []


@pytest.mark.slow
@pytest.mark.parametrize(("clusterer", "minimum"), [("agglomerative", 0.95), ("hdbscan", 0.8)])
def test_planted_groups_are_recovered(embedder: Any, clusterer: str, minimum: float) -> None:
    texts = list(TRUTH)
    vectors = embedder.encode([REASON_TEMPLATE.format(t) for t in texts])
    clusters, _noise = cluster_reasons(texts, [1] * len(texts), vectors, clusterer=clusterer, min_size=3)
    assert adjusted_rand([c.reasons for c in clusters]) >= minimum
    assert all(c.typical == c.reasons[:8] for c in clusters)


@pytest.mark.slow
def test_discover_writes_a_valid_editable_draft(embedder: Any, tmp_path: Path) -> None:
    out = tmp_path / "draft.yaml"
    result = discover(None, reasons=planted_counts(), out=out)
    assert adjusted_rand([c.reasons for c in result.clusters]) >= 0.95
    assert len(result.taxonomy) == 5 and result.out == out
    draft = load_taxonomy(out)  # valid for --taxonomy as it is
    assert draft.codes == list("ABCDE") and draft.to_dict()["categories"] == result.taxonomy.to_dict()["categories"]
    text = out.read_text()
    assert text.startswith("# Draft taxonomy written by `vhd categorize --discover --method cluster`")
    assert "annotation(s), 8 distinct reason(s)" in text
    for cat, cluster in zip(draft, result.clusters, strict=True):
        assert cat.name.lower() == cluster.typical[0].lower() and list(cat.examples) == cluster.typical


@pytest.mark.slow
def test_discover_names_clusters_with_a_model(embedder: Any, tmp_path: Path) -> None:
    script = tmp_path / "namer.yaml"
    script.write_text(
        "rules:\n"
        "  - when: {tag: discover, text: 'nudity|naked|sexual'}\n"
        '    reply: "Name: Sexual Content\\nDefinition: Nudity and sexual acts."\n'
        "  - when: {tag: discover, text: 'nazi|racist'}\n"
        '    reply: "**Name:** Hate\\n**Definition:** Hate symbols and slurs."\n'
        "default: 'I cannot name this.'\n"
    )
    result = discover(None, reasons=planted_counts(), model=f"scripted:{script}")
    by_name = {c.name: c for c in result.taxonomy}
    assert by_name["Sexual Content"].definition == "Nudity and sexual acts."
    assert by_name["Hate"].definition == "Hate symbols and slurs."
    assert sum(c.definition.startswith("Harm reasons such as:") for c in result.taxonomy) == 3  # unreadable answers


def test_llm_only_is_one_prompt_over_a_sample(tmp_path: Path) -> None:
    script = tmp_path / "proposer.json"
    reply = (
        "Name: Gore\nDefinition: Blood and injuries.\nExamples: bloody fight; gunshot wound\n\n"
        "Name: Sex\nDefinition: Nudity."
    )
    script.write_text(json.dumps({"rules": [{"when": {"tag": "discover", "text": "- nudity"}, "reply": reply}]}))
    out = tmp_path / "d.yaml"
    result = discover(
        None,
        method="llm-only",
        model=f"scripted:{script}",
        reasons=planted_counts(),
        out=out,
        sample=50,
    )
    assert [c.name for c in result.taxonomy] == ["Gore", "Sex"]
    assert load_taxonomy(out).get("A").examples == ("bloody fight", "gunshot wound")
    with pytest.raises(ConfigError, match="needs --model"):
        discover(None, method="llm-only", reasons=planted_counts())


@pytest.mark.slow
def test_cli_discover_from_a_store(embedder: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "run.db"
    with Store(db) as store:
        fill_store(store, [Spec(f"s{i}", r) for i, r in enumerate(TRUTH)] + [Spec("no", "calm", harmful=False)])
    out = tmp_path / "draft.yaml"
    assert main(["categorize", "--discover", "--store", str(db), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "5 categories from 36 distinct reason(s) of 36 annotation(s)" in printed
    assert len(load_taxonomy(out)) == 5
    assert main(["categorize", "--discover", "--store", str(db), "--method", "embed"]) == 2
