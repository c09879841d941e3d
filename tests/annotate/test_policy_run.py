"""`vhd annotate --policy`: the policy reaches the store, the verdicts and the exports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vhd.annotate.api import annotate
from vhd.cli.main import main
from vhd.config import AnnotateConfig
from vhd.policy import default_policy, parse_policy
from vhd.store import Store

POLICY = """\
name: acme-moderation
version: "2026-11"
categories:
  - id: violence
    description: Physical harm to people or animals.
    forbids: ["graphic injury", "threats with a weapon"]
    allows: ["educational medical imagery such as X-rays"]
    examples:
      - {path: example.png, harmful: true, reason: graphic injury, severity: high}
severity:
  - {name: low, meaning: suggestive or mild}
  - {name: high, meaning: graphic or explicit}
"""

SCRIPT: dict[str, Any] = {
    "default": "1. An argument.",
    "rules": [
        # the judge's reply depends on the policy reaching its system prompt
        {"when": {"tag": "judge", "system": "X-rays"}, "reply": "Yes, graphic injury.\nSeverity: high"},
        {"when": {"tag": "judge"}, "reply": "No, nothing harmful."},
    ],
}


@pytest.fixture
def media(tmp_path: Path) -> Path:
    folder = tmp_path / "media"
    folder.mkdir()
    Image.new("RGB", (16, 16), (200, 0, 0)).save(folder / "red.png")
    Image.new("RGB", (16, 16), (0, 0, 200)).save(tmp_path / "example.png")
    (tmp_path / "acme.yaml").write_text(POLICY, encoding="utf-8")
    return folder


def config() -> AnnotateConfig:
    return AnnotateConfig(model="scripted:policy", backends={"scripted": {"script": SCRIPT}})


def test_a_policy_run_records_policy_severity_and_examples(media: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    default_run = annotate([media], store=store, config=config())
    policy_run = annotate([media], store=store, config=config(), policy=tmp_path / "acme.yaml")
    assert policy_run.config_hash != default_run.config_hash
    with Store(store) as db:
        kept = {row.key: row for row in db.policies()}
        assert set(kept) == {"vhd11k@1.0", "acme-moderation@2026-11"}
        assert parse_policy(kept["acme-moderation@2026-11"].text).content_hash == kept["acme-moderation@2026-11"].hash
        assert kept["vhd11k@1.0"].hash == default_policy().content_hash
        assert db.run_policy(policy_run.run_id).key == "acme-moderation@2026-11"  # type: ignore[union-attr]
        before = db.annotations_for(
            [s.id for s, _ in db.iter_annotations(default_run.config_hash)], default_run.config_hash
        )
        after = dict((s.id, a) for s, a in db.iter_annotations(policy_run.config_hash))
        assert [a.verdict.harmful for a in before.values()] == [False]
        (ann,) = after.values()
        assert ann.verdict.harmful is True and ann.verdict.severity == "high"
        assert ann.policy == "acme-moderation@2026-11"
        judge = ann.turns[-1]
        assert judge.text.endswith("Severity: high")
        # the policy's example became an in-context example: its image and answer precede the sample
        assert db.get_annotation(ann.sample_id, policy_run.config_hash).verdict.severity == "high"  # type: ignore[union-attr]


def test_exports_carry_severity_and_policy(media: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    run = annotate([media], store=store, config=config(), policy=tmp_path / "acme.yaml")
    out = tmp_path / "out.jsonl"
    assert main(["export", str(store), "--format", "jsonl", "--config-hash", run.config_hash, "-o", str(out)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["severity"] == "high" and row["policy"] == "acme-moderation@2026-11"


def test_policy_examples_reach_the_judge(media: Path, tmp_path: Path) -> None:
    from vhd.annotate.options import RunOptions
    from vhd.annotate.plan import make_plan

    cfg = config().with_overrides(policy=str(tmp_path / "acme.yaml"))
    plan = make_plan([media], cfg, store=tmp_path / "s.db", options=RunOptions(), executor=None)
    (example,) = plan.examples
    assert example.answer == "Yes, graphic injury.\nSeverity: high"
    assert example.path == str(tmp_path / "example.png")


def test_a_bad_policy_stops_before_any_work(media: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(POLICY.replace("forbids:", "forbidz:"), encoding="utf-8")
    code = main(
        ["annotate", str(media), "--model", "scripted:demo", "--store", str(tmp_path / "s.db"), "--policy", str(bad)]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "bad.yaml:6: categories[0]: unknown key 'forbidz'" in err
    assert not (tmp_path / "s.db").exists() or Store(tmp_path / "s.db").runs() == []


def test_show_prints_severity_and_policy(media: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.db"
    run = annotate([media], store=store, config=config(), policy=tmp_path / "acme.yaml")
    capsys.readouterr()
    assert main(["show", str(store), str(media / "red.png"), "--config-hash", run.config_hash]) == 0
    out = capsys.readouterr().out
    assert "severity: high" in out and "policy: acme-moderation@2026-11" in out
    assert main(["show", str(store), str(media / "red.png"), "--config-hash", run.config_hash, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["severity"] == "high" and data["policy"] == "acme-moderation@2026-11"


def test_runs_name_their_policy(media: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.db"
    annotate([media], store=store, config=config(), policy=tmp_path / "acme.yaml")
    capsys.readouterr()
    assert main(["runs", str(store), "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["policy"] == "acme-moderation@2026-11"
    assert main(["runs", str(store)]) == 0
    assert "policy acme-moderation@2026-11" in capsys.readouterr().out
